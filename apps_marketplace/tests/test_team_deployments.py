"""Deployments in a team's context (issue #15): the team's instance, roles on the pages and the API,
the audit log, and a former member's access gone at once.

Alice owns "Lab"; dave is an admin, bob a member, erin a billing viewer; charlie is a stranger."""

from __future__ import annotations

import pytest

from apps_marketplace.models import App, Deployment, ModelEntry
from apps_marketplace.services import deployment_create
from instances.models import GpuModel, Region
from instances.tests.conftest import committed
from notifications.models import Kind, Notification
from teams.models import Membership, TeamEvent
from teams.tests.helpers import in_team, lab_with_roles


@pytest.fixture
def lab(alice, bob, fleet):
    return lab_with_roles(alice, bob)


def team_deploy(team, *, by) -> Deployment:
    with committed():
        deployment, _key = deployment_create(
            user=team.account,
            actor=by,
            app=App.objects.get(slug="llama-3-instruct-chat"),
            model=ModelEntry.objects.get(repo_id="meta-llama/Meta-Llama-3-8B-Instruct"),
            parameters={},
            gpu_model=GpuModel.objects.get(slug="a800-80g"),
            gpu_count=1,
            region=Region.objects.get(slug="cn-north-1"),
        )
    return deployment


def test_a_deployment_in_a_team_is_the_teams_with_its_instance_and_is_audited(lab, bob):
    deployment = team_deploy(lab, by=bob)
    assert deployment.owner_id == lab.account.pk and deployment.created_by_id == bob.pk
    assert deployment.instance.owner_id == lab.account.pk
    assert TeamEvent.objects.filter(team=lab, actor=bob, action=TeamEvent.Action.APP_DEPLOYED).exists()
    with committed():
        assert in_team(bob, lab).post(f"/apps/deployments/{deployment.pk}/delete/").status_code == 302
    assert TeamEvent.objects.filter(team=lab, actor=bob, action=TeamEvent.Action.APP_REMOVED).exists()


@pytest.mark.parametrize(
    ("who", "list_status", "detail_status", "buttons", "stop_status"),
    [
        ("alice", 200, 200, True, 302),
        ("dave", 200, 200, True, 302),
        ("bob", 200, 200, False, 403),  # another member's deployment: shown, not operable
        ("erin", 403, 404, False, 404),
    ],
)
def test_roles_on_the_pages(lab, who, list_status, detail_status, buttons, stop_status):
    deployment = team_deploy(lab, by=lab.people["alice"])
    client = in_team(lab.people[who], lab)
    assert client.get("/apps/deployments/").status_code == list_status
    response = client.get(f"/apps/deployments/{deployment.pk}/")
    assert response.status_code == detail_status
    if detail_status == 200:
        assert (f"/apps/deployments/{deployment.pk}/stop/" in response.content.decode()) is buttons
    with committed():
        assert client.post(f"/apps/deployments/{deployment.pk}/stop/").status_code == stop_status


@pytest.mark.parametrize(("who", "status"), [("dave", 200), ("bob", 403), ("erin", 403)])
def test_the_api_refuses_with_a_message(lab, who, status):
    deployment = team_deploy(lab, by=lab.people["alice"])
    with committed():
        response = in_team(lab.people[who], lab).post(f"/api/v1/deployments/{deployment.pk}/regenerate-key/")
    assert response.status_code == status
    if status == 403:
        assert response.json()["error"]["code"] == "permission_denied"


def test_a_billing_viewer_cannot_deploy(lab):
    response = in_team(lab.people["erin"], lab).post(
        "/apps/llama-3-instruct-chat/deploy/", {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1}
    )
    assert response.status_code == 403
    assert not Deployment.objects.exists()


def test_a_former_member_and_a_stranger_get_404(lab, bob, charlie):
    deployment = team_deploy(lab, by=bob)
    assert in_team(charlie, lab).get(f"/apps/deployments/{deployment.pk}/").status_code == 404
    client = in_team(bob, lab)
    assert client.get(f"/apps/deployments/{deployment.pk}/").status_code == 200
    assert client.get(f"/api/v1/deployments/{deployment.pk}/readiness/").status_code == 200
    Membership.objects.filter(team=lab, user=bob).delete()
    assert client.get(f"/apps/deployments/{deployment.pk}/").status_code == 404
    assert client.post(f"/apps/deployments/{deployment.pk}/stop/").status_code == 404
    assert client.get(f"/api/v1/deployments/{deployment.pk}/readiness/").status_code == 404


def test_the_member_who_deployed_hears_it_is_ready_with_the_owner_and_admins(lab, bob):
    team_deploy(lab, by=bob)
    told = set(Notification.objects.filter(kind=Kind.DEPLOYMENT_READY).values_list("user__email", flat=True))
    assert told == {"alice@example.com", "dave@example.com", bob.email}  # not erin (billing viewer)
