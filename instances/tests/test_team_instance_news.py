"""News about a member's instance in a team (idle warning and stop, preempted, recovered) goes to the
member who launched it as well as the team's owners and admins; not to other members or billing
viewers, and no more to a launcher who left the team or became a billing viewer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from instances.models import Instance
from instances.services import instance_auto_stop_set, instances_auto_stop
from instances.tests.conftest import committed, launch, running
from instances.tests.test_team_instances import lab  # noqa: F401  (the fixture)
from notifications.models import Kind, Notification
from notifications.services import Message, notify
from providers.simulated.models import SimulatedMachine
from teams.models import Membership, Role
from teams.services import membership_remove

pytestmark = pytest.mark.django_db
S = Instance.Status


def _idle_for(instance: Instance, minutes: int) -> None:
    now = timezone.now()
    Instance.objects.filter(pk=instance.pk).update(running_since=now - timedelta(minutes=90))
    SimulatedMachine.objects.filter(key=instance.key).update(
        ready_at=now - timedelta(minutes=90), last_active_at=now - timedelta(minutes=minutes)
    )


def _told(kind: str) -> set[str]:
    return set(Notification.objects.filter(kind=kind).values_list("user__email", flat=True))


def test_the_launcher_hears_of_the_idle_warning_and_the_stop_with_the_owner_and_admins(lab):  # noqa: F811
    mia = lab.people["mia"]
    instance = running(lab.account, actor=mia)
    instance_auto_stop_set(instance=instance, idle_minutes=30)
    _idle_for(instance, 25)
    mail.outbox.clear()
    with committed():
        assert instances_auto_stop() == 0
    expected = {"alice@example.com", "ada@example.com", "mia@example.com"}
    assert _told(Kind.IDLE_WARNING) == expected  # not max (another member), not bea (billing)
    assert {m.to[0] for m in mail.outbox} == expected
    _idle_for(instance, 45)
    with committed():
        assert instances_auto_stop() == 1
    assert Instance.objects.get(pk=instance.pk).status == S.STOPPED
    assert _told(Kind.IDLE_STOPPED) == expected


def test_a_launcher_who_left_or_became_a_billing_viewer_hears_nothing_more(lab):  # noqa: F811
    mia, max_ = lab.people["mia"], lab.people["max"]
    mine, theirs = running(lab.account, actor=mia), running(lab.account, actor=max_)
    with committed():
        membership_remove(membership=Membership.objects.get(team=lab, user=mia), actor=lab.people["owner"])
    Membership.objects.filter(team=lab, user=max_).update(role=Role.BILLING)
    for instance in (mine, theirs):
        notify(
            user=lab.account,
            kind=Kind.PREEMPTED,
            render=lambda: Message(title="preempted"),
            actor=instance.created_by,
        )
    assert Notification.objects.filter(kind=Kind.PREEMPTED, user=mia).count() == 0
    assert Notification.objects.filter(kind=Kind.PREEMPTED, user=max_).count() == 0
    assert Notification.objects.filter(kind=Kind.PREEMPTED, user=lab.people["ada"]).count() == 2


def test_an_admin_who_launched_hears_once(lab):  # noqa: F811
    ada = lab.people["ada"]
    instance = running(lab.account, actor=ada)
    notify(user=lab.account, kind=Kind.RECOVERED, render=lambda: Message(title="back"), actor=instance.created_by)
    assert sorted(Notification.objects.filter(kind=Kind.RECOVERED).values_list("user__email", flat=True)) == [
        "ada@example.com",
        "alice@example.com",
    ]


def test_a_personal_instance_tells_its_owner_alone(rich_alice):
    with committed():
        instance = launch(rich_alice)
    notify(user=rich_alice, kind=Kind.RECOVERED, render=lambda: Message(title="back"), actor=instance.created_by)
    assert list(Notification.objects.values_list("user__email", flat=True)) == ["alice@example.com"]
