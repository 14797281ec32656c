"""The launch path's fixed statements (``core.sql``) read and write what the ORM would."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import SSHKey
from billing.models import Meter, Sku
from core import sql
from core.statemachine import transition
from instances.lifecycle import ALLOWED
from instances.models import Instance, InstanceEvent
from instances.services.common import _get
from instances.tests.conftest import launch
from providers.simulated.models import SimulatedMachine, SimulatedNode

pytestmark = pytest.mark.django_db


def _key(user, name: str) -> SSHKey:
    return SSHKey.objects.create(
        user=user,
        name=name,
        public_key=f"ssh-ed25519 AAAA{name} {user.email}",
        key_type="ssh-ed25519",
        bits=256,
        fingerprint=f"SHA256:{name}",
    )


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_a_tasks_instance_read_is_the_orms_with_its_catalogue_owner_node_and_keys_in_order(rich_alice):
    older, newer = _key(rich_alice, "older"), _key(rich_alice, "newer")
    instance = launch(rich_alice, ssh_keys=[older, newer])

    fixed = _get(instance.pk)
    orm = Instance.objects.select_related("gpu_model", "image", "region", "node", "owner").get(pk=instance.pk)
    assert _fields(fixed) == _fields(orm)
    for name in ("gpu_model", "image", "region", "node", "owner"):
        assert _fields(getattr(fixed, name)) == _fields(getattr(orm, name))
    assert fixed.ssh_public_keys == [k.public_key for k in SSHKey.objects.filter(instances=instance)]
    assert fixed.ssh_public_keys == [newer.public_key, older.public_key]  # the model's order: newest first
    assert fixed._state.adding is False and fixed._state.db == "default"
    assert _get("00000000-0000-0000-0000-000000000000") is None


def test_an_instance_without_a_node_reads_none(rich_alice):
    instance = launch(rich_alice)
    Instance.objects.filter(pk=instance.pk).update(node=None)
    assert _get(instance.pk).node is None


def test_json_and_nulls_come_back_as_their_values(db):
    node = SimulatedNode.objects.create(backend_alias="t", name="n1", region_slug="r", gpu_slug="g", cards=8)
    machine = SimulatedMachine(backend_alias="t", key="k1", node=node, cards=2, spec={"peers": ["a"], "n": 1})
    assert sql.insert(machine) and machine.pk is not None
    row = sql.fetch_one(
        f"SELECT {sql.columns(SimulatedMachine, 'm')} FROM {sql.table(SimulatedMachine)} m WHERE m.id = %s",  # noqa: S608
        [machine.pk],
    )
    read = sql.from_row(SimulatedMachine, row, alias="m")
    assert _fields(read) == _fields(SimulatedMachine.objects.get(pk=machine.pk))
    assert read.spec == {"peers": ["a"], "n": 1} and read.ready_at is None


def test_an_insert_fills_defaults_and_a_conflict_inserts_nothing(rich_alice):
    sku = Sku.objects.create(code="t.gpu", name="t", unit="card-hour", price_fen=100, unit_seconds=3600)
    now = timezone.now()
    meter = Meter(user=rich_alice, sku=sku, ref="r1", quantity=1, price_fen=100, unit_seconds=3600, started_at=now)
    assert sql.insert(meter, ignore_conflicts=True)
    saved = Meter.objects.get(pk=meter.pk)
    assert (saved.settled_seconds, saved.owed_fen, saved.charged_fen) == (0, 0, 0)
    assert saved.created_at is not None
    twin = Meter(user=rich_alice, sku=sku, ref="r1", quantity=1, price_fen=100, unit_seconds=3600, started_at=now)
    assert sql.insert(twin, ignore_conflicts=True) is False  # one open meter per ref
    assert twin.pk is None and Meter.objects.filter(ref="r1").count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.insert(twin)


def test_many_rows_in_one_statement_or_through_bulk_create_beyond_the_fixed_sizes(rich_alice):
    instance = launch(rich_alice)
    before = InstanceEvent.objects.filter(instance=instance).count()
    few = [InstanceEvent(instance=instance, old="a", new="b", reason=str(n)) for n in range(3)]
    assert sql.insert_many(few) == 3 and all(e.pk for e in few)
    many = [InstanceEvent(instance=instance, old="a", new="b", reason=str(n)) for n in range(sql.MAX_FIXED_ROWS + 5)]
    assert sql.insert_many(many) == sql.MAX_FIXED_ROWS + 5
    assert InstanceEvent.objects.filter(instance=instance).count() == before + 3 + sql.MAX_FIXED_ROWS + 5


def test_a_fixed_update_moves_only_a_row_still_in_its_status(rich_alice):
    instance = launch(rich_alice)
    assert sql.update(Instance, where={"pk": instance.pk, "status": "running"}, values={"name": "x"}) == 0
    node = instance.node
    moved = sql.update(
        Instance, where={"pk": str(instance.pk), "status": instance.status}, values={"name": "renamed", "node": node}
    )
    assert moved == 1
    instance.refresh_from_db()
    assert (instance.name, instance.node_id) == ("renamed", node.pk)
    with pytest.raises(ValueError, match="NULL"):
        sql.update(Instance, where={"pk": instance.pk, "node": None}, values={"name": "y"})


def test_a_move_with_an_expression_still_goes_through_the_orm(rich_alice):
    instance = launch(rich_alice)
    assert transition(
        model=Instance,
        pk=instance.pk,
        table=ALLOWED,
        src=instance.status,
        dst=Instance.Status.RUNNING,
        changes={"disk_gb": F("disk_gb") + 10},
    )
    instance.refresh_from_db()
    assert (instance.status, instance.disk_gb) == (Instance.Status.RUNNING, 60)
