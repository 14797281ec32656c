"""Every running second billed exactly once: the usage audit finds a meter missing, doubled, cut short or
posted twice, and passes a timeline of runs, stops and starts (manage.py usage_check, the chaos soak)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.models import F

from billing.models import Meter
from instances.models import Instance, InstanceEvent
from instances.services import instance_release, instance_start, instance_stop
from instances.skus import gpu_meter_ref
from instances.tests.conftest import committed, running
from instances.usage_audit import usage_audit

S = Instance.Status


def _ran_for(instance: Instance, seconds: int) -> None:
    """Move the instance's whole history back by ``seconds``: its current stretch has run that much longer."""
    shift = timedelta(seconds=seconds)
    InstanceEvent.objects.filter(instance=instance).update(created_at=F("created_at") - shift)
    Meter.objects.filter(ref__startswith=f"instance:{instance.pk}:").update(
        started_at=F("started_at") - shift, stopped_at=F("stopped_at") - shift
    )


def _run_stop_run_release(user) -> Instance:
    instance = running(user)
    _ran_for(instance, 3600)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    with committed():
        instance_start(instance=instance)
    instance.refresh_from_db()
    _ran_for(instance, 600)
    with committed():
        instance_release(instance=instance)
    return instance


def _audit(instance: Instance):
    return usage_audit(instances=Instance.objects.filter(pk=instance.pk))


def test_runs_stops_and_starts_are_billed_to_the_second(rich_alice):
    instance = _run_stop_run_release(rich_alice)
    audit = _audit(instance)
    assert audit.problems == []
    assert audit.stretches == 2
    assert audit.running_s == audit.billed_s
    assert 4200 <= audit.billed_s <= 4202


def test_a_running_instance_is_checked_up_to_now(rich_alice):
    instance = running(rich_alice)
    _ran_for(instance, 60)
    audit = _audit(instance)
    assert audit.problems == [] and audit.stretches == 1


def test_a_second_meter_over_the_same_seconds_is_found(rich_alice):
    instance = _run_stop_run_release(rich_alice)
    first = Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).earliest("started_at")
    Meter.objects.create(
        user=first.user,
        sku=first.sku,
        ref=first.ref,
        quantity=first.quantity,
        price_fen=first.price_fen,
        unit_seconds=first.unit_seconds,
        started_at=first.started_at + timedelta(seconds=10),
        stopped_at=first.stopped_at,
    )
    problems = " ".join(_audit(instance).problems)
    assert "2 running stretches, 3 GPU meters" in problems
    assert "billed twice" in problems


def test_a_stretch_without_a_meter_is_found(rich_alice):
    instance = _run_stop_run_release(rich_alice)
    Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).order_by("-started_at").first().delete()
    assert any("2 running stretches, 1 GPU meters" in p for p in _audit(instance).problems)


def test_seconds_settled_short_or_posted_twice_are_found(rich_alice):
    instance = _run_stop_run_release(rich_alice)
    meter = Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).earliest("started_at")
    Meter.objects.filter(pk=meter.pk).update(settled_seconds=meter.settled_seconds - 5)
    assert any("settled" in p for p in _audit(instance).problems)
    Meter.objects.filter(pk=meter.pk).update(settled_seconds=meter.settled_seconds, charged_fen=meter.charged_fen + 190)
    assert any("the ledger holds" in p for p in _audit(instance).problems)


def test_a_meter_closed_late_is_found(rich_alice):
    instance = _run_stop_run_release(rich_alice)
    meter = Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).earliest("started_at")
    Meter.objects.filter(pk=meter.pk).update(stopped_at=meter.stopped_at + timedelta(seconds=30))
    assert any(f"meter {meter.pk} closed at" in p for p in _audit(instance).problems)


def test_the_command_says_how_many_seconds_and_fails_on_a_difference(rich_alice, capsys):
    instance = _run_stop_run_release(rich_alice)
    call_command("usage_check", "--json")
    assert '"problems": 0' in capsys.readouterr().out
    Meter.objects.filter(ref=gpu_meter_ref(instance.pk)).order_by("-started_at").first().delete()
    with pytest.raises(CommandError, match="1 differences"):
        call_command("usage_check")
