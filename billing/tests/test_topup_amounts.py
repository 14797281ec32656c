"""Top-up amounts: yuan text to integer fen without float, presets, limits; bad input is a form error or a 400."""

import pytest

from billing.models import TopUpOrder
from billing.payments import InvalidAmount, yuan_to_fen


@pytest.mark.parametrize(
    ("text", "fen"),
    [
        ("1", 100),
        ("50", 5000),
        ("99.9", 9990),
        ("99.90", 9990),
        ("0.07", 7),
        ("¥1,000.00", 100000),
        (" 12.3 ", 1230),
        ("１０", 1000),
        ("￥２０．５", 2050),
    ],
)
def test_yuan_text_becomes_exact_fen(text, fen):
    assert yuan_to_fen(text) == fen


@pytest.mark.parametrize("text", ["", "abc", "-5", "1.234", "1e3", "NaN", "inf", "1.2.3", "0x10", "٣"])
def test_anything_else_is_refused(text):
    with pytest.raises(InvalidAmount):
        yuan_to_fen(text)


@pytest.mark.parametrize(
    "data",
    [
        {"amount": "0.99"},  # below ¥1
        {"amount": "50000.01"},  # above ¥50,000
        {"amount": "ten"},
        {"amount": "-10"},
        {"preset": "777"},  # not one of the presets
        {},
    ],
)
def test_bad_amounts_give_form_errors(alice_client, data):
    response = alice_client.post("/billing/top-up/", data)
    assert response.status_code == 400
    assert b'class="errorlist"' in response.content
    assert not TopUpOrder.objects.exists()


def test_the_limits_are_inclusive(alice_client):
    assert alice_client.post("/billing/top-up/", {"amount": "1"}).status_code == 302
    assert alice_client.post("/billing/top-up/", {"amount": "50000"}).status_code == 302
    assert sorted(TopUpOrder.objects.values_list("amount_fen", flat=True)) == [100, 5000000]


@pytest.mark.parametrize(
    "payload",
    [
        {"amount": "0.5"},
        {"amount": "abc"},
        {"amount_fen": 99},
        {"amount_fen": 5000001},
        {},
        {"amount": "5", "amount_fen": 500},
    ],
)
def test_bad_amounts_give_a_400_in_the_api(alice_client, payload):
    response = alice_client.post("/api/v1/billing/orders/", payload, content_type="application/json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["fields"]
    assert not TopUpOrder.objects.exists()
