from datetime import timedelta

import pytest
from django.utils import timezone

from billing.models import LedgerAccount, Transaction
from billing.selectors import balance_get
from billing.services import (
    TrialNotWithdrawable,
    account_get,
    ledger_check,
    ledger_post,
    meter_start,
    meter_stop,
    trial_claim,
    trial_expire_due,
)
from billing.tests.helpers import gpu_sku, topup

Kind = LedgerAccount.Kind


@pytest.fixture
def ttl(settings):
    settings.BILLING_TRIAL_CREDIT_TTL_DAYS = 30


def test_what_is_left_of_an_expired_grant_returns_to_the_pool(alice, ttl):
    trial_claim(user=alice)
    start = timezone.now() - timedelta(hours=2)
    meter_start(user=alice, sku=gpu_sku(), quantity=1, ref="i:1", at=start)
    meter_stop(ref="i:1", at=start + timedelta(hours=1))  # 190 fen of trial used
    topup(alice, 500)
    assert trial_expire_due() == 0  # not yet
    assert trial_expire_due(now=timezone.now() + timedelta(days=31)) == 1
    assert balance_get(user=alice) == balance_get(user=alice).__class__(cash=500, trial=0)
    expiry = Transaction.objects.get(kind=Transaction.Kind.TRIAL_EXPIRY)
    assert {e.account.kind: e.amount for e in expiry.entries.all()} == {Kind.TRIAL: -810, Kind.TRIAL_POOL: 810}
    assert ledger_check().ok


def test_expiring_twice_expires_once(alice, ttl):
    trial_claim(user=alice)
    later = timezone.now() + timedelta(days=31)
    assert trial_expire_due(now=later) == 1
    assert trial_expire_due(now=later) == 0
    assert Transaction.objects.filter(kind=Transaction.Kind.TRIAL_EXPIRY).count() == 1


def test_without_a_ttl_trial_credit_never_expires(alice):
    trial_claim(user=alice)
    assert trial_expire_due(now=timezone.now() + timedelta(days=3650)) == 0
    assert balance_get(user=alice).trial == 1000


def test_trial_credit_can_never_leave_as_cash_or_a_refund(alice):
    trial_claim(user=alice)
    trial, cash = account_get(user=alice, kind=Kind.TRIAL), account_get(user=alice, kind=Kind.CASH)
    with pytest.raises(TrialNotWithdrawable):
        ledger_post(key="r", kind=Transaction.Kind.REFUND, legs=[(trial, -100), (account_get(kind=Kind.GATEWAY), 100)])
    with pytest.raises(TrialNotWithdrawable):
        ledger_post(key="m", kind=Transaction.Kind.ADJUSTMENT, legs=[(trial, -100), (cash, 100)])
    assert balance_get(user=alice).trial == 1000
