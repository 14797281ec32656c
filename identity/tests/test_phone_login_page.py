"""The mobile log-in page: a number, then its code; a new number signs up; limits 429, a silent provider 503."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from identity.models import PhoneNumber
from identity.tests.recorded import recorded_server, recording

pytestmark = pytest.mark.django_db
URL = "/accounts/phone/"


def test_a_new_number_signs_up_and_is_logged_in(client, outbox):
    page = client.get(URL)
    assert page.status_code == 200 and "Text me a code" in page.content.decode()
    sent = client.post(URL, {"number": "138 0013 8000"})
    assert sent.status_code == 200
    assert "138****8000" in sent.content.decode()
    assert sent.cookies[settings.IDENTITY_DEVICE_COOKIE_NAME].value  # the device is counted from now on
    done = client.post(URL, {"number": "+8613800138000", "code": outbox[0]["code"], "accept_terms": "on"})
    assert done.status_code == 302 and done["Location"] == "/dashboard/"
    phone = PhoneNumber.objects.get()
    assert client.get("/dashboard/").wsgi_request.user == phone.user


def test_a_known_number_logs_in_to_its_account(client, alice, outbox):
    PhoneNumber.objects.create(user=alice, number="+8613800138000", verified_at=timezone.now())
    client.post(URL, {"number": "13800138000"})
    client.post(URL, {"number": "+8613800138000", "code": outbox[0]["code"], "accept_terms": "on", "next": "/billing/"})
    assert client.get("/dashboard/").wsgi_request.user == alice


def test_a_wrong_code_is_a_form_error(client, outbox):
    client.post(URL, {"number": "13800138000"})
    wrong = f"{(int(outbox[0]['code']) + 1) % 10**6:06d}"
    response = client.post(URL, {"number": "+8613800138000", "code": wrong, "accept_terms": "on"})
    assert response.status_code == 400
    assert "That code is not right" in response.content.decode()
    assert not PhoneNumber.objects.exists()


def test_an_invalid_number_is_a_form_error(client, outbox):
    response = client.post(URL, {"number": "+1 415 555 0100"})
    assert response.status_code == 400 and "mainland China mobile number" in response.content.decode()
    assert outbox == []


def test_asking_again_at_once_answers_429_with_retry_after(client):
    client.post(URL, {"number": "13800138000"})
    response = client.post(URL, {"number": "13800138000"})
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 60
    assert "You can ask for another in" in response.content.decode()


def test_a_provider_that_is_down_answers_503_with_retry_after(settings):
    with recorded_server(recording("aliyun_sms_down")) as server:
        settings.IDENTITY_SMS_SENDER = {
            "BACKEND": "identity.sms.aliyun.AliyunSender",
            "OPTIONS": {
                "ACCESS_KEY_ID": "id",
                "ACCESS_KEY_SECRET": "secret",
                "SIGN_NAME": "GPU Console",
                "TEMPLATE_CODE": "SMS_1",
                "ENDPOINT": f"127.0.0.1:{server.server_port}",
                "PROTOCOL": "http",
            },
        }
        response = Client().post(URL, {"number": "13800138000"})
    assert response.status_code == 503 and response["Retry-After"] == "60"
    assert "cannot be sent right now" in response.content.decode()


def test_a_bad_number_at_the_provider_is_a_form_error(settings):
    with recorded_server(recording("tencent_sms_bad_number")) as server:
        settings.IDENTITY_SMS_SENDER = {
            "BACKEND": "identity.sms.tencent.TencentSender",
            "OPTIONS": {
                "SECRET_ID": "id",
                "SECRET_KEY": "secret",
                "SDK_APP_ID": "1400000000",
                "SIGN_NAME": "GPU Console",
                "TEMPLATE_ID": "1",
                "ENDPOINT": f"127.0.0.1:{server.server_port}",
                "SCHEME": "http",
            },
        }
        response = Client().post(URL, {"number": "13800138000"})
    assert response.status_code == 400 and "cannot receive texts" in response.content.decode()


def test_without_a_sender_the_page_does_not_exist(client, settings):
    settings.IDENTITY_PHONE_LOGIN = False
    assert client.get(URL).status_code == 404
    assert "Continue with a mobile number" not in client.get("/accounts/login/").content.decode()


def test_the_log_in_page_links_to_it(client):
    assert 'href="/accounts/phone/"' in client.get("/accounts/login/").content.decode()


def test_the_development_inbox_shows_the_texts(client, settings):
    settings.IDENTITY_SMS_SENDER = {"BACKEND": "identity.sms.dev.DevTextsSender", "OPTIONS": {}}
    settings.DEBUG = True
    page = client.post(URL, {"number": "13800138000"}).content.decode()
    assert 'href="/dev/texts/"' in page
    inbox = client.get("/dev/texts/").content.decode()
    assert "+8613800138000" in inbox and 'class="sms-code"' in inbox


def test_the_development_inbox_is_hidden_outside_development(client, settings):
    settings.DEBUG = False
    settings.CONSOLE_ENV = "test"
    assert client.get("/dev/texts/").status_code == 404
