"""The one access rule of resources: personal → owner only; a team's → admins/owners operate all, a
member operates what they created and sees the rest, a billing viewer and a stranger get nothing."""

from __future__ import annotations

import pytest

from teams.access import Access, resource_access
from teams.models import Membership, Role
from teams.services import team_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model):
    return {
        name: django_user_model.objects.create_user(email=f"{name}@example.com", password="x" * 12)
        for name in ("owner", "admin", "member", "other", "billing", "stranger")
    }


def test_the_rule_for_each_role(people):
    team = team_create(user=people["owner"], name="Lab")
    for name, role in (
        ("admin", Role.ADMIN),
        ("member", Role.MEMBER),
        ("other", Role.MEMBER),
        ("billing", Role.BILLING),
    ):
        Membership.objects.create(team=team, user=people[name], role=role)
    made_by_member = {"owner_id": team.account.pk, "created_by_id": people["member"].pk}

    assert resource_access(user=people["owner"], **made_by_member) == Access.OPERATE
    assert resource_access(user=people["admin"], **made_by_member) == Access.OPERATE
    assert resource_access(user=people["member"], **made_by_member) == Access.OPERATE
    assert resource_access(user=people["other"], **made_by_member) == Access.VIEW
    assert resource_access(user=people["billing"], **made_by_member) == Access.NONE
    assert resource_access(user=people["stranger"], **made_by_member) == Access.NONE

    Membership.objects.filter(team=team, user=people["member"]).delete()  # they leave: access goes at once
    assert resource_access(user=people["member"], **made_by_member) == Access.NONE


def test_a_personal_resource_is_its_owners_alone(people):
    own = {"owner_id": people["member"].pk, "created_by_id": people["member"].pk}
    assert resource_access(user=people["member"], **own) == Access.OPERATE
    assert resource_access(user=people["admin"], **own) == Access.NONE
    assert resource_access(user=None, **own) == Access.NONE
