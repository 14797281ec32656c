"""Money is conserved when it moves between personal and team wallets (issue #15's proof).

Hypothesis drives random sequences of top-ups, moves in and out (some of them short, repeated or by a
role that may not), usage on the team's and the people's wallets and settlements, on PostgreSQL; after
every step no fen has been made or lost and no wallet is below its floor. A second test runs
transfers in both directions from many threads at once.
"""

from __future__ import annotations

import random
import threading
from datetime import timedelta

import pytest
from django.db import close_old_connections, transaction
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
from billing.models import Entry, LedgerAccount, Transaction
from billing.selectors import balance_get
from billing.services import ledger_check, meter_start, meter_stop, sku_upsert
from billing.settlement import meters_settle_all
from billing.tests.helpers import topup
from teams import services
from teams.errors import NotEnoughMoney, TeamForbidden
from teams.models import Role, TeamEvent
from teams.tests.conftest import add_member

T0 = timezone.now().replace(microsecond=0) - timedelta(days=10)
Kind = LedgerAccount.Kind


def wallets_total(users) -> int:
    """What the people and the team hold together (cash and trial credit)."""
    return (
        LedgerAccount.objects.filter(owner__in=users, kind__in=LedgerAccount.USER_KINDS).aggregate(s=Sum("balance"))[
            "s"
        ]
        or 0
    )


def spent_on_usage() -> int:
    return (
        LedgerAccount.objects.filter(kind__in=[Kind.REVENUE, Kind.TRIAL_REVENUE]).aggregate(s=Sum("balance"))["s"] or 0
    )


class MoneyMachine(RuleBasedStateMachine):
    """alice owns the team, dave is an admin, bob a member; ``team`` is its account's wallet."""

    people: dict = {}
    team = None

    @initialize()
    def open_books(self):
        self.atomic = transaction.atomic()  # each example rolls back: every one starts empty
        self.atomic.__enter__()
        self.now = T0
        self.topped_up = 0
        self.keys = 0
        self.open: list[str] = []
        self.moves = 0
        self.sku = sku_upsert(code="gpu.prop", name="GPU", unit="card-hour", price_fen=777, unit_seconds=3600)

    def teardown(self):
        if hasattr(self, "atomic"):
            transaction.set_rollback(True)
            self.atomic.__exit__(None, None, None)

    def _owners(self):
        return [*self.people.values(), self.team.account]

    @rule(who=st.sampled_from(["alice", "dave", "bob"]), amount=st.integers(1, 20_000))
    def top_up(self, who, amount):
        topup(self.people[who], amount)
        self.topped_up += amount

    @rule(
        who=st.sampled_from(["alice", "dave", "bob"]),
        direction=st.sampled_from([services.MONEY_IN, services.MONEY_OUT]),
        amount=st.integers(1, 30_000),
        repeat=st.booleans(),
    )
    def move(self, who, direction, amount, repeat):
        actor = self.people[who]
        payer = actor if direction == services.MONEY_IN else self.team.account
        before = {u.pk: balance_get(user=u).cash for u in self._owners()}
        may = who == "alice" or (who == "dave" and direction == services.MONEY_IN)
        self.keys += 1
        key = f"p{self.keys}"
        try:
            services.team_money_move(actor=actor, team=self.team, direction=direction, amount_fen=amount, key=key)
        except TeamForbidden:
            assert not may
            outcome = "forbidden"
        except NotEnoughMoney:
            assert may and before[payer.pk] < amount
            outcome = "short"
        else:
            assert may and before[payer.pk] >= amount
            outcome = "moved"
            self.moves += 1
            if repeat:  # the same key again: nothing more moves
                services.team_money_move(actor=actor, team=self.team, direction=direction, amount_fen=amount, key=key)
        after = {u.pk: balance_get(user=u).cash for u in self._owners()}
        payee = self.team.account if direction == services.MONEY_IN else actor
        moved = amount if outcome == "moved" else 0
        assert after[payer.pk] == before[payer.pk] - moved
        assert after[payee.pk] == before[payee.pk] + moved

    @rule(who=st.sampled_from(["team", "alice", "bob"]), cards=st.integers(1, 8))
    def launch(self, who, cards):
        owner = self.team.account if who == "team" else self.people[who]
        ref = f"m{len(self.open)}-{self.keys}-{cards}-{who}"
        self.keys += 1
        meter_start(user=owner, sku=self.sku, quantity=cards, ref=ref, at=self.now)
        self.open.append(ref)

    @precondition(lambda self: self.open)
    @rule(data=st.data())
    def stop(self, data):
        ref = data.draw(st.sampled_from(self.open))
        meter_stop(ref=ref, at=self.now)
        self.open.remove(ref)

    @rule(seconds=st.integers(0, 20_000))
    def tick(self, seconds):
        self.now += timedelta(seconds=seconds)
        meters_settle_all(now=self.now)

    @invariant()
    def no_fen_is_made_or_lost(self):
        if not hasattr(self, "atomic"):
            return
        assert wallets_total(self._owners()) + spent_on_usage() == self.topped_up
        result = ledger_check()
        assert result.ok, result.problems

    @invariant()
    def no_wallet_below_its_floor(self):
        assert not LedgerAccount.objects.filter(kind__in=LedgerAccount.USER_KINDS, balance__lt=0).exists()

    @invariant()
    def every_transfer_is_audited_once(self):
        if not hasattr(self, "atomic"):
            return
        transfers = Transaction.objects.filter(kind=Transaction.Kind.TRANSFER).count()
        assert transfers == self.moves
        assert TeamEvent.objects.filter(team=self.team, action=TeamEvent.Action.MONEY_MOVED).count() == transfers


@pytest.mark.django_db
def test_random_sequences_conserve_money():
    alice, dave, bob = (UserFactory() for _ in range(3))
    team = services.team_create(user=alice, name="Lab")
    add_member(team, dave, Role.ADMIN)
    add_member(team, bob, Role.MEMBER)
    MoneyMachine.people = {"alice": alice, "dave": dave, "bob": bob}
    MoneyMachine.team = team
    run_state_machine_as_test(
        MoneyMachine,
        settings=settings(
            max_examples=15,
            stateful_step_count=25,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )


@pytest.mark.django_db(transaction=True)
def test_concurrent_transfers_in_both_directions_conserve_money():
    """Sixteen threads move money in and out at once (a seeded random sequence each): the row locks,
    taken in id order, serialise them; whatever is refused moved nothing; nothing deadlocks."""
    alice, dave = UserFactory(), UserFactory()
    team = services.team_create(user=alice, name="Lab")
    add_member(team, dave, Role.ADMIN)
    topup(alice, 50_000)
    topup(dave, 50_000)
    topup(team.account, 20_000)
    total = 120_000
    barrier = threading.Barrier(16)
    results: list[str] = []
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        rng = random.Random(n)
        try:
            barrier.wait()
            for i in range(12):
                actor = alice if n % 2 else dave
                direction = services.MONEY_OUT if actor == alice and rng.random() < 0.5 else services.MONEY_IN
                amount = rng.randint(1, 15_000)
                try:
                    services.team_money_move(
                        actor=actor, team=team, direction=direction, amount_fen=amount, key=f"t{n}-{i}"
                    )
                    results.append("moved")
                except NotEnoughMoney:
                    results.append("short")
        except BaseException as exc:
            errors.append(exc)
        finally:
            close_old_connections()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 16 * 12
    assert wallets_total([alice, dave, team.account]) == total
    assert not LedgerAccount.objects.filter(kind__in=LedgerAccount.USER_KINDS, balance__lt=0).exists()
    moved = results.count("moved")
    assert Transaction.objects.filter(kind=Transaction.Kind.TRANSFER).count() == moved
    assert TeamEvent.objects.filter(team=team, action=TeamEvent.Action.MONEY_MOVED).count() == moved
    assert (Entry.objects.aggregate(s=Sum("amount"))["s"] or 0) == 0
    assert ledger_check().ok
