"""Who may go where through the gateway: one decision per signed-in key and login name.

The login name (before the ``@``) is an instance's id or its name; it is looked up among the
instances of the accounts that hold the key and of the teams their holders belong to, so another
user's instance is "not found", exactly as a page would 404. On a team's instance the key's holder
must be allowed to operate it (``teams.access``: the team's admins, its launcher while a member who may
launch), checked at every connection, so a member removed from the team is refused at once. Every
refusal carries the message the user is shown.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.utils import formats
from django.utils.translation import gettext as _

from accounts.models import SSHKey
from instances.models import Instance
from providers import BackendError, SshTarget, get_backend
from teams.access import Access, membership_access
from teams.models import Membership


@dataclass(frozen=True)
class Verdict:
    """The gateway's answer for one signed-in key: a target, or a refusal to show."""

    user_id: int
    key_fingerprint: str
    instance_id: uuid.UUID | None = None
    target: SshTarget | None = None
    refusal: str = ""

    @property
    def allowed(self) -> bool:
        return not self.refusal and self.target is not None


def _matching(login: str, owner_ids: list[int]):
    instances = Instance.objects.filter(owner_id__in=owner_ids).select_related("owner")
    try:
        return list(instances.filter(pk=uuid.UUID(login)))
    except ValueError:
        return list(instances.filter(name=login))


def gateway_verdict(*, login: str, fingerprint: str) -> Verdict | None:
    """What the holder of the key ``fingerprint`` may do as ``login``; None: no account holds the key
    (a stranger, or a key removed from its account), which is refused before signing in.

    The key must be one chosen for the instance (the keys it accepts over direct SSH too); the instance
    must be running, and its provider must say where its sshd listens (it asks, as the web proxy does).
    """
    keys = list(SSHKey.objects.filter(fingerprint=fingerprint, user__is_active=True).only("id", "user_id"))
    if not keys:
        return None
    people = [key.user_id for key in keys]
    memberships = list(
        Membership.objects.filter(user_id__in=people)
        .select_related("team")
        .only("id", "role", "user_id", "team_id", "team__account_id")
    )
    owner_ids = people + sorted({m.team.account_id for m in memberships})

    def refuse(message: str, user_id: int = people[0], instance: Instance | None = None) -> Verdict:
        return Verdict(
            user_id=user_id,
            key_fingerprint=fingerprint,
            instance_id=instance.pk if instance else None,
            refusal=message,
        )

    found = _matching(login, owner_ids)
    live = [i for i in found if i.status != Instance.Status.RELEASED]
    if not found:
        return refuse(
            _("No instance %(login)s in your account. Log in as the instance's id, as its page shows.")
            % {"login": login}
        )
    if not live:
        released = max(found, key=lambda i: i.status_changed_at)
        return refuse(
            _("Instance %(name)s was released on %(when)s; it can no longer be reached.")
            % {"name": released.name, "when": formats.date_format(released.status_changed_at, "DATETIME_FORMAT")},
            released.owner_id,
            released,
        )
    if len(live) > 1:
        return refuse(
            _("Several of your instances are named %(login)s: log in as the instance's id instead.") % {"login": login}
        )
    instance = live[0]
    person = _operator(instance, people=people, memberships=memberships)
    if person is None:
        return refuse(
            _(
                "Instance %(name)s was launched by another member of the team: only they and the team's admins "
                "may log in to it."
            )
            % {"name": instance.name},
            people[0],
            instance,
        )
    if not instance.ssh_keys.filter(fingerprint=fingerprint).exists():
        return refuse(
            _("The key %(fingerprint)s was not chosen for instance %(name)s; log in with a key chosen at launch.")
            % {"fingerprint": fingerprint, "name": instance.name},
            person,
            instance,
        )
    if instance.status != Instance.Status.RUNNING:
        return refuse(
            _("Instance %(name)s is %(status)s; it can be reached while it runs.")
            % {"name": instance.name, "status": instance.get_status_display().lower()},
            person,
            instance,
        )
    try:
        ssh_target = getattr(get_backend(instance.backend_alias), "ssh_target", None)
        target = ssh_target(key=instance.key) if ssh_target else None
    except (BackendError, ImproperlyConfigured):
        target = None
    if target is None:
        return refuse(_("Instance %(name)s serves no SSH right now.") % {"name": instance.name}, person, instance)
    return Verdict(user_id=person, key_fingerprint=fingerprint, instance_id=instance.pk, target=target)


def _operator(instance: Instance, *, people: list[int], memberships: list[Membership]) -> int | None:
    """The key holder (of ``people``) who may operate ``instance`` now, or None."""
    if instance.owner_id in people:
        return instance.owner_id
    for membership in memberships:
        if membership.team.account_id != instance.owner_id:
            continue
        access = membership_access(
            membership=membership, user_id=membership.user_id, created_by_id=instance.created_by_id
        )
        if access == Access.OPERATE:
            return membership.user_id
    return None
