"""Billing's template helpers: transaction badges, signed amounts, the dashboard's trial-credit step."""

from __future__ import annotations

from django import template
from django.conf import settings

from billing.selectors import trial_claimed
from core.formatting import cny
from identity.services import trial_refusal

register = template.Library()

TX_BADGES = {
    "topup": "green",
    "usage": "indigo",
    "refund": "blue",
    "trial_grant": "yellow",
    "trial_expiry": "",
    "adjustment": "blue",
    "transfer": "indigo",
}


@register.filter
def tx_badge(kind: str) -> str:
    return TX_BADGES.get(kind, "")


@register.filter
def signed_cny(fen: int | None) -> str:
    """``+¥10.00`` / ``-¥0.32``: a movement, signed even when positive."""
    if fen is None:
        return "—"
    return ("+" if fen > 0 else "") + cny(fen)


@register.inclusion_tag("billing/_trial_claim_step.html", takes_context=True)
def trial_claim_step(context):
    """The dashboard's 'claim your trial credit' step: shown until claimed, explains when it cannot be."""
    request = context.get("request")
    user = getattr(request, "user", None)
    amount = int(settings.BILLING_TRIAL_CREDIT_FEN)
    if user is None or not user.is_authenticated or amount <= 0:
        return {"show": False}
    # In a team the person acts on the team's wallet, which gets no trial credit: no step to show.
    if getattr(request, "membership", None) is not None or trial_claimed(user=user):
        return {"show": False}
    return {
        "show": True,
        "amount": amount,
        # Verified as IDENTITY_TRIAL_REQUIRES asks (an e-mail address, a mobile number, a real name): else why not.
        "refusal": trial_refusal(user=user),
        "ttl_days": settings.BILLING_TRIAL_CREDIT_TTL_DAYS,
        "csrf_token": context.get("csrf_token"),
        "next": request.get_full_path(),
    }
