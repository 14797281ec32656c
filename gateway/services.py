"""The gateway's session log (a row when a user signs in, closed when the connection ends) and the pinned
host keys of instances' sshd (``gateway.hostkeys``)."""

from __future__ import annotations

from django.utils import timezone

from gateway.models import GatewaySession, InstanceHostKey
from gateway.selectors import Verdict


def gateway_session_open(*, verdict: Verdict, login: str, peer: str) -> GatewaySession:
    return GatewaySession.objects.create(
        user_id=verdict.user_id,
        instance_id=verdict.instance_id,
        login=login[:128],
        key_fingerprint=verdict.key_fingerprint,
        peer=peer[:64],
        outcome=GatewaySession.Outcome.CONNECTED if verdict.allowed else GatewaySession.Outcome.REFUSED,
        reason=verdict.refusal,
    )


def gateway_session_close(*, session_id: int) -> bool:
    """Stamp the end once (a repeat leaves the first end): True when this call closed it."""
    return bool(GatewaySession.objects.filter(pk=session_id, ended_at=None).update(ended_at=timezone.now()))


def gateway_session_host_key_changed(*, session_id: int, reason: str) -> bool:
    """Mark a connection whose instance showed another host key than the pinned one: the user was told
    ``reason`` and nothing was joined. True when the row was there to mark."""
    return bool(
        GatewaySession.objects.filter(pk=session_id).update(
            outcome=GatewaySession.Outcome.HOST_KEY_CHANGED, reason=reason
        )
    )


def instance_host_key_pin(*, instance_id, key: str, fingerprint: str) -> InstanceHostKey:
    """Trust ``key`` for the instance if none is pinned yet; the pinned row either way. Two first
    connections at once both create: the primary key keeps one, and the other reads it back (and
    refuses its own key if it differs)."""
    pinned, _created = InstanceHostKey.objects.get_or_create(
        instance_id=instance_id, defaults={"key": key, "fingerprint": fingerprint}
    )
    return pinned
