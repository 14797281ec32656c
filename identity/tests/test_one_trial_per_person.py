"""One trial per person: a number or an identity brings the trial credit once, however many accounts share it."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.utils import timezone

from accounts.tests.factories import UserFactory
from billing.selectors import balance_get
from billing.services import TrialUnavailable, trial_claim
from identity.models import PhoneNumber, TrialClaim
from identity.services import real_name_verify_individual, trial_refusal

NUMBER = "+8613800138000"
ID = "440308199003071235"


def verify_phone(user, number: str = NUMBER) -> None:
    PhoneNumber.objects.update_or_create(user=user, defaults={"number": number, "verified_at": timezone.now()})


@pytest.mark.django_db
def test_the_setting_decides_what_the_trial_needs(alice, settings):
    settings.IDENTITY_TRIAL_REQUIRES = "phone"
    with pytest.raises(TrialUnavailable, match="Verify a mobile number"):
        trial_claim(user=alice)
    verify_phone(alice)
    trial_claim(user=alice)
    assert balance_get(user=alice).trial == 1000


@pytest.mark.django_db
def test_a_phone_only_account_claims_with_its_number(settings):
    settings.IDENTITY_TRIAL_REQUIRES = "phone_or_real_name"
    user = UserFactory(email="phone-x@phone.invalid", verified=False)
    verify_phone(user)
    trial_claim(user=user)
    assert balance_get(user=user).trial == 1000


@pytest.mark.django_db
def test_a_number_moved_to_another_account_brings_no_second_trial(alice, bob, settings):
    settings.IDENTITY_TRIAL_REQUIRES = "phone"
    verify_phone(alice)
    trial_claim(user=alice)
    PhoneNumber.objects.filter(user=alice).delete()  # alice changes her number; bob takes the old one
    verify_phone(bob)
    assert "already given" in trial_refusal(user=bob)  # the dashboard's step says so before any click
    with pytest.raises(TrialUnavailable, match="already given to this mobile number"):
        trial_claim(user=bob)
    assert balance_get(user=bob).trial == 0
    assert trial_claim(user=alice)  # a repeat on alice's own account still answers her grant


@pytest.mark.django_db
def test_one_identity_on_two_accounts_gets_one_trial(alice, bob, settings):
    settings.IDENTITY_TRIAL_REQUIRES = "real_name"
    real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    real_name_verify_individual(user=bob, name="张小三", id_number=ID)
    trial_claim(user=alice)
    with pytest.raises(TrialUnavailable):
        trial_claim(user=bob)
    assert TrialClaim.objects.get().user == alice


@pytest.mark.django_db
def test_under_email_a_verified_number_still_counts(alice, bob):
    verify_phone(alice)
    trial_claim(user=alice)
    PhoneNumber.objects.filter(user=alice).delete()
    verify_phone(bob)
    with pytest.raises(TrialUnavailable):
        trial_claim(user=bob)


def _race(users, target) -> list:
    """Run ``target(user)`` for every user at the same instant, each thread on its own connection."""
    barrier = threading.Barrier(len(users))
    results: list = [None] * len(users)

    def run(index, user):
        try:
            barrier.wait(timeout=10)
            results[index] = target(user)
        except Exception as exc:  # collected and asserted on below
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, u)) for i, u in enumerate(users)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.mark.django_db(transaction=True)
def test_the_same_identity_claimed_by_accounts_at_once_grants_one_trial(settings):
    settings.IDENTITY_TRIAL_REQUIRES = "real_name"
    users = [UserFactory() for _ in range(4)]
    for user in users:
        real_name_verify_individual(user=user, name="张小三", id_number=ID)
    results = _race(users, lambda user: trial_claim(user=user))
    granted = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, TrialUnavailable)]
    assert len(granted) == 1 and len(refused) == 3, results
    assert sum(balance_get(user=user).trial for user in users) == 1000
    assert TrialClaim.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_number_on_two_accounts_at_once_grants_one_trial(settings):
    """Alice gives up the number as Bob verifies it, and both claim in the same instant."""
    settings.IDENTITY_TRIAL_REQUIRES = "phone"
    alice, bob = UserFactory(), UserFactory()
    verify_phone(alice)
    results = _race([alice, bob], lambda user: trial_claim(user=user) if user == alice else _take_and_claim(user))
    granted = [r for r in results if not isinstance(r, Exception)]
    assert len(granted) == 1, results
    assert balance_get(user=alice).trial + balance_get(user=bob).trial == 1000
    assert TrialClaim.objects.count() == 1


def _take_and_claim(user):
    PhoneNumber.objects.filter(number=NUMBER).delete()
    verify_phone(user)
    return trial_claim(user=user)
