"""Identity's verbs: SMS codes, mobile log-in and numbers, real-name verification, the trial's one person.

Codes: six digits, stored as an HMAC, valid ``IDENTITY_SMS_CODE_TTL_S`` and once; a code tried wrong
``IDENTITY_SMS_MAX_ATTEMPTS`` times is dead. Texts are counted per number, per address and per device
(a random cookie) in a sliding window (``IDENTITY_SMS_LIMITS``), with one per number per
``IDENTITY_SMS_RESEND_S``: the sent codes' rows are the counter, so every process sees the same.

Person keys: an HMAC (``IDENTITY_HASH_KEY``) of a normalised number or ID number. ``TrialClaim`` holds
them under a unique constraint, so a number or an identity gets one trial however many accounts share it.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import uuid
from datetime import timedelta

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext as _

from identity.errors import (
    CodeRefused,
    IdentityError,
    PhoneTaken,
    RealNameRejected,
    RealNameRequired,
    RealNameUnavailable,
    SmsUnavailable,
    TooManyCodes,
    TrialRefused,
)
from identity.models import PhoneCode, PhoneNumber, RealNameVerification, TrialClaim
from identity.normalise import (
    credit_code_normalise,
    id_number_normalise,
    name_clean,
    name_mask,
    phone_mask,
    phone_normalise,
)
from identity.realname import provider_get
from identity.realname.base import RealNameProviderUnavailable
from identity.selectors import real_name_verified
from identity.sms import sender_get
from identity.sms.base import SmsBadNumber, SmsError

logger = logging.getLogger(__name__)

Purpose = PhoneCode.Purpose
Status = RealNameVerification.Status
PHONE_EMAIL_DOMAIN = "phone.invalid"  # RFC 2606: a phone-only account's address, never delivered


# --- Keys -----------------------------------------------------------------------------------------


def person_key(*, kind: str, value: str) -> str:
    """``kind:`` and the HMAC of a normalised number or ID: equal for one person, useless to a reader.

    ``IDENTITY_HASH_KEY`` must never change once trials are claimed (the keys would stop matching)."""
    digest = salted_hmac("identity.person", f"{kind}:{value}", secret=settings.IDENTITY_HASH_KEY, algorithm="sha256")
    return f"{kind}:{digest.hexdigest()}"


def _code_hash(*, number: str, purpose: str, code: str) -> str:
    return salted_hmac("identity.code", f"{number}|{purpose}|{code}", algorithm="sha256").hexdigest()


# --- Codes ----------------------------------------------------------------------------------------


def _number_or_refuse(number: str) -> str:
    normalised = phone_normalise(number)
    if normalised is None:
        raise IdentityError(_("Enter a mainland China mobile number (11 digits, starting with 1)."), field="number")
    return normalised


def _limits_check(*, number: str, ip: str | None, device: str) -> None:
    """Refuse (``TooManyCodes``) a text over any limit; the number's per-minute resend first."""
    now = timezone.now()
    last = PhoneCode.objects.filter(number=number).order_by("-created_at").values_list("created_at", flat=True).first()
    resend = int(settings.IDENTITY_SMS_RESEND_S)
    if last is not None and (now - last).total_seconds() < resend:
        wait = resend - int((now - last).total_seconds())
        raise TooManyCodes(
            _("A code was just sent to this number. You can ask for another in %(s)d seconds.") % {"s": wait},
            retry_after=wait,
            field="number",
        )
    for scope, value in (("number", number), ("ip", ip), ("device", device)):
        if not value:
            continue
        count, window = settings.IDENTITY_SMS_LIMITS[scope]
        since = now - timedelta(seconds=window)
        recent = PhoneCode.objects.filter(**{scope: value}, created_at__gt=since).order_by("created_at")
        if recent.count() >= count:
            oldest = recent.values_list("created_at", flat=True).first()
            wait = max(int((oldest + timedelta(seconds=window) - now).total_seconds()), 1)
            raise TooManyCodes(
                _("Too many codes were asked for. Try again in %(m)d minutes.") % {"m": (wait + 59) // 60},
                retry_after=wait,
            )


def phone_code_send(*, number: str, purpose: str, ip: str | None, device: str, user=None) -> PhoneCode:
    """Text a new code to ``number`` for ``purpose`` and return its row (the code itself is not kept).

    Refuses an invalid number, a number over its limits (``TooManyCodes``), for ``add`` a number on
    another account (``PhoneTaken``); raises ``SmsUnavailable`` when the provider does not take it (the
    row still counts against the limits, and is dead). A log-in code goes to any valid number: whether
    it has an account is told by nothing, so the form cannot be used to find out.
    """
    number = _number_or_refuse(number)
    if purpose == Purpose.ADD and PhoneNumber.objects.filter(number=number).exclude(user=user).exists():
        raise PhoneTaken(_("This number belongs to another account."), field="number")
    code = f"{secrets.randbelow(10**6):06d}"
    ttl = int(settings.IDENTITY_SMS_CODE_TTL_S)
    with transaction.atomic():
        # One sender per number at a time, so two requests cannot both pass the count.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"identity.sms:{number}"])
        _limits_check(number=number, ip=ip, device=device)
        now = timezone.now()
        row = PhoneCode.objects.create(
            number=number,
            purpose=purpose,
            code_hash=_code_hash(number=number, purpose=purpose, code=code),
            user=user,
            ip=ip or None,
            device=device[:64],
            created_at=now,
            expires_at=now + timedelta(seconds=ttl),
        )
    try:
        sender_get().send_code(number=number, code=code, purpose=purpose, ttl_minutes=max(ttl // 60, 1))
    except SmsError as exc:
        PhoneCode.objects.filter(pk=row.pk).update(used_at=timezone.now())  # never sent: never usable
        if isinstance(exc, SmsBadNumber):
            raise IdentityError(_("This number cannot receive texts. Check it and try again."), field="number") from exc
        raise SmsUnavailable(_("Text messages cannot be sent right now. Please try again in a minute.")) from exc
    return row


def phone_code_check(*, number: str, purpose: str, code: str, user=None) -> PhoneCode:
    """Use the latest live code for ``number`` and ``purpose``: once, before it expires, within its tries.

    Wrong, expired, used and unknown all raise the same ``CodeRefused``. A wrong try is counted in its
    own transaction, so the refusal does not roll the count back.
    """
    number = _number_or_refuse(number)
    code = "".join((code or "").split())
    refused = CodeRefused(_("That code is not right, or it has expired. Ask for a new one."), field="code")
    now = timezone.now()
    with transaction.atomic():
        rows = PhoneCode.objects.select_for_update().filter(
            number=number, purpose=purpose, used_at__isnull=True, expires_at__gt=now
        )
        if purpose == Purpose.ADD:
            rows = rows.filter(user=user)
        row = rows.order_by("-created_at").first()
        if row is None or row.failed_attempts >= int(settings.IDENTITY_SMS_MAX_ATTEMPTS):
            raise refused
        expected = _code_hash(number=number, purpose=purpose, code=code)
        if not (code.isdigit() and len(code) == 6 and hmac.compare_digest(expected, row.code_hash)):
            PhoneCode.objects.filter(pk=row.pk).update(failed_attempts=row.failed_attempts + 1)
            ok = False
        else:
            ok = bool(PhoneCode.objects.filter(pk=row.pk, used_at__isnull=True).update(used_at=now))
            row.used_at = now
    if not ok:
        raise refused
    return row


def phone_codes_prune(*, now=None) -> int:
    """Delete codes a day past their expiry (the limits look back an hour at most)."""
    now = now or timezone.now()
    deleted, _counts = PhoneCode.objects.filter(expires_at__lt=now - timedelta(days=1)).delete()
    return deleted


# --- Numbers and mobile log-in ------------------------------------------------------------------------


def phone_login(*, number: str, code: str):
    """The account of a verified code's number, made when the number has none: ``(user, created)``.

    A new account has no e-mail address yet (a placeholder under ``phone.invalid``, never delivered:
    the user model wants one) and its masked number as its display name; e-mail can be added later.
    """
    row = phone_code_check(number=number, purpose=Purpose.LOGIN, code=code)
    existing = PhoneNumber.objects.select_related("user").filter(number=row.number).first()
    if existing is not None:
        return existing.user, False
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                email=f"phone-{uuid.uuid4().hex}@{PHONE_EMAIL_DOMAIN}",
                password=None,
                display_name=phone_mask(row.number),
            )
            PhoneNumber.objects.create(user=user, number=row.number, verified_at=timezone.now())
    except IntegrityError:
        # Another request signed this number up in the same instant: that account is the one.
        return PhoneNumber.objects.select_related("user").get(number=row.number).user, False
    return user, True


def phone_set(*, user, number: str, code: str) -> PhoneNumber:
    """Verify ``number`` for ``user`` with its code, replacing the account's earlier number."""
    row = phone_code_check(number=number, purpose=Purpose.ADD, code=code, user=user)
    try:
        with transaction.atomic():
            phone, _created = PhoneNumber.objects.update_or_create(
                user=user, defaults={"number": row.number, "verified_at": timezone.now()}
            )
    except IntegrityError:
        raise PhoneTaken(_("This number belongs to another account."), field="number") from None
    return phone


def has_email(user) -> bool:
    """Whether the account has a real (verified) e-mail address, not a phone account's placeholder."""
    return EmailAddress.objects.filter(user=user, verified=True).exists()


# --- Real names ---------------------------------------------------------------------------------------


def real_name_verify_individual(*, user, name: str, id_number: str) -> RealNameVerification:
    """Check a person's name and ID number with the provider; keep the verdict, never the number.

    Refuses an invalid number, an account already verified or waiting, and more than
    ``IDENTITY_REAL_NAME_DAILY_TRIES`` refusals a day (each check is paid for). A "no" is kept as a
    rejected row (the count) and raised as ``RealNameRejected``; no verdict is ``RealNameUnavailable``.
    """
    name = name_clean(name)
    if not 2 <= len(name) <= 50:
        raise IdentityError(_("Enter your name as on your ID card."), field="name")
    normalised = id_number_normalise(id_number)
    if normalised is None:
        raise IdentityError(_("Enter a valid 18-character resident ID number."), field="id_number")
    _live_refuse(user=user)
    since = timezone.now() - timedelta(days=1)
    if RealNameVerification.objects.filter(user=user, status=Status.REJECTED, created_at__gt=since).count() >= int(
        settings.IDENTITY_REAL_NAME_DAILY_TRIES
    ):
        raise RealNameRejected(_("Too many attempts today. Try again tomorrow."))
    provider = provider_get()
    if provider is None:
        raise RealNameUnavailable(_("This console does not verify individuals' real names."))
    try:
        verdict = provider.verify(name=name, id_number=normalised)
    except RealNameProviderUnavailable as exc:
        raise RealNameUnavailable(
            _("Real-name verification is unavailable right now. Please try again later.")
        ) from exc
    row = RealNameVerification(
        user=user,
        kind=RealNameVerification.Kind.INDIVIDUAL,
        status=Status.VERIFIED if verdict.matched else Status.REJECTED,
        masked_name=name_mask(name),
        person_key=person_key(kind="id", value=normalised) if verdict.matched else "",
        provider=provider.name,
        provider_reference=verdict.reference[:100],
        reason=verdict.reason,
        decided_at=timezone.now(),
    )
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        raise RealNameRejected(_("This account is already verified.")) from None
    if not verdict.matched:
        raise RealNameRejected(_("The name and ID number do not match the records. Check both and try again."))
    return row


ALLOWED_DOCUMENTS = {b"%PDF": "pdf", b"\x89PNG": "png", b"\xff\xd8\xff": "jpg"}


def real_name_submit_organisation(
    *, user, company_name: str, credit_code: str, document: UploadedFile
) -> RealNameVerification:
    """Queue an organisation for staff: its name, its credit code (checksum-valid) and its licence."""
    company_name = name_clean(company_name)
    if not 2 <= len(company_name) <= 200:
        raise IdentityError(_("Enter the organisation's registered name."), field="company_name")
    code = credit_code_normalise(credit_code)
    if code is None:
        raise IdentityError(_("Enter a valid 18-character unified social credit code."), field="credit_code")
    if document is None or document.size > int(settings.IDENTITY_DOCUMENT_MAX_BYTES):
        raise IdentityError(
            _("Upload the business licence as a PDF, PNG or JPEG of at most %(mb)d MB.")
            % {"mb": int(settings.IDENTITY_DOCUMENT_MAX_BYTES) // 2**20},
            field="document",
        )
    head = document.read(8)
    document.seek(0)
    kind = next((ext for magic, ext in ALLOWED_DOCUMENTS.items() if head.startswith(magic)), None)
    if kind is None:
        raise IdentityError(_("Upload the business licence as a PDF, PNG or JPEG."), field="document")
    _live_refuse(user=user)
    document.name = f"{uuid.uuid4().hex}.{kind}"  # the person's file name says nothing we need
    row = RealNameVerification(
        user=user,
        kind=RealNameVerification.Kind.ORGANISATION,
        status=Status.PENDING,
        masked_name=company_name,
        credit_code=code,
        document=document,
    )
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        raise RealNameRejected(_("This account is already verified or waiting for review.")) from None
    return row


def _live_refuse(*, user) -> None:
    if RealNameVerification.objects.filter(user=user, status__in=[Status.PENDING, Status.VERIFIED]).exists():
        raise RealNameRejected(_("This account is already verified or waiting for review."))


def real_name_review(*, verification_id: int, staff_user, approve: bool, reason: str = "") -> bool:
    """Staff's decision on a pending organisation; the licence file is deleted once decided.

    Compare-and-set: ``False`` when another reviewer decided first (nothing changes)."""
    reason = (reason or "").strip()[:300]
    if not approve and not reason:
        raise IdentityError(_("Say why it is rejected: the applicant reads it."), field="reason")
    row = RealNameVerification.objects.filter(pk=verification_id, kind=RealNameVerification.Kind.ORGANISATION).first()
    if row is None:
        raise RealNameVerification.DoesNotExist
    changes = {
        "status": Status.VERIFIED if approve else Status.REJECTED,
        "reviewed_by": staff_user,
        "decided_at": timezone.now(),
        "reason": "" if approve else reason,
        "document": "",
        "person_key": person_key(kind="org", value=row.credit_code) if approve else "",
    }
    moved = RealNameVerification.objects.filter(pk=row.pk, status=Status.PENDING).update(**changes)
    if moved and row.document:
        # After the commit: a rolled-back decision must still find its file.
        name, storage = row.document.name, row.document.storage
        transaction.on_commit(lambda: storage.delete(name))
    return bool(moved)


def real_name_check(*, user) -> None:
    """Refuse paid use (a top-up, a launch) by a person not verified, where the setting requires it."""
    if settings.IDENTITY_REAL_NAME_REQUIRED and not real_name_verified(user=user):
        raise RealNameRequired(
            _("Verify your real name (实名认证) in your account settings before topping up or launching.")
        )


# --- One trial per person -----------------------------------------------------------------------------


def trial_person_keys(*, user) -> list[str]:
    """The person keys of ``user`` for the trial, after checking they are verified as the setting requires.

    ``IDENTITY_TRIAL_REQUIRES``: ``email`` (a verified address: the console's default), ``phone``,
    ``real_name``, or ``phone_or_real_name``. Whatever the setting, every number and identity the
    account has verified is returned, so none of them brings a second trial. Raises ``TrialRefused``.
    """
    keys: list[str] = []
    phone = PhoneNumber.objects.filter(user=user).values_list("number", flat=True).first()
    if phone:
        keys.append(person_key(kind="phone", value=phone))
    identity = (
        RealNameVerification.objects.filter(user=user, status=Status.VERIFIED)
        .exclude(person_key="")
        .values_list("person_key", flat=True)
        .first()
    )
    if identity:
        keys.append(identity)
    requires = settings.IDENTITY_TRIAL_REQUIRES
    if requires == "email" and not has_email(user):
        raise TrialRefused(_("Verify your e-mail address to claim the trial credit."))
    if requires == "phone" and not phone:
        raise TrialRefused(_("Verify a mobile number in your account settings to claim the trial credit."))
    if requires == "real_name" and not identity:
        raise TrialRefused(_("Verify your real name in your account settings to claim the trial credit."))
    if requires == "phone_or_real_name" and not keys:
        raise TrialRefused(
            _("Verify a mobile number or your real name in your account settings to claim the trial credit.")
        )
    return keys


def trial_persons_claim(*, user, keys: list[str]) -> None:
    """Record that these people had their trial on ``user``; refuse when one had it on another account.

    Call inside the grant's transaction. Two accounts inserting one key at once: the second insert
    waits on the unique index until the first commits, then finds the key taken (a repeat on the same
    account finds its own rows and passes).
    """
    if not keys:
        return
    TrialClaim.objects.bulk_create([TrialClaim(person_key=key, user=user) for key in keys], ignore_conflicts=True)
    owners = set(TrialClaim.objects.filter(person_key__in=keys).values_list("user_id", flat=True))
    if owners != {user.pk}:
        raise TrialRefused(_("The trial credit was already given to this mobile number or identity."))


def trial_refusal(*, user) -> str:
    """Why ``user`` may not claim the trial as identity stands ("" when they may): for the dashboard's step."""
    try:
        keys = trial_person_keys(user=user)
    except TrialRefused as exc:
        return exc.message
    if TrialClaim.objects.filter(person_key__in=keys).exclude(user=user).exists():
        return _("The trial credit was already given to this mobile number or identity.")
    return ""


# --- For leaving: what identity holds of a person -----------------------------------------------------


def identity_export(*, user) -> dict:
    """What identity holds of ``user``, for their data export: the number, and each verification's verdict."""
    phone = PhoneNumber.objects.filter(user=user).first()
    return {
        "mobile_number": phone.number if phone else None,
        "mobile_number_verified_at": phone.verified_at.isoformat() if phone else None,
        "real_name_verifications": [
            {
                "kind": row.kind,
                "status": row.status,
                "name": row.masked_name,
                "credit_code": row.credit_code,
                "provider": row.provider,
                "provider_reference": row.provider_reference,
                "created_at": row.created_at.isoformat(),
                "decided_at": row.decided_at.isoformat() if row.decided_at else None,
            }
            for row in RealNameVerification.objects.filter(user=user).order_by("created_at")
        ],
    }


def identity_forget(*, user) -> None:
    """Delete what identity holds of ``user`` when their account is deleted or anonymised: the number,
    its codes, the verifications and any licence file. The trial claims stay (an HMAC, no longer linked
    to the account), so a deleted account's number or identity still brings no second trial."""
    with transaction.atomic():
        numbers = list(PhoneNumber.objects.filter(user=user).values_list("number", flat=True))
        PhoneCode.objects.filter(Q(user=user) | Q(number__in=numbers)).delete()
        PhoneNumber.objects.filter(user=user).delete()
        for row in RealNameVerification.objects.filter(user=user).exclude(document=""):
            name, storage = row.document.name, row.document.storage
            transaction.on_commit(lambda name=name, storage=storage: storage.delete(name))
        RealNameVerification.objects.filter(user=user).delete()
        TrialClaim.objects.filter(user=user).update(user=None)
