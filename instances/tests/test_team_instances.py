"""Instances in a team's context: the team's account owns and pays, the member who launched is
``created_by``; members see each other's instances and operate only their own; admins operate all;
billing viewers and strangers see none; a former member loses every way in at once."""

from __future__ import annotations

import pytest

from accounts.models import SSHKey
from accounts.tests.factories import UserFactory
from gateway.selectors import gateway_verdict
from instances import services
from instances.errors import MemberLimitReached, NotPermitted
from instances.models import GpuModel, Instance, QuotaRequest
from instances.proxy_targets import instance_proxy_target
from instances.tests.conftest import acting_client, committed, fund, launch, running
from providers import get_backend
from teams.models import Membership, Role, TeamEvent
from teams.services import membership_remove, team_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(alice, catalogue, settings):
    """Team "Lab": alice owns it; ada is an admin, mia and max members, bea a billing viewer."""
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    team = team_create(user=alice, name="Lab")
    fund(team.account, 1_000_000)
    people = {"owner": alice}
    for name, role in (("ada", Role.ADMIN), ("mia", Role.MEMBER), ("max", Role.MEMBER), ("bea", Role.BILLING)):
        people[name] = UserFactory(email=f"{name}@example.com")
        Membership.objects.create(team=team, user=people[name], role=role)
    team.people = people
    return team


def test_a_members_launch_is_the_teams_and_names_who_launched(client, lab):
    mia = lab.people["mia"]
    instance = launch(lab.account, actor=mia, name="mia-run")
    assert instance.owner_id == lab.account_id and instance.created_by_id == mia.pk
    event = TeamEvent.objects.get(team=lab, action=TeamEvent.Action.INSTANCE_LAUNCHED)
    assert event.actor_id == mia.pk and event.target == "mia-run"

    page = acting_client(client, lab.people["max"], lab).get("/instances/")
    assert page.status_code == 200
    assert b"mia-run" in page.content and b"launched by mia@example.com" in page.content
    detail = client.get(f"/instances/{instance.pk}/")
    assert b"mia@example.com" in detail.content


def test_a_personal_launch_is_unchanged(rich_alice):
    from instances.tests.conftest import launch

    instance = launch(rich_alice)
    assert instance.owner_id == instance.created_by_id == rich_alice.pk
    assert not TeamEvent.objects.filter(action=TeamEvent.Action.INSTANCE_LAUNCHED).exists()


def test_a_member_sees_another_members_instance_but_cannot_operate_it(client, lab):
    instance = running(lab.account, actor=lab.people["mia"], name="mia-run")
    max_client = acting_client(client, lab.people["max"], lab)

    detail = max_client.get(f"/instances/{instance.pk}/")
    assert detail.status_code == 200
    assert f"/instances/{instance.pk}/stop/".encode() not in detail.content  # no action buttons
    assert b"Save name" not in detail.content

    refused = max_client.post(f"/instances/{instance.pk}/stop/")
    assert refused.status_code == 403
    assert b"launched by another member" in refused.content
    assert max_client.post(f"/instances/{instance.pk}/rename/", {"name": "mine"}).status_code == 403
    api = max_client.post(f"/api/v1/instances/{instance.pk}/stop/")
    assert api.status_code == 403 and api.json()["error"]["code"] == "forbidden"
    assert max_client.get(f"/api/v1/instances/{instance.pk}/").status_code == 200
    assert max_client.get(f"/instances/{instance.pk}/files/").status_code == 403
    files = max_client.get(f"/api/v1/instances/{instance.pk}/files/?path=/root")
    assert files.status_code == 403 and files.json()["error"]["code"] == "forbidden"
    instance.refresh_from_db()
    assert instance.status == Instance.Status.RUNNING


def test_the_launcher_and_an_admin_can_operate_it(client, lab):
    instance = running(lab.account, actor=lab.people["mia"], name="mia-run")
    mia_client = acting_client(client, lab.people["mia"], lab)
    page = mia_client.get(f"/instances/{instance.pk}/")
    assert f"/instances/{instance.pk}/stop/".encode() in page.content
    assert mia_client.post(f"/instances/{instance.pk}/stop/").status_code == 302
    instance.refresh_from_db()
    assert instance.status in (Instance.Status.STOPPING, Instance.Status.STOPPED)

    from django.test import Client

    ada_client = acting_client(Client(), lab.people["ada"], lab)
    with committed():
        response = ada_client.post(f"/api/v1/instances/{instance.pk}/release/")
    assert response.status_code == 200
    actions = dict(TeamEvent.objects.filter(team=lab).values_list("action", "actor_id"))
    assert actions[TeamEvent.Action.INSTANCE_STOPPED] == lab.people["mia"].pk
    assert actions[TeamEvent.Action.INSTANCE_RELEASED] == lab.people["ada"].pk


def test_start_is_recorded_in_the_team_audit_log(lab):
    mia = lab.people["mia"]
    instance = running(lab.account, actor=mia)
    with committed():
        services.instance_stop(instance=instance, actor=mia)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.STOPPED
    with committed():
        services.instance_start(instance=instance, actor=mia)
    assert TeamEvent.objects.filter(team=lab, action=TeamEvent.Action.INSTANCE_STARTED, actor=mia).exists()


def test_a_billing_viewer_cannot_launch_nor_see_instances(client, lab):
    instance = running(lab.account, actor=lab.people["mia"])
    bea_client = acting_client(client, lab.people["bea"], lab)
    assert bea_client.get("/instances/").status_code == 403
    assert bea_client.get("/instances/launch/").status_code == 403
    assert bea_client.get(f"/instances/{instance.pk}/").status_code == 404
    assert bea_client.get("/api/v1/instances/").status_code == 403
    refused = bea_client.post(
        "/api/v1/instances/",
        {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124", "disk_gb": 50},
        content_type="application/json",
    )
    assert refused.status_code == 403
    with pytest.raises(NotPermitted):
        launch(lab.account, actor=lab.people["bea"])


def test_a_non_member_gets_404(client, lab, charlie):
    instance = running(lab.account, actor=lab.people["mia"])
    client.force_login(charlie)
    assert client.get(f"/instances/{instance.pk}/").status_code == 404
    assert client.post(f"/instances/{instance.pk}/stop/").status_code == 404
    assert client.get(f"/api/v1/instances/{instance.pk}/").status_code == 404
    assert client.get(f"/api/v1/instances/{instance.pk}/files/?path=/").status_code == 404
    # Nor does the member's personal context show it.
    client.force_login(lab.people["mia"])
    assert client.get(f"/instances/{instance.pk}/").status_code == 404


def _key(user, fingerprint: str) -> SSHKey:
    return SSHKey.objects.create(
        user=user,
        name=f"{user.email}-laptop",
        public_key=f"ssh-ed25519 AAAA{fingerprint} {user.email}",
        key_type="ssh-ed25519",
        bits=256,
        fingerprint=fingerprint,
    )


def test_a_former_member_loses_proxy_gateway_and_files_at_once(client, lab, monkeypatch):
    mia = lab.people["mia"]
    key = _key(mia, "SHA256:mia")
    instance = running(lab.account, actor=mia, ssh_keys=[key])
    backend = get_backend(instance.backend_alias)
    monkeypatch.setattr(backend, "proxy_target", lambda *, key, service: f"target:{service}", raising=False)
    monkeypatch.setattr(backend, "ssh_target", lambda *, key: "sshd", raising=False)
    files_calls = []
    monkeypatch.setattr("gateway.files.files_list", lambda **kw: files_calls.append(kw) or [])

    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=mia) == "target:lab"
    assert gateway_verdict(login=str(instance.pk), fingerprint="SHA256:mia").allowed
    acting_client(client, mia, lab)  # the files API, as the rest, acts in the team's context
    assert client.get(f"/api/v1/instances/{instance.pk}/files/?path=/root").status_code == 200
    # Another member sees it but operates none of it; an admin may use its servers.
    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=lab.people["max"]) is None
    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=lab.people["ada"]) == "target:lab"

    membership_remove(actor=lab.people["owner"], membership=Membership.objects.get(team=lab, user=mia))

    assert instance_proxy_target(instance_id=str(instance.pk), service="lab", user=mia) is None
    verdict = gateway_verdict(login=str(instance.pk), fingerprint="SHA256:mia")
    assert not verdict.allowed and "No instance" in verdict.refusal
    assert client.get(f"/api/v1/instances/{instance.pk}/files/?path=/root").status_code == 404
    assert len(files_calls) == 1


def test_another_members_key_opens_no_ssh_session(lab):
    instance = running(lab.account, actor=lab.people["mia"], ssh_keys=[_key(lab.people["mia"], "SHA256:mia")])
    _key(lab.people["max"], "SHA256:max")
    verdict = gateway_verdict(login=str(instance.pk), fingerprint="SHA256:max")
    assert not verdict.allowed and "another member" in verdict.refusal


def test_a_removed_members_key_is_not_in_the_spec_of_the_next_start(lab, monkeypatch):
    mia = lab.people["mia"]
    instance = running(lab.account, actor=mia, ssh_keys=[_key(mia, "SHA256:mia")])
    spec = services.common._spec(services.common._get(instance.pk))
    assert any("SHA256:mia" in k for k in spec.ssh_public_keys)
    with committed():
        services.instance_stop(instance=instance, actor=mia)
    membership_remove(actor=lab.people["owner"], membership=Membership.objects.get(team=lab, user=mia))

    backend = get_backend(instance.backend_alias)
    seen = []
    real_start = backend.start
    monkeypatch.setattr(backend, "start", lambda **kw: seen.append(kw["spec"]) or real_start(**kw))
    instance.refresh_from_db()
    with committed():
        services.instance_start(instance=instance, actor=lab.people["ada"])
    assert seen, "the start reached the provider"
    assert not any("SHA256:mia" in k for k in seen[-1].ssh_public_keys)


def test_a_member_over_their_card_limit_is_refused_with_the_reason(lab):
    mia = lab.people["mia"]
    Membership.objects.filter(team=lab, user=mia).update(gpu_limit=2)
    launch(lab.account, actor=mia, count=2)
    with pytest.raises(MemberLimitReached, match="2 GPU cards"):
        launch(lab.account, actor=mia, count=1)
    launch(lab.account, actor=lab.people["max"], count=2)  # another member's limit is their own


def test_a_member_at_their_spend_limit_is_refused(lab):
    mia = lab.people["mia"]
    instance = running(lab.account, actor=mia)
    from billing.models import Meter
    from instances.members import member_spend_this_month

    meter = Meter.objects.get(ref=f"instance:{instance.pk}:gpu")
    Meter.objects.filter(pk=meter.pk).update(owed_fen=5_000, stopped_at=meter.started_at)
    assert member_spend_this_month(account_id=lab.account_id, user_ids=[mia.pk])[mia.pk] == 5_000
    Membership.objects.filter(team=lab, user=mia).update(spend_limit_fen=5_000)
    with pytest.raises(MemberLimitReached, match="monthly limit"):
        launch(lab.account, actor=mia)
    Membership.objects.filter(team=lab, user=mia).update(spend_limit_fen=5_001)
    launch(lab.account, actor=mia)


def test_admins_see_each_members_spend_against_their_limit(client, lab):
    mia = lab.people["mia"]
    Membership.objects.filter(team=lab, user=mia).update(gpu_limit=4)
    launch(lab.account, actor=mia, count=2)
    page = acting_client(client, lab.people["ada"], lab).get(f"/teams/{lab.slug}/")
    assert page.status_code == 200
    assert b'class="member-cards"' in page.content
    row = page.content.split(f'id="member-{Membership.objects.get(team=lab, user=mia).pk}"'.encode())[1]
    assert b'<span class="member-cards" title="Cards their instances hold now">2</span> / 4' in row.split(b"</tr>")[0]


def test_the_quota_request_is_the_teams(client, lab, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    mia_client = acting_client(client, lab.people["mia"], lab)
    assert mia_client.get("/quota/").status_code == 403
    assert mia_client.get("/api/v1/quota/").status_code == 403

    from django.test import Client

    ada_client = acting_client(Client(), lab.people["ada"], lab)
    gpu = GpuModel.objects.get(slug="a800-80g")
    response = ada_client.post(
        "/quota/", {"gpu_model": gpu.pk, "cards": 16, "duration_days": 7, "reason": "training run"}
    )
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    assert request.user_id == lab.account_id
    assert TeamEvent.objects.filter(team=lab, action=TeamEvent.Action.QUOTA_REQUESTED, actor=lab.people["ada"]).exists()

    staff = UserFactory(email="staff@example.com", is_staff=True)
    staff_client = Client()
    staff_client.force_login(staff)
    review = staff_client.get("/quota/review/")
    assert 'Lab <span class="badge indigo">team</span>' in review.content.decode()

    from django.core import mail

    mail.outbox.clear()
    with committed():
        decided = staff_client.post(f"/quota/review/{request.pk}/approve/", {"cards": 16, "days": 7, "message": ""})
    assert decided.status_code == 302
    request.refresh_from_db()
    assert request.status == QuotaRequest.Status.APPROVED
    told = sorted(address for message in mail.outbox if "approved" in message.subject for address in message.to)
    assert told == ["ada@example.com", "alice@example.com"]  # the team's admins and owners, not its members
