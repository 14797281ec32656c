"""The staff API for quota requests: the queue, approve and deny, through the same services as the page."""

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from accounts.services import api_token_create
from instances.models import GpuModel, QuotaAudit, QuotaRequest
from instances.quota import quota_effective, quota_request_create
from instances.tests.conftest import committed

R = QuotaRequest.Status
LIST = "api-staff-quota-request-list"


def _ask(user, gpu="a800-80g", cards=16, days=30, minutes_ago=0):
    request = quota_request_create(
        user=user, gpu_model=GpuModel.objects.get(slug=gpu), cards=cards, duration_days=days, reason="Training"
    )
    if minutes_ago:
        QuotaRequest.objects.filter(pk=request.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    return request


def _url(name, pk):
    return reverse(f"api-staff-quota-request-{name}", args=[pk])


@pytest.fixture
def staff_api(staff, client_for):
    return client_for(staff)


def test_the_queue_lists_waiting_requests_most_urgent_first_with_their_age(rich_alice, bob, staff, staff_api, settings):
    settings.INSTANCES_QUOTA_REVIEW_SLA_MIN = 30
    fresh = _ask(rich_alice, minutes_ago=1)
    late = _ask(bob, minutes_ago=45)
    decided = _ask(rich_alice, gpu="h800")
    staff_api.post(_url("deny", decided.pk), {"message": "no"}, content_type="application/json")

    body = staff_api.get(reverse(LIST)).json()
    assert [r["id"] for r in body["results"]] == [late.pk, fresh.pk]
    first = body["results"][0]
    assert (first["user"], first["gpu_model"], first["status"]) == ("bob@example.com", "a800-80g", "pending")
    assert (first["age_min"], first["sla_min"], first["overdue"]) == (45, 30, True)
    assert body["results"][1]["overdue"] is False

    everything = staff_api.get(reverse(LIST), {"status": "all"}).json()
    assert {r["id"] for r in everything["results"]} == {fresh.pk, late.pk, decided.pk}
    denied = staff_api.get(reverse(LIST), {"status": "denied"}).json()["results"]
    assert [(r["id"], r["age_min"], r["decided_by"]) for r in denied] == [(decided.pk, None, staff.email)]


def test_an_unknown_status_filter_is_a_400_on_that_parameter(staff_api, db):
    response = staff_api.get(reverse(LIST), {"status": "urgent"})
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"status"}


def test_an_empty_status_filter_is_the_queue_as_when_omitted(rich_alice, staff_api):
    waiting = _ask(rich_alice)
    decided = _ask(rich_alice, gpu="h800")
    staff_api.post(_url("deny", decided.pk), {"message": "no"}, content_type="application/json")
    response = staff_api.get(reverse(LIST), {"status": ""})
    assert response.status_code == 200
    assert [r["id"] for r in response.json()["results"]] == [waiting.pk]


def test_approve_grants_the_cards_for_the_days_and_tells_the_user(rich_alice, staff, staff_api, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    request = _ask(rich_alice, cards=16, days=30)
    mail.outbox.clear()
    with committed():
        response = staff_api.post(
            _url("approve", request.pk), {"cards": 12, "days": 7, "message": "12 for a week"}, "application/json"
        )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["granted_cards"], body["decided_by"]) == ("approved", 12, staff.email)
    request.refresh_from_db()
    assert timedelta(days=7) - timedelta(minutes=1) < request.expires_at - timezone.now() <= timedelta(days=7)
    assert quota_effective(user=rich_alice, gpu_model=request.gpu_model) == 12
    assert QuotaAudit.objects.filter(request=request, action="approved", actor=staff).exists()
    assert [m.to for m in mail.outbox if "approved" in m.subject] == [[rich_alice.email]]


def test_approve_without_a_body_grants_what_was_asked(rich_alice, staff_api):
    request = _ask(rich_alice, cards=16, days=30)
    body = staff_api.post(_url("approve", request.pk), {}, "application/json").json()
    assert body["granted_cards"] == 16


def test_approving_more_than_asked_is_a_400_on_cards_and_changes_nothing(rich_alice, staff_api):
    request = _ask(rich_alice, cards=16)
    response = staff_api.post(_url("approve", request.pk), {"cards": 17}, "application/json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"cards"}
    request.refresh_from_db()
    assert request.status == R.PENDING


def test_an_empty_reserve_region_is_a_400_on_it_not_a_grant_without_a_reservation(rich_alice, staff_api):
    request = _ask(rich_alice, cards=16)
    response = staff_api.post(_url("approve", request.pk), {"reserve_region": ""}, "application/json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"reserve_region"}
    request.refresh_from_db()
    assert request.status == R.PENDING


def test_deny_needs_a_reason_and_records_it(rich_alice, staff, staff_api):
    request = _ask(rich_alice)
    blank = staff_api.post(_url("deny", request.pk), {"message": "   "}, "application/json")
    assert blank.status_code == 400 and set(blank.json()["error"]["fields"]) == {"message"}
    assert staff_api.post(_url("deny", request.pk), {}, "application/json").status_code == 400
    response = staff_api.post(_url("deny", request.pk), {"message": "Reserved this month"}, "application/json")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["message"]) == ("denied", "Reserved this month")
    assert QuotaAudit.objects.filter(request=request, action="denied", actor=staff).exists()


def test_a_decided_request_is_a_409_the_second_time(rich_alice, staff_api):
    request = _ask(rich_alice)
    assert staff_api.post(_url("approve", request.pk), {}, "application/json").status_code == 200
    again = staff_api.post(_url("deny", request.pk), {"message": "oops"}, "application/json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"
    assert staff_api.post(_url("approve", request.pk), {}, "application/json").status_code == 409
    request.refresh_from_db()
    assert request.status == R.APPROVED


def test_a_missing_request_is_a_404(staff_api, db):
    assert staff_api.post(_url("approve", 999999), {}, "application/json").status_code == 404
    assert staff_api.get(_url("detail", 999999)).json()["error"]["code"] == "not_found"


def test_users_even_the_requester_are_refused_with_a_403_and_nothing_changes(rich_alice, alice_client, charlie):
    request = _ask(rich_alice)
    assert alice_client.get(reverse(LIST)).status_code == 403
    assert alice_client.get(_url("detail", request.pk)).status_code == 403
    response = alice_client.post(_url("approve", request.pk), {}, "application/json")
    assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    _token, secret = api_token_create(user=charlie, name="t", expires_at=None)
    by_token = alice_client.__class__().post(
        _url("deny", request.pk), {"message": "x"}, "application/json", headers={"Authorization": f"Bearer {secret}"}
    )
    assert by_token.status_code == 403
    request.refresh_from_db()
    assert request.status == R.PENDING


def test_a_staff_token_works_like_the_session(rich_alice, staff, client):
    request = _ask(rich_alice)
    _token, secret = api_token_create(user=staff, name="ops", expires_at=None)
    response = client.post(
        _url("approve", request.pk), {}, "application/json", headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code == 200


def test_the_operations_are_in_the_schema_with_the_error_format(staff_api):
    schema = staff_api.get("/api/schema/?format=json").json()
    approve = schema["paths"]["/api/v1/staff/quota/requests/{id}/approve/"]["post"]
    assert {"400", "403", "404", "409"} <= set(approve["responses"])
    assert approve["responses"]["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    deny = schema["paths"]["/api/v1/staff/quota/requests/{id}/deny/"]["post"]
    assert deny["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("StaffQuotaDenyRequest")
    listing = schema["paths"]["/api/v1/staff/quota/requests/"]["get"]
    status = next(p for p in listing["parameters"] if p["name"] == "status")
    assert "all" in status["schema"]["enum"] and "pending" in status["schema"]["enum"]
