"""SMS codes: stored hashed, good once and for five minutes, five tries; limited per number, address and device."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from identity.errors import CodeRefused, IdentityError, PhoneTaken, TooManyCodes
from identity.models import PhoneCode, PhoneNumber
from identity.services import phone_code_check, phone_code_send, phone_codes_prune, phone_login, phone_set

pytestmark = pytest.mark.django_db
LOGIN = PhoneCode.Purpose.LOGIN
NUMBER = "+8613800138000"


def send(number=NUMBER, *, ip="203.0.113.5", device="d" * 32, purpose=LOGIN, user=None):
    return phone_code_send(number=number, purpose=purpose, ip=ip, device=device, user=user)


def age(seconds: int) -> None:
    """Move every code's clock back, as if ``seconds`` had passed."""
    for row in PhoneCode.objects.all():
        PhoneCode.objects.filter(pk=row.pk).update(
            created_at=row.created_at - timedelta(seconds=seconds),
            expires_at=row.expires_at - timedelta(seconds=seconds),
        )


def test_the_code_is_texted_and_only_its_hmac_is_stored(outbox):
    row = send("138 0013 8000")
    (text,) = outbox
    assert text["number"] == NUMBER and len(text["code"]) == 6 and text["code"].isdigit()
    assert row.number == NUMBER
    assert text["code"] not in row.code_hash and len(row.code_hash) == 64


def test_a_code_works_once(outbox):
    send()
    assert phone_code_check(number=NUMBER, purpose=LOGIN, code=outbox[0]["code"]).used_at is not None
    with pytest.raises(CodeRefused):
        phone_code_check(number=NUMBER, purpose=LOGIN, code=outbox[0]["code"])


def test_a_code_expires_after_five_minutes(outbox):
    send()
    age(301)
    with pytest.raises(CodeRefused):
        phone_code_check(number=NUMBER, purpose=LOGIN, code=outbox[0]["code"])


def test_a_code_for_one_purpose_does_not_serve_another(outbox, alice):
    send()
    with pytest.raises(CodeRefused):
        phone_code_check(number=NUMBER, purpose=PhoneCode.Purpose.ADD, code=outbox[0]["code"], user=alice)


def test_five_wrong_tries_kill_the_code(outbox):
    send()
    right = outbox[0]["code"]
    wrong = f"{(int(right) + 1) % 10**6:06d}"
    for _ in range(5):
        with pytest.raises(CodeRefused):
            phone_code_check(number=NUMBER, purpose=LOGIN, code=wrong)
    assert PhoneCode.objects.get().failed_attempts == 5  # each refusal was counted, not rolled back
    with pytest.raises(CodeRefused):
        phone_code_check(number=NUMBER, purpose=LOGIN, code=right)


def test_a_new_code_waits_a_minute_per_number():
    send()
    with pytest.raises(TooManyCodes) as refused:
        send(ip="198.51.100.7", device="e" * 32)
    assert 0 < refused.value.retry_after <= 60
    age(61)
    send(ip="198.51.100.7", device="e" * 32)


def test_a_number_gets_five_texts_an_hour():
    for _ in range(5):
        send()
        age(61)
    with pytest.raises(TooManyCodes) as refused:
        send()
    assert refused.value.retry_after > 60
    age(3600)
    send()


def test_one_address_gets_twenty_texts_an_hour(settings):
    for n in range(20):
        send(f"+86138001380{n:02d}", device=f"{n:032d}")
    with pytest.raises(TooManyCodes):
        send("+8613900139000", device="f" * 32)
    send("+8613900139000", ip="198.51.100.9", device="f" * 32)  # another address is not counted with it


def test_one_device_gets_ten_texts_an_hour_from_any_address():
    for n in range(10):
        send(f"+86138001380{n:02d}", ip=f"198.51.100.{n}")
    with pytest.raises(TooManyCodes):
        send("+8613900139000", ip="192.0.2.1")


def test_an_invalid_number_is_refused_before_any_text(outbox):
    with pytest.raises(IdentityError) as refused:
        send("+1 415 555 0100")
    assert refused.value.field == "number" and outbox == []


def test_logging_in_with_a_new_number_makes_an_account_and_again_finds_it(outbox):
    send()
    user, created = phone_login(number=NUMBER, code=outbox[0]["code"])
    assert created and user.phone_number.number == NUMBER
    assert user.email.endswith("@phone.invalid") and user.display_name == "138****8000"
    age(61)
    send()
    again, created = phone_login(number=NUMBER, code=outbox[1]["code"])
    assert again == user and not created


def test_adding_a_number_that_another_account_holds_is_refused(outbox, alice, charlie):
    PhoneNumber.objects.create(user=charlie, number=NUMBER, verified_at=timezone.now())
    with pytest.raises(PhoneTaken):
        send(purpose=PhoneCode.Purpose.ADD, user=alice)
    assert outbox == []


def test_adding_a_number_replaces_the_earlier_one(outbox, alice):
    send(purpose=PhoneCode.Purpose.ADD, user=alice)
    phone_set(user=alice, number=NUMBER, code=outbox[0]["code"])
    send("+8613900139000", purpose=PhoneCode.Purpose.ADD, user=alice)
    phone_set(user=alice, number="+8613900139000", code=outbox[1]["code"])
    assert PhoneNumber.objects.get(user=alice).number == "+8613900139000"
    assert not PhoneNumber.objects.filter(number=NUMBER).exists()


def test_old_codes_are_pruned_a_day_after_they_expire():
    send()
    age(301 + 24 * 3600)
    send("+8613900139000")
    assert phone_codes_prune() == 1
    assert PhoneCode.objects.get().number == "+8613900139000"
