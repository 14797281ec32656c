"""Hypothesis drives random sequences of claims, top-ups, meter starts and stops, single settlements
and ticks at random moments, and checks after every step that the books stay exact."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from accounts.tests.factories import UserFactory
from billing.meter_arithmetic import amount_owed, elapsed_seconds
from billing.models import Entry, LedgerAccount, Meter
from billing.selectors import balance_get
from billing.services import ledger_check, meter_settle, meter_start, meter_stop, sku_upsert, trial_claim
from billing.settlement import meters_settle_all
from billing.tests.helpers import topup

T0 = timezone.now().replace(microsecond=0) - timedelta(days=30)

PRICES = [(190, 3600), (777, 3600), (1, 3600), (5999, 3600), (3, 86400)]  # (fen, seconds per unit)


class LedgerMachine(RuleBasedStateMachine):
    users: list = []

    @initialize(wallets=st.lists(st.integers(0, 20_000), min_size=2, max_size=2))
    def open_books(self, wallets):
        # Each example runs in a savepoint that teardown rolls back: every example starts empty.
        self.atomic = transaction.atomic()
        self.atomic.__enter__()
        self.now = T0
        self.refs = 0
        self.skus = [
            sku_upsert(code=f"p{i}", name=f"p{i}", unit="unit", price_fen=p, unit_seconds=s)
            for i, (p, s) in enumerate(PRICES)
        ]
        self.unpaid_since_tick: set[int] = set()  # users given money since the last tick
        self.open: list[str] = []  # refs of open meters (kept here so the draws never depend on the database)
        for user, amount in zip(self.users, wallets, strict=True):
            if amount:
                topup(user, amount)

    def teardown(self):
        if hasattr(self, "atomic"):
            transaction.set_rollback(True)
            self.atomic.__exit__(None, None, None)

    # --- what people and workers do -------------------------------------------------------------

    @rule(user=st.sampled_from(range(2)))
    def claim_trial(self, user):
        trial_claim(user=self.users[user])
        self.unpaid_since_tick.add(self.users[user].pk)

    @rule(user=st.sampled_from(range(2)), amount=st.integers(1, 5000))
    def top_up(self, user, amount):
        topup(self.users[user], amount)
        self.unpaid_since_tick.add(self.users[user].pk)

    @rule(user=st.sampled_from(range(2)), sku=st.sampled_from(range(len(PRICES))), quantity=st.integers(1, 8))
    def start(self, user, sku, quantity):
        self.refs += 1
        ref = f"r{self.refs}"
        meter_start(user=self.users[user], sku=self.skus[sku], quantity=quantity, ref=ref, at=self.now)
        self.open.append(ref)

    @precondition(lambda self: self.open)
    @rule(data=st.data(), later=st.integers(0, 3000), late_report=st.integers(0, 200))
    def stop(self, data, later, late_report):
        # ``late_report``: the stop happened that many seconds before billing heard of it, maybe
        # before the last tick: what was charged past it is given back.
        self.now += timedelta(seconds=later, microseconds=later * 7919 % 1_000_000)
        ref = data.draw(st.sampled_from(self.open))
        meter = meter_stop(ref=ref, at=self.now - timedelta(seconds=late_report))
        self.open.remove(ref)
        self.unpaid_since_tick.add(meter.user_id)  # a give-back may have returned money

    @precondition(lambda self: self.open)
    @rule(data=st.data())
    def settle_one(self, data):
        ref = data.draw(st.sampled_from(self.open))
        with transaction.atomic():
            meter = Meter.objects.select_for_update().get(ref=ref, stopped_at__isnull=True)
            meter_settle(meter=meter, until=self.now)

    @rule(batch=st.sampled_from([None, 1, 2]), later=st.integers(0, 5000), micros=st.integers(0, 999_999))
    def tick(self, batch, later, micros):
        self.now += timedelta(seconds=later, microseconds=micros)
        meters_settle_all(now=self.now, batch_size=batch)
        self.unpaid_since_tick.clear()

    # --- what must always hold ------------------------------------------------------------------

    @invariant()
    def the_books_balance(self):
        result = ledger_check()
        assert result.ok, result.problems
        assert (Entry.objects.aggregate(s=Sum("amount"))["s"] or 0) == 0

    @invariant()
    def no_wallet_below_its_floor(self):
        assert not LedgerAccount.objects.filter(kind__in=LedgerAccount.USER_KINDS, balance__lt=0).exists()

    @invariant()
    def every_meter_is_charged_what_the_ledger_took_and_owes_its_exact_price(self):
        taken = dict(
            Entry.objects.filter(
                transaction__kind="usage",
                account__kind__in=[LedgerAccount.Kind.REVENUE, LedgerAccount.Kind.TRIAL_REVENUE],
            )
            .values_list("transaction__metadata__meter")
            .annotate(total=Sum("amount"))
            .values_list("transaction__metadata__meter", "total")
        )
        for meter in Meter.objects.all():
            assert taken.get(meter.pk, 0) == meter.charged_fen <= meter.owed_fen
            exact = amount_owed(
                price_fen=meter.price_fen,
                quantity=meter.quantity,
                unit_seconds=meter.unit_seconds,
                seconds=meter.settled_seconds,
            )
            assert meter.owed_fen == exact
            if not meter.is_open:
                assert meter.settled_seconds == elapsed_seconds(start=meter.started_at, end=meter.stopped_at)

    @invariant()
    def debt_is_collected_whenever_there_is_money(self):
        for user in self.users:
            if user.pk in self.unpaid_since_tick or balance_get(user=user).total == 0:
                continue
            indebted = [m.ref for m in Meter.objects.filter(user=user) if m.debt_fen]
            assert indebted == [], f"user {user.pk} has money and debt on {indebted}"


@pytest.mark.django_db
def test_random_sequences_keep_the_books_exact():
    LedgerMachine.users = [UserFactory() for _ in range(2)]
    run_state_machine_as_test(
        LedgerMachine,
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
