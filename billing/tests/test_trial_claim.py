import threading

import pytest
from django.db import connection

from accounts.tests.factories import UserFactory
from billing.models import Transaction
from billing.selectors import balance_get
from billing.services import TrialUnavailable, trial_claim


def test_a_verified_user_gets_the_trial_credit_once(alice):
    first = trial_claim(user=alice)
    again = trial_claim(user=alice)
    assert again.pk == first.pk
    assert balance_get(user=alice).trial == 1000
    assert balance_get(user=alice).cash == 0


def test_an_unverified_address_cannot_claim(db):
    user = UserFactory(verified=False)
    with pytest.raises(TrialUnavailable):
        trial_claim(user=user)
    assert balance_get(user=user).total == 0


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_claims_grant_it_once(alice):
    errors: list[Exception] = []

    def claim() -> None:
        try:
            trial_claim(user=alice)
        except Exception as exc:  # pragma: no cover - a failure is what the assertion reports
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert balance_get(user=alice).trial == 1000
    assert Transaction.objects.filter(kind=Transaction.Kind.TRIAL_GRANT).count() == 1
