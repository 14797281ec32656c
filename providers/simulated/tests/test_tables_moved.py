"""The simulated cloud's tables moved from the instances app to providers.simulated without moving:
the same table names, the same rows, content types that follow, and no migration left to make."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from providers.simulated.models import SimulatedMachine, SimulatedNode, SimulatedVolume

BEFORE = ("instances", "0009_reasons_as_stored_messages")


def test_the_tables_keep_their_names():
    assert [m._meta.db_table for m in (SimulatedNode, SimulatedMachine, SimulatedVolume)] == [
        "instances_simulatednode",
        "instances_simulatedmachine",
        "instances_simulatedvolume",
    ]


@pytest.mark.django_db
def test_the_migrations_say_what_the_models_say():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)  # exits 1 when a change is missing


@pytest.mark.django_db(transaction=True)
def test_rows_made_before_the_move_are_the_simulated_clouds_after_it():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE, ("providers_simulated", None)])
    old = executor.loader.project_state(BEFORE).apps
    ContentType = old.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(model__startswith="simulated").delete()
    ContentType.objects.create(app_label="instances", model="simulatednode")
    node = old.get_model("instances", "SimulatedNode").objects.create(
        backend_alias="default", name="r1-h200-01", region_slug="r1", gpu_slug="h200", cards=8
    )
    old.get_model("instances", "SimulatedMachine").objects.create(backend_alias="default", key="k1", node=node, cards=2)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    machine = SimulatedMachine.objects.select_related("node").get(key="k1")
    assert (machine.node.name, machine.cards) == ("r1-h200-01", 2)
    moved = ContentType.objects.filter(model="simulatednode").values_list("app_label", flat=True)
    assert list(moved) == ["providers_simulated"]
