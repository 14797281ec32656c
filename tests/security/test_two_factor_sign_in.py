"""Two-factor sign-in (allauth's MFA): a person enrols an authenticator app and then signs in with its
code, a wrong code is refused and counted, a recovery code works once, staff are sent to enrol before
anything else (the admin and the staff pages included, their session refused by the API, their tokens
not), and the security log records each enrolment, removal and use."""

from __future__ import annotations

import re

import pytest
from allauth.mfa.models import Authenticator
from django.test import Client

from accounts.models import APIToken, SecurityEvent
from accounts.services import api_token_create
from accounts.tests.factories import DEFAULT_PASSWORD, TOTP_SECRET, UserFactory, totp_code

Action = SecurityEvent.Action
LOGIN = "/accounts/login/"
SECOND_STEP = "/accounts/2fa/authenticate/"
TWO_FACTOR = "/accounts/2fa/"
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"


def browser() -> Client:
    return Client(HTTP_USER_AGENT=BROWSER, REMOTE_ADDR="203.0.113.7")


def password_step(client: Client, user) -> str:
    """Posts ``user``'s password; returns where the log-in went next."""
    response = client.post(LOGIN, {"login": user.email, "password": DEFAULT_PASSWORD})
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def signed_in(client: Client) -> bool:
    return client.get("/account/").status_code == 200


def actions(user) -> list[str]:
    return list(SecurityEvent.objects.filter(user=user).order_by("id").values_list("action", flat=True))


def confirm_password(client: Client, path: str) -> None:
    """Any change to a person's second factors first asks for their password again (allauth's
    reauthentication, good for five minutes): a stolen session cannot enrol its own or remove theirs."""
    asked = client.get(path)
    assert asked.status_code == 302 and asked["Location"].startswith("/accounts/reauthenticate/"), asked
    confirmed = client.post(asked["Location"], {"password": DEFAULT_PASSWORD})
    assert confirmed.status_code == 302 and confirmed["Location"] == path


def enrol_totp(client: Client, commits) -> str:
    """Sets up an authenticator app for the signed-in person; returns its secret."""
    confirm_password(client, "/accounts/2fa/totp/activate/")
    page = client.get("/accounts/2fa/totp/activate/")
    assert page.status_code == 200
    secret = client.session["mfa.totp.secret"]
    assert secret in page.content.decode()  # shown for typing in, beside the QR code
    with commits(execute=True):  # the log's rows are written once the enrolment is committed
        done = client.post("/accounts/2fa/totp/activate/", {"code": totp_code(secret)})
    assert done.status_code == 302 and done["Location"] == "/accounts/2fa/recovery-codes/"
    return secret


def recovery_codes(user) -> list[str]:
    return Authenticator.objects.get(user=user, type=Authenticator.Type.RECOVERY_CODES).wrap().get_unused_codes()


@pytest.fixture
def commits(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


@pytest.fixture
def alice_enrolled(alice, commits):
    """alice, with an authenticator app set up through the pages (and so recovery codes)."""
    client = browser()
    assert password_step(client, alice) == "/dashboard/"
    alice.secret = enrol_totp(client, commits)
    client.post("/accounts/logout/")
    return alice


def test_a_user_enrols_an_authenticator_app_and_signs_in_with_its_code(alice, commits):
    client = browser()
    password_step(client, alice)
    secret = enrol_totp(client, commits)
    codes = client.get("/accounts/2fa/recovery-codes/")
    assert len(re.findall(r"<li>\d{8}</li>", codes.content.decode())) == 10
    client.post("/accounts/logout/")

    assert password_step(client, alice) == SECOND_STEP
    assert not signed_in(client), "the password alone signs nobody in"
    response = client.post(SECOND_STEP, {"code": totp_code(secret)})
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
    assert signed_in(client)

    assert actions(alice)[-2:] == [Action.SECOND_FACTOR_USED, Action.LOGIN]
    used = SecurityEvent.objects.filter(user=alice, action=Action.SECOND_FACTOR_USED).get()
    assert used.details == {"method": "totp"}
    assert used.ip == "203.0.113.7" and used.device == "Firefox on Linux"


def test_enrolment_is_logged_for_the_app_and_its_recovery_codes(alice_enrolled):
    added = SecurityEvent.objects.filter(user=alice_enrolled, action=Action.SECOND_FACTOR_ADDED).order_by("id")
    assert [event.details["method"] for event in added] == ["totp", "recovery_codes"]


def test_a_users_first_log_in_without_a_second_factor_needs_none(alice):
    client = browser()
    assert password_step(client, alice) == "/dashboard/"
    assert signed_in(client)


def test_a_wrong_code_is_refused_and_logged(alice_enrolled):
    client = browser()
    password_step(client, alice_enrolled)
    wrong = "000000" if totp_code(alice_enrolled.secret) != "000000" else "111111"
    response = client.post(SECOND_STEP, {"code": wrong})
    assert response.status_code == 200
    assert "Incorrect code." in response.content.decode()
    assert not signed_in(client)
    assert actions(alice_enrolled)[-1] == Action.SECOND_FACTOR_FAILED
    assert SecurityEvent.objects.filter(user=alice_enrolled, action=Action.LOGIN).count() == 1  # enrolment's only


def test_a_code_already_used_is_refused_the_second_time(alice_enrolled):
    code = totp_code(alice_enrolled.secret)
    first = browser()
    password_step(first, alice_enrolled)
    assert first.post(SECOND_STEP, {"code": code}).status_code == 302
    replay = browser()
    password_step(replay, alice_enrolled)
    response = replay.post(SECOND_STEP, {"code": code})
    assert response.status_code == 200 and not signed_in(replay)


def test_the_sixth_wrong_code_in_five_minutes_gets_the_429_page_even_with_the_right_one(alice_enrolled):
    client = browser()
    password_step(client, alice_enrolled)
    for _ in range(5):
        assert client.post(SECOND_STEP, {"code": "12345678"}).status_code == 200
    locked = client.post(SECOND_STEP, {"code": totp_code(alice_enrolled.secret)})
    assert locked.status_code == 429
    assert "Too many attempts" in locked.content.decode()
    assert not signed_in(client)


def test_a_recovery_code_signs_in_once(alice_enrolled):
    code = recovery_codes(alice_enrolled)[3]
    client = browser()
    password_step(client, alice_enrolled)
    assert client.post(SECOND_STEP, {"code": code}).status_code == 302
    assert signed_in(client)
    used = SecurityEvent.objects.filter(user=alice_enrolled, action=Action.RECOVERY_CODE_USED).get()
    assert used.details == {"method": "recovery_codes", "left": 9}
    assert code not in recovery_codes(alice_enrolled)

    again = browser()
    password_step(again, alice_enrolled)
    response = again.post(SECOND_STEP, {"code": code})
    assert response.status_code == 200 and not signed_in(again)


def test_turning_the_app_off_is_logged_and_takes_the_recovery_codes_with_it(alice_enrolled):
    client = browser()
    password_step(client, alice_enrolled)
    client.post(SECOND_STEP, {"code": totp_code(alice_enrolled.secret)})
    confirm_password(client, "/accounts/2fa/totp/deactivate/")
    response = client.post("/accounts/2fa/totp/deactivate/")
    assert response.status_code == 302
    assert not Authenticator.objects.filter(user=alice_enrolled).exists()
    removed = SecurityEvent.objects.filter(user=alice_enrolled, action=Action.SECOND_FACTOR_REMOVED).order_by("id")
    assert [event.details["method"] for event in removed] == ["totp", "recovery_codes"]
    client.post("/accounts/logout/")
    assert password_step(browser(), alice_enrolled) == "/dashboard/"


def test_new_recovery_codes_are_logged_and_the_old_ones_stop_working(alice_enrolled, commits):
    old = recovery_codes(alice_enrolled)
    client = browser()
    password_step(client, alice_enrolled)
    client.post(SECOND_STEP, {"code": totp_code(alice_enrolled.secret)})
    confirm_password(client, "/accounts/2fa/recovery-codes/generate/")
    with commits(execute=True):
        assert client.post("/accounts/2fa/recovery-codes/generate/").status_code == 302
    assert actions(alice_enrolled)[-1] == Action.RECOVERY_CODES_GENERATED
    assert set(recovery_codes(alice_enrolled)).isdisjoint(old)


def test_the_security_log_page_names_the_second_factor_events(alice_enrolled):
    client = browser()
    password_step(client, alice_enrolled)
    client.post(SECOND_STEP, {"code": recovery_codes(alice_enrolled)[0]})
    body = client.get("/account/security/").content.decode()
    for text in ("Second factor added", "Authenticator app", "Recovery code used", "9 codes left"):
        assert text in body, text


# --- Staff -------------------------------------------------------------------------------------------


@pytest.fixture
def new_staff(db):
    """A staff member who has not enrolled a second factor yet (a session from before the rule)."""
    return UserFactory(email="ops@example.com", is_staff=True, is_superuser=True, second_factor=False)


@pytest.mark.parametrize("path", ["/dashboard/", "/admin/", "/admin/accounts/user/", "/staff/fleet/", "/account/"])
def test_staff_without_a_second_factor_are_sent_to_enrol_from_any_page(new_staff, path):
    client = browser()
    password_step(client, new_staff)
    response = client.get(path)
    assert response.status_code == 302 and response["Location"] == TWO_FACTOR, path
    page = client.get(TWO_FACTOR)
    assert page.status_code == 200
    assert 'id="staff-second-factor-required"' in page.content.decode()


def test_an_htmx_request_of_staff_without_a_second_factor_moves_the_whole_page(new_staff, client_for):
    response = client_for(new_staff).get("/dashboard/", HTTP_HX_REQUEST="true")
    assert response.headers["HX-Redirect"] == TWO_FACTOR


def test_staff_reach_the_admin_once_enrolled(new_staff, commits):
    client = browser()
    password_step(client, new_staff)
    enrol_totp(client, commits)
    assert client.get("/admin/").status_code == 200
    assert client.get("/staff/fleet/").status_code == 200


def test_the_api_refuses_the_session_of_staff_without_a_second_factor(new_staff):
    client = browser()
    password_step(client, new_staff)
    response = client.get("/api/v1/account/profile/")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "second_factor_required"


def test_api_tokens_of_staff_are_not_sessions_and_are_not_asked(new_staff):
    _, raw = api_token_create(user=new_staff, name="ci", scope=APIToken.Scope.FULL, expires_at=None)
    response = Client().get("/api/v1/account/profile/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 200


def test_a_user_who_is_not_staff_is_never_sent_to_enrol(alice_client):
    assert alice_client.get("/dashboard/").status_code == 200
    assert alice_client.get("/api/v1/account/profile/").status_code == 200


def test_staff_with_a_second_factor_enter_its_code_before_the_admin(staff):
    client = browser()
    start = client.get("/admin/", follow=True)
    login_url = start.redirect_chain[-1][0]
    response = client.post(login_url, {"login": staff.email, "password": DEFAULT_PASSWORD})
    assert response["Location"].startswith(SECOND_STEP)
    assert client.get("/admin/").status_code == 302
    done = client.post(SECOND_STEP, {"code": totp_code(TOTP_SECRET)}, follow=True)
    assert done.redirect_chain[-1][0] == "/admin/"
    assert b"Site administration" in done.content


def test_staff_cannot_turn_off_their_only_second_factor(staff):
    client = browser()
    password_step(client, staff)
    client.post(SECOND_STEP, {"code": totp_code(TOTP_SECRET)})
    confirm_password(client, "/accounts/2fa/totp/deactivate/")
    page = client.get("/accounts/2fa/totp/deactivate/")
    assert "Staff accounts need a second factor" in page.content.decode()
    client.post("/accounts/2fa/totp/deactivate/")
    assert Authenticator.objects.filter(user=staff, type=Authenticator.Type.TOTP).exists()


def passkey(user, name: str = "Laptop") -> Authenticator:
    """A passkey row as allauth keeps one (its credential is not read on these pages)."""
    return Authenticator.objects.create(user=user, type=Authenticator.Type.WEBAUTHN, data={"name": name})


def test_staff_cannot_remove_their_only_passkey(new_staff, client_for):
    key = passkey(new_staff)
    client = client_for(new_staff)
    path = f"/accounts/2fa/webauthn/keys/{key.pk}/remove/"
    confirm_password(client, path)
    page = client.get(path)
    assert "Staff accounts need a second factor" in page.content.decode()
    response = client.post(path)
    assert response.status_code == 302 and response["Location"] == "/accounts/2fa/webauthn/"
    assert Authenticator.objects.filter(pk=key.pk).exists()


def test_staff_with_an_authenticator_app_may_remove_a_passkey(staff, client_for, commits):
    key = passkey(staff)
    client = client_for(staff)
    path = f"/accounts/2fa/webauthn/keys/{key.pk}/remove/"
    confirm_password(client, path)
    with commits(execute=True):
        assert client.post(path).status_code == 302
    assert not Authenticator.objects.filter(pk=key.pk).exists()
    assert SecurityEvent.objects.get(user=staff, action=Action.SECOND_FACTOR_REMOVED).details == {
        "method": "webauthn",
        "name": "Laptop",
    }


@pytest.mark.parametrize("action", ["edit", "remove"])
def test_another_persons_passkey_is_a_404(alice, bob, client_for, action):
    key = passkey(alice)
    client = client_for(bob)
    path = f"/accounts/2fa/webauthn/keys/{key.pk}/{action}/"
    confirm_password(client, path)

    assert client.get(path).status_code == 404
    assert client.post(path, {"name": "mine now"}).status_code == 404
    assert Authenticator.objects.get(pk=key.pk).data == {"name": "Laptop"}
    owner = client_for(alice)  # the same page is there for its owner
    confirm_password(owner, path)
    assert owner.get(path).status_code == 200


# --- The pages --------------------------------------------------------------------------------------


def test_the_pages_run_no_inline_script(alice_enrolled):
    """Every <script> on the second factor's pages is a file of the console's origin or inert JSON data, so
    SECURE_CSP (script-src 'self') lets them run: allauth's passkey script is served as a static file and
    started by the console's (js/passkeys.js), not by allauth's inline blocks."""
    client = browser()
    password_step(client, alice_enrolled)
    pages = {SECOND_STEP: client.get(SECOND_STEP)}
    client.post(SECOND_STEP, {"code": totp_code(alice_enrolled.secret)})
    confirm_password(client, "/accounts/2fa/webauthn/add/")
    for path in (TWO_FACTOR, "/accounts/2fa/webauthn/add/", "/accounts/2fa/recovery-codes/"):
        pages[path] = client.get(path)
    pages[LOGIN] = Client().get(LOGIN)
    for path, response in pages.items():
        assert response.status_code == 200, path
        assert "script-src 'self'" in response["Content-Security-Policy"], path
        for tag in re.findall(r"<script\b[^>]*>", response.content.decode()):
            assert 'src="/static/' in tag or 'type="application/json"' in tag, (path, tag)
    add = pages["/accounts/2fa/webauthn/add/"].content.decode()
    assert 'src="/static/mfa/js/webauthn.js"' in add and 'src="/static/js/passkeys.js"' in add
    assert all("data-allauth-onload" not in response.content.decode() for response in pages.values())
    assert 'id="passkey_login"' in pages[LOGIN].content.decode()
    # The code's field brings up a phone's number pad, and takes the focus on the log-in's second step.
    assert re.search(
        r'<input[^>]*name="code"[^>]*inputmode="numeric"[^>]*autofocus', pages[SECOND_STEP].content.decode()
    )
