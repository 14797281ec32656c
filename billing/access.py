"""Whose wallet a request shows, and what the person asking may do with it.

Billing sits below teams and imports nothing of them. A request carries the account it acts on,
``request.principal`` (teams' middleware sets it: the person themself when personal, the team's account
in a team), and in a team the person's membership, ``request.membership``. In the personal context
the person may do everything with their own wallet. In a team, what the membership allows is asked
of the hook ``billing.hooks.team_wallets`` (teams answers it): ``allows(membership,
action)`` with one of billing's actions below, and ``is_team_account(user)`` (a team gets no trial
credit). Without the hook a membership allows nothing and no account is a team's.
"""

from __future__ import annotations

from billing.hooks import team_wallets

VIEW = "view"  # the balance, transactions, statements and spend
PAY = "pay"  # top up the wallet through a payment gateway


def principal(request):
    """The account whose wallet this request reads and spends: the acting context's, else the person.

    The middleware sets ``request.principal`` from the session before the API authenticates: when it
    saw nobody (a client authenticated another way, with no team), the person is the account.
    """
    found = getattr(request, "principal", None)
    if found is None or not getattr(found, "is_authenticated", False):
        return request.user
    return found


def allows(request, action: str) -> bool:
    """Whether the person may do ``action`` with the principal's wallet: always on their own."""
    membership = getattr(request, "membership", None)
    if membership is None:
        return True
    return bool(team_wallets.get().allows(membership=membership, action=action))


def is_team_account(user) -> bool:
    """Whether ``user`` is a team's account (no trial credit, no person to e-mail)."""
    return bool(user is not None and team_wallets.get().is_team_account(user=user))
