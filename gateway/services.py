"""The gateway's session log: a row when a user signs in, closed when the connection ends."""

from __future__ import annotations

from django.utils import timezone

from gateway.models import GatewaySession
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
