"""The launch path's fixed statements (``core.sql``) read what the ORM's queries read, speed-up on or off."""

from __future__ import annotations

import pytest
from django.db.models import F

from accounts.models import SSHKey
from core import speedups, sql
from core.statemachine import transition
from instances.lifecycle import ALLOWED
from instances.models import Instance
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
    machine = SimulatedMachine.objects.create(
        backend_alias="t", key="k1", node=node, cards=2, spec={"peers": ["a"], "n": 1}
    )
    row = sql.fetch_one(
        f"SELECT {sql.columns(SimulatedMachine, 'm')} FROM {sql.table(SimulatedMachine)} m WHERE m.id = %s",  # noqa: S608
        [machine.pk],
    )
    read = sql.from_row(SimulatedMachine, row, alias="m")
    assert _fields(read) == _fields(SimulatedMachine.objects.get(pk=machine.pk))
    assert read.spec == {"peers": ["a"], "n": 1} and read.ready_at is None


@pytest.fixture(params=[True, False], ids=["fixed", "orm"])
def sql_speedup(request, settings):
    settings.CONSOLE_SPEEDUPS = {**settings.CONSOLE_SPEEDUPS, "sql": request.param}
    speedups.decision.cache_clear()
    yield request.param
    speedups.decision.cache_clear()


def test_both_paths_read_the_same_instance_and_token(rich_alice, sql_speedup):
    key = _key(rich_alice, "only")
    instance = launch(rich_alice, ssh_keys=[key])
    read = _get(instance.pk)
    assert sql.enabled() is sql_speedup
    assert _fields(read) == _fields(Instance.objects.get(pk=instance.pk))
    assert (read.gpu_model.slug, read.owner_id, read.ssh_public_keys) == (
        instance.gpu_model.slug,
        rich_alice.pk,
        [key.public_key],
    )


def test_it_only_reads():
    for statement in (
        "UPDATE instances_instance SET name = 'x'",
        "WITH x AS (DELETE FROM t) SELECT 1",
        "  delete from t",
    ):
        with pytest.raises(ValueError, match="only reads"):
            sql.fetch_one(statement)


def test_a_move_with_an_expression_goes_through_the_orm(rich_alice):
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
