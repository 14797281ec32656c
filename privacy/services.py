"""Writes: legal texts and their acceptance, data exports, and account deletion.

Each function is a small, keyword-only service; tasks call them by id and may run them twice.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import timedelta

from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from accounts.models import APIToken, SecurityEvent, SSHKey, User
from apps_marketplace.models import Deployment
from apps_marketplace.services import deployment_delete
from core.errors import Refusal
from core.messages import reason as stored
from core.tasks import enqueue_on_commit
from devicelogin.models import DeviceAuthorization
from gateway.models import GatewaySession
from identity.services import identity_forget
from instances.models import Image, Instance
from instances.services import image_delete, instance_release
from invoices.models import InvoiceRequest
from notifications.models import Notification, NotificationPreference, WebhookEndpoint
from privacy import selectors
from privacy.errors import DeletionRefused, DocumentRefused, ExportRefused
from privacy.export import ExportTooLarge, export_zip_build
from privacy.models import Acceptance, DataExport, DeletionRequest, DocumentKind, DocumentVersion
from storage.models import Volume
from storage.services import volume_delete
from teams.models import Invitation, Membership, Role, Team
from teams.services import membership_leave
from vault.models import RegistryCredential, Secret

logger = logging.getLogger(__name__)

# --- Legal texts ---------------------------------------------------------------------------------------


def document_draft_create(*, kind: str, actor, source: DocumentVersion | None = None) -> DocumentVersion:
    """A new draft of ``kind``, numbered after every version so far, its texts copied from ``source``
    (or from the version in force) so staff edit rather than retype. One draft per kind at a time."""
    if kind not in DocumentKind.values:
        raise DocumentRefused(_("Unknown document."))
    if DocumentVersion.objects.filter(kind=kind, published_at__isnull=True).exists():
        raise DocumentRefused(_("There is already a draft of this document: edit it or publish it first."))
    source = source or selectors.document_in_force(kind=kind)
    with transaction.atomic():
        latest = DocumentVersion.objects.select_for_update().filter(kind=kind).aggregate(n=Max("version"))["n"] or 0
        return DocumentVersion.objects.create(
            kind=kind,
            version=latest + 1,
            title_en=source.title_en if source else DocumentKind(kind).label,
            title_zh=source.title_zh if source else "",
            body_en=source.body_en if source else "",
            body_zh=source.body_zh if source else "",
            created_by=actor,
        )


def document_draft_update(*, version: DocumentVersion, **texts: str) -> DocumentVersion:
    """Edit a draft's texts. A published version is fixed: what users accepted must stay readable as it was."""
    allowed = {"title_en", "title_zh", "body_en", "body_zh", "changes_en", "changes_zh"}
    unknown = set(texts) - allowed
    if unknown:
        raise ValueError(f"not a text of a document: {sorted(unknown)}")
    updated = DocumentVersion.objects.filter(pk=version.pk, published_at__isnull=True).update(**texts)
    if not updated:
        raise DocumentRefused(_("A published version cannot be changed: make a new draft instead."))
    version.refresh_from_db()
    return version


def document_publish(*, version: DocumentVersion, actor) -> DocumentVersion:
    """Publish a draft: it is in force at once, and every signed-in user is asked to accept it.

    Both languages must have a title and a text: a user is shown the one of their language."""
    missing = [f for f in ("title_en", "title_zh", "body_en", "body_zh") if not getattr(version, f).strip()]
    if missing:
        raise DocumentRefused(_("Write the title and the text in both languages before publishing."))
    moved = DocumentVersion.objects.filter(pk=version.pk, published_at__isnull=True).update(
        published_at=timezone.now(), published_by=actor
    )
    if not moved:
        raise DocumentRefused(_("This version is already published."))
    selectors.in_force_forget()
    version.refresh_from_db()
    return version


def documents_accept(*, user, versions, ip: str | None) -> int:
    """Record that ``user`` accepted each of ``versions`` (published ones only); a repeat is a no-op.

    Returns how many acceptances were new."""
    new = 0
    for version in versions:
        if version.published_at is None:
            continue
        _, created = Acceptance.objects.get_or_create(user=user, document=version, defaults={"ip": ip})
        new += int(created)
    return new


def documents_in_force_accept(*, user, ip: str | None) -> int:
    """Accept every version in force (sign-up: the form's required box covered both texts)."""
    ids = selectors.documents_in_force_ids()
    return documents_accept(user=user, versions=DocumentVersion.objects.filter(pk__in=ids.values()), ip=ip)


# --- The data export ----------------------------------------------------------------------------------


def data_export_request(*, user) -> DataExport:
    """Ask for an export of ``user``'s data, built by a worker (never in a web request: one large account
    must not hold a request thread). One at a time, and at most ``PRIVACY_EXPORTS_PER_DAY`` a day."""
    since = timezone.now() - timedelta(days=1)
    if DataExport.objects.filter(user=user, status__in=DataExport.ACTIVE).exists():
        raise ExportRefused(_("An export is already being prepared: wait for it to finish."))
    if DataExport.objects.filter(user=user, created_at__gte=since).count() >= settings.PRIVACY_EXPORTS_PER_DAY:
        raise ExportRefused(
            _("You have asked for %(n)d exports in the last 24 hours: try again tomorrow.")
            % {"n": settings.PRIVACY_EXPORTS_PER_DAY}
        )
    try:
        with transaction.atomic():
            export = DataExport.objects.create(user=user)
            enqueue_on_commit("privacy.tasks.data_export_build_task", export.pk)
    except IntegrityError:  # a second request at the same moment lost the race (one active per user)
        raise ExportRefused(_("An export is already being prepared: wait for it to finish.")) from None
    return export


def data_export_build(*, export_id: int) -> bool:
    """Task body: write the ZIP. Claimed by compare-and-set, so a repeated or duplicate task does
    nothing; a build left ``building`` by a worker that died is claimed again after
    ``PRIVACY_EXPORT_STALE_S``. Returns whether this call built it."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.PRIVACY_EXPORT_STALE_S)
    claimed = DataExport.objects.filter(pk=export_id, status=DataExport.Status.PENDING).update(
        status=DataExport.Status.BUILDING, started_at=now
    ) or DataExport.objects.filter(pk=export_id, status=DataExport.Status.BUILDING, started_at__lt=stale).update(
        started_at=now
    )
    if not claimed:
        return False
    export = DataExport.objects.select_related("user").get(pk=export_id)
    try:
        content = export_zip_build(user=export.user, limit_bytes=settings.PRIVACY_EXPORT_MAX_BYTES)
    except ExportTooLarge:
        DataExport.objects.filter(pk=export_id, status=DataExport.Status.BUILDING).update(
            status=DataExport.Status.FAILED,
            finished_at=timezone.now(),
            error=_("Your data is larger than an export can hold: contact support."),
        )
        return True
    finished = timezone.now()
    DataExport.objects.filter(pk=export_id, status=DataExport.Status.BUILDING).update(
        status=DataExport.Status.READY,
        content=content,
        size_bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        finished_at=finished,
        expires_at=finished + timedelta(hours=settings.PRIVACY_EXPORT_TTL_HOURS),
    )
    return True


def data_export_fail(*, export_id: int, error: str) -> None:
    """A task that failed for good leaves the export failed (not waiting), so the user may ask again."""
    DataExport.objects.filter(pk=export_id, status__in=DataExport.ACTIVE).update(
        status=DataExport.Status.FAILED, finished_at=timezone.now(), error=error[:300]
    )


def data_exports_expire(*, now=None) -> int:
    """Drop the ZIPs past their expiry (the beat). Returns how many expired."""
    now = now or timezone.now()
    return DataExport.objects.filter(status=DataExport.Status.READY, expires_at__lte=now).update(
        status=DataExport.Status.EXPIRED, content=None
    )


# --- Deletion -----------------------------------------------------------------------------------------


def email_hash(email: str) -> str:
    """HMAC-SHA256 of an address (lower-cased) under ``PRIVACY_HASH_KEY``: staff can check whether a given
    address's account was deleted, and nobody can read the address back from the record."""
    key = settings.PRIVACY_HASH_KEY.encode()
    return hmac.new(key, email.strip().lower().encode(), hashlib.sha256).hexdigest()


def _teams_last_owned(user) -> list[str]:
    """Names of the teams ``user`` is the only owner of (deleting them would leave a team nobody owns)."""
    names = []
    owned = Membership.objects.filter(user=user, role=Role.OWNER).select_related("team")
    for membership in owned:
        others = Membership.objects.filter(team=membership.team, role=Role.OWNER).exclude(user=user).exists()
        if not others:
            names.append(membership.team.name)
    return names


def deletion_request(*, user) -> DeletionRequest:
    """Schedule ``user``'s account for deletion after ``PRIVACY_DELETION_GRACE_DAYS`` (cancellable until then).

    Refused for the only owner of a team: they make someone else owner, or delete the team, first."""
    if Team.objects.filter(account=user).exists():  # a team's own account: deleted with the team
        raise DeletionRefused(_("A team's account is deleted by deleting the team."))
    owned = _teams_last_owned(user)
    if owned:
        raise DeletionRefused(
            _(
                "You are the only owner of %(teams)s. Make another member owner, or delete the team, "
                "before you delete your account."
            )
            % {"teams": ", ".join(sorted(owned))}
        )
    if selectors.deletion_open_for(user=user) is not None:
        raise DeletionRefused(_("Your account is already scheduled for deletion."))
    now = timezone.now()
    try:
        with transaction.atomic():
            return DeletionRequest.objects.create(
                user=user,
                email_hash=email_hash(user.email),
                requested_at=now,
                due_at=now + timedelta(days=settings.PRIVACY_DELETION_GRACE_DAYS),
            )
    except IntegrityError:  # two requests at once: one is enough
        raise DeletionRefused(_("Your account is already scheduled for deletion.")) from None


def deletion_cancel(*, request: DeletionRequest) -> bool:
    """Cancel within the warning period. Returns False once the deletion has started (too late)."""
    moved = DeletionRequest.objects.filter(pk=request.pk, status=DeletionRequest.Status.SCHEDULED).update(
        status=DeletionRequest.Status.CANCELLED, cancelled_at=timezone.now()
    )
    request.refresh_from_db()
    return bool(moved)


def deletions_due(*, now=None) -> int:
    """The beat: start every deletion whose warning period is over, and advance those under way.

    Returns how many were completed by this call."""
    now = now or timezone.now()
    due = DeletionRequest.objects.filter(status=DeletionRequest.Status.SCHEDULED, due_at__lte=now)
    for pk, user_id in due.values_list("pk", "user_id"):
        with transaction.atomic():
            if DeletionRequest.objects.filter(pk=pk, status=DeletionRequest.Status.SCHEDULED).update(
                status=DeletionRequest.Status.RELEASING, started_at=now
            ):
                # No way back in from here: sessions and API tokens stop working (an inactive user
                # authenticates nowhere), so nothing new is launched while the old resources go.
                User.objects.filter(pk=user_id).update(is_active=False)
                APIToken.objects.filter(user_id=user_id, revoked_at__isnull=True).update(revoked_at=now)
    completed = 0
    for pk in DeletionRequest.objects.filter(status=DeletionRequest.Status.RELEASING).values_list("pk", flat=True):
        completed += int(deletion_advance(request_id=pk))
    return completed


# An instance in these statuses holds nothing and bills nothing; a volume likewise.
_INSTANCE_GONE = (Instance.Status.RELEASED, Instance.Status.FAILED, Instance.Status.LOST)
_VOLUME_GONE = (Volume.Status.DELETED, Volume.Status.FAILED)


def _resources_release(*, user, reason: str) -> dict:
    """Ask for every resource of ``user`` to go, through each app's own service (their meters close,
    their teams' audit logs are written as for any release). Safe to repeat: each service does nothing
    for what is already going. Returns counts of what is still not gone."""
    for deployment in Deployment.objects.filter(owner=user).select_related("instance"):
        deployment_delete(deployment=deployment)
    for instance in Instance.objects.filter(owner=user).exclude(
        status__in=(*_INSTANCE_GONE, Instance.Status.RELEASING)
    ):
        try:
            instance_release(instance=instance, reason=reason)
        except Refusal as exc:  # busy in a way release cannot start from: the next pass tries again
            logger.info("deletion: instance %s not released yet: %s", instance.pk, exc)
    for volume in Volume.objects.filter(owner=user).exclude(status__in=(*_VOLUME_GONE, Volume.Status.DELETING)):
        try:
            volume_delete(volume=volume, reason=reason)
        except Refusal as exc:  # still attached to an instance being released, or resizing
            logger.info("deletion: volume %s not deleted yet: %s", volume.pk, exc)
    # Saved images: deleted once no instance of the account uses them any more (their storage meters close).
    for image in Image.objects.filter(owner=user).exclude(status__in=(Image.Status.DELETED, Image.Status.SAVING)):
        try:
            image_delete(image=image)
        except Refusal as exc:  # an instance launched from it is still being released
            logger.info("deletion: image %s not deleted yet: %s", image.slug, exc)
    return {
        "images_left": Image.objects.filter(owner=user).exclude(status=Image.Status.DELETED).count(),
        "instances_left": Instance.objects.filter(owner=user).exclude(status__in=_INSTANCE_GONE).count(),
        "volumes_left": Volume.objects.filter(owner=user).exclude(status__in=_VOLUME_GONE).count(),
        "deployments_left": Deployment.objects.filter(owner=user).count(),
    }


def deletion_advance(*, request_id: int) -> bool:
    """One pass of a deletion under way: release what is left; once nothing is, anonymise and complete.

    Repeatable: a pass that finds resources still going (a provider's release takes a while) leaves the
    request ``releasing`` for the next beat. Returns whether this pass completed it."""
    request = (
        DeletionRequest.objects.select_related("user")
        .filter(pk=request_id, status=DeletionRequest.Status.RELEASING)
        .first()
    )
    if request is None:
        return False
    user = request.user
    left = _resources_release(user=user, reason=stored(gettext_noop("Released: its owner deleted their account")))
    if any(left.values()):
        DeletionRequest.objects.filter(pk=request.pk).update(summary={**request.summary, **left})
        return False
    with transaction.atomic():
        locked = DeletionRequest.objects.select_for_update().get(pk=request.pk)
        if locked.status != DeletionRequest.Status.RELEASING:
            return False
        counts = _personal_data_erase(user=user)
        released = {
            "instances": Instance.objects.filter(owner=user).count(),
            "volumes": Volume.objects.filter(owner=user).count(),
        }
        DeletionRequest.objects.filter(pk=locked.pk).update(
            status=DeletionRequest.Status.COMPLETED,
            completed_at=timezone.now(),
            summary={"resources": released, "erased": counts},
        )
    logger.info("deletion request %s completed: %s", request.pk, counts)
    return True


def _personal_data_erase(*, user) -> dict[str, int]:
    """Anonymise ``user`` and delete what only identifies them; keep what the law keeps.

    Kept: the user row (its id, anonymised, holds the ledger accounts, meters, top-ups, instances'
    history and invoices together, so the books still balance and tax records stay whole); the ledger;
    invoice requests, with the e-mail removed and a person's name (a 个人 title) replaced. Deleted: log-in
    addresses, passwords and second factors, SSH keys, API tokens, the security log, gateway sessions,
    device log-ins, notifications and webhooks, secrets, pending team invitations to the address, acceptances and
    exports, the mobile number and real-name verifications. Memberships end (the teams' audit logs record a departed member under the anonymised name).
    """
    old_email = user.email
    counts: dict[str, int] = {}
    user.email = f"deleted-{user.pk}@deleted.invalid"
    user.display_name = ""
    user.first_name = ""
    user.last_name = ""
    user.is_active = False
    user.is_staff = False
    user.is_superuser = False
    user.last_login = None
    user.set_unusable_password()  # also ends every session: the session's auth hash no longer matches
    user.save()
    for membership in list(Membership.objects.filter(user=user).select_related("team")):
        membership_leave(user=user, team=membership.team)
    counts["memberships"] = Membership.objects.filter(user=user).count()
    counts["invitations"] = Invitation.objects.filter(
        email__iexact=old_email, status=Invitation.Status.PENDING
    ).delete()[0]
    counts["email_addresses"] = EmailAddress.objects.filter(user=user).delete()[0]
    counts["second_factors"] = Authenticator.objects.filter(user=user).delete()[0]
    counts["ssh_keys"] = SSHKey.objects.filter(user=user).delete()[0]
    # The person's secrets (their instances boot without them from now on); a team's stay the team's.
    counts["secrets"] = Secret.objects.filter(owner=user).delete()[0]
    counts["registry_credentials"] = RegistryCredential.objects.filter(owner=user).delete()[0]
    # The mobile number, its codes, real-name verifications and any licence file (the trial claims stay,
    # unlinked: an HMAC of a number or ID, so a deleted account's person still gets no second trial).
    identity_forget(user=user)
    counts["api_tokens"] = APIToken.objects.filter(user=user).delete()[0]
    # The security log is append-only against edits by mistake; erasing its person's log is the one
    # deliberate exception (its IPs and user agents are theirs), through the base manager.
    counts["security_events"] = SecurityEvent._base_manager.filter(user=user).delete()[0]
    counts["gateway_sessions"] = GatewaySession.objects.filter(user=user).delete()[0]
    counts["device_logins"] = DeviceAuthorization.objects.filter(user=user).delete()[0]
    counts["notifications"] = Notification.objects.filter(user=user).delete()[0]
    NotificationPreference.objects.filter(user=user).delete()
    counts["webhooks"] = WebhookEndpoint.objects.filter(user=user).delete()[0]
    counts["acceptances"] = Acceptance.objects.filter(user=user).delete()[0]
    counts["exports"] = DataExport.objects.filter(user=user).delete()[0]
    counts["invoices_anonymised"] = InvoiceRequest.objects.filter(user=user).update(email="deleted@deleted.invalid")
    InvoiceRequest.objects.filter(user=user, title_type=InvoiceRequest.TitleType.PERSONAL).update(
        title=f"deleted-{user.pk}"
    )
    return counts
