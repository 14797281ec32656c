"""Monthly statements agree with the ledger line by line, in the console's time zone."""

import csv
import io
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from billing.models import Entry, Transaction
from billing.services import meter_start, meter_stop, sku_upsert, trial_claim
from billing.statements import statement_get, statement_months
from billing.tests.gateway_helpers import paid_order

SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.fixture
def gpu(db):
    return sku_upsert(code="gpu-a800", name="A800 80GB", unit="card-hour", price_fen=190, unit_seconds=3600)


def run(user, sku, ref, start, seconds, quantity=1, ticks=3):
    """A run settled in several ticks (as the beat task would), then stopped."""
    from billing.models import Meter
    from billing.services import meter_settle

    meter = meter_start(user=user, sku=sku, quantity=quantity, ref=ref, description=f"Instance {ref}", at=start)
    for i in range(1, ticks):
        meter = Meter.objects.get(pk=meter.pk)
        meter_settle(meter=meter, until=start + timedelta(seconds=seconds * i // ticks))
    return meter_stop(ref=ref, at=start + timedelta(seconds=seconds))


def this_month():
    return timezone.localdate(timezone.now(), SHANGHAI).replace(day=1)


def test_itemised_lines_sum_to_the_usage_total_in_the_ledger(alice, gpu):
    paid_order(alice, 50000)
    trial_claim(user=alice)
    now = timezone.now()
    run(alice, gpu, "inst-1", now - timedelta(hours=3), 3 * 3600 + 17, quantity=2)
    run(alice, gpu, "inst-2", now - timedelta(minutes=30), 1234)
    statement = statement_get(user=alice, month=this_month())
    ledger_usage = -sum(
        Entry.objects.filter(account__owner=alice, transaction__kind=Transaction.Kind.USAGE).values_list(
            "amount", flat=True
        )
    )
    assert ledger_usage > 0
    assert statement.summary.usage_fen == ledger_usage
    assert statement.lines_total_fen == ledger_usage
    lines = {line.ref: line for line in statement.lines}
    assert set(lines) == {"inst-1", "inst-2"}
    assert lines["inst-1"].seconds == 3 * 3600 + 17
    assert lines["inst-1"].amount_fen == round(190 * 2 * (3 * 3600 + 17) / 3600)
    assert lines["inst-1"].rate_fen == 380
    assert lines["inst-2"].seconds == 1234
    assert lines["inst-2"].end - lines["inst-2"].start == timedelta(seconds=1234)
    s = statement.summary
    assert (s.opening_fen, s.topups_fen, s.trial_fen) == (0, 50000, 1000)
    assert s.closing_fen == 50000 + 1000 - ledger_usage


def test_months_roll_the_balance_forward(alice, gpu, monkeypatch):
    from billing.services import account_get, ledger_post

    paid_order(alice, 10000)
    first_of_month = datetime.combine(this_month(), datetime.min.time(), tzinfo=SHANGHAI)
    # A correction posted three days before this month began (the ledger has no back-dating verb).
    monkeypatch.setattr(
        Transaction._meta.get_field("created_at"), "_get_default", lambda: first_of_month - timedelta(days=3)
    )
    ledger_post(
        key="earlier",
        kind=Transaction.Kind.ADJUSTMENT,
        user=alice,
        legs=[(account_get(kind="adjustments"), -700), (account_get(user=alice, kind="cash"), 700)],
    )
    monkeypatch.undo()
    months = statement_months(user=alice)
    assert [m.key for m in months][:2] == [f"{this_month():%Y-%m}", f"{(this_month() - timedelta(days=1)):%Y-%m}"]
    current, previous = months[0], months[1]
    assert (previous.opening_fen, previous.adjustments_fen, previous.closing_fen) == (0, 700, 700)
    assert (current.opening_fen, current.topups_fen, current.closing_fen) == (700, 10000, 10700)


def test_the_page_lists_every_line(alice, alice_client, gpu):
    paid_order(alice, 10000)
    run(alice, gpu, "inst-page", timezone.now() - timedelta(hours=1), 600)
    page = alice_client.get(f"/billing/statements/{this_month():%Y-%m}/").content.decode()
    assert "Instance inst-page" in page and "inst-page" in page
    assert "600" in page and "¥1.90/card-hour" in page
    assert "¥0.32" in page  # 600 s at ¥1.90/h
    listing = alice_client.get("/billing/statements/").content.decode()
    assert f"/billing/statements/{this_month():%Y-%m}/" in listing


def test_the_csv_has_one_row_per_line_with_decimal_amounts(alice, alice_client, gpu):
    paid_order(alice, 10000)
    run(alice, gpu, "inst-csv", timezone.now() - timedelta(hours=2), 3600, quantity=3)
    month = f"{this_month():%Y-%m}"
    response = alice_client.get(f"/billing/statements/{month}.csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == f'attachment; filename="statement-{month}.csv"'
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 1
    row = rows[0]
    assert row["resource"] == "inst-csv"
    assert row["seconds"] == "3600"
    assert row["quantity"] == "3"
    assert row["rate_cny_per_unit"] == "1.90"
    assert row["amount_cny"] == "5.70"
    assert datetime.fromisoformat(row["start"]).utcoffset() == timedelta(hours=8)  # Asia/Shanghai


@pytest.mark.parametrize("month", ["2026-13", "2026-00", "garbage", "26-11", "2026-1", "1999-12", "9999-12"])
def test_bad_months_are_404(alice_client, month):
    assert alice_client.get(f"/billing/statements/{month}/").status_code == 404
    assert alice_client.get(f"/billing/statements/{month}.csv").status_code == 404
    assert alice_client.get(f"/api/v1/billing/statements/{month}/").status_code == 404


def test_statements_are_scoped_to_their_owner(alice, charlie_client, gpu):
    paid_order(alice, 10000)
    run(alice, gpu, "alice-secret", timezone.now() - timedelta(hours=1), 600)
    month = f"{this_month():%Y-%m}"
    page = charlie_client.get(f"/billing/statements/{month}/").content.decode()
    assert "alice-secret" not in page
    assert "alice-secret" not in charlie_client.get(f"/billing/statements/{month}.csv").content.decode()
    body = charlie_client.get(f"/api/v1/billing/statements/{month}/").json()
    assert body["lines"] == [] and body["summary"]["topups_fen"] == 0
    assert charlie_client.get("/billing/statements/").status_code == 200
    assert "No statements yet" in charlie_client.get("/billing/statements/").content.decode()
