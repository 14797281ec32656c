"""Reserved capacity in the pages and the API: staff grant and cancel it (page and staff API), the holder
sees it (quota page and API), the review page shows reserved cards and reserves on approval; bad input
is a 4xx saying what is wrong, and anyone else's reservation is a 404."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from instances.capacity.reservations import reservation_create
from instances.models import GpuModel, QuotaRequest, Region, Reservation
from instances.quota import quota_request_create
from instances.services import nodes_sync
from teams.services import team_create

LIST = "api-staff-reservation-list"


@pytest.fixture
def fleet(catalogue):
    nodes_sync(alias="default")


@pytest.fixture
def staff_client(staff, client_for):
    return client_for(staff)


def held(account, staff, *, cards=4, days=1) -> Reservation:
    return reservation_create(
        account=account,
        region=Region.objects.get(slug="cn-north-1"),
        gpu_model=GpuModel.objects.get(slug="h800"),
        cards=cards,
        ends_at=timezone.now() + timedelta(days=days),
        staff=staff,
    )


def when(delta: timedelta) -> str:
    return (timezone.localtime() + delta).strftime("%Y-%m-%dT%H:%M")


# --- The staff page ------------------------------------------------------------------------------------------


def test_staff_reserve_cards_for_a_team_on_the_page_and_cancel_them(alice, staff, staff_client, fleet):
    team = team_create(user=alice, name="Vision Lab")
    page = staff_client.get(reverse("staff_reservations"))
    assert page.status_code == 200 and "No reservations yet" in page.content.decode()
    region, gpu = Region.objects.get(slug="cn-north-1"), GpuModel.objects.get(slug="h800")
    response = staff_client.post(
        reverse("staff_reservations"),
        {
            "account": team.slug,
            "region": region.pk,
            "gpu_model": gpu.pk,
            "cards": 6,
            "ends_at": when(timedelta(days=2)),
        },
    )
    assert response.status_code == 302
    reservation = Reservation.objects.get()
    assert (reservation.account, reservation.cards, reservation.created_by) == (team.account, 6, staff)
    body = staff_client.get(reverse("staff_reservations")).content.decode()
    assert "team Vision Lab" in body and "Cancel" in body

    assert staff_client.post(reverse("staff_reservation_cancel", args=[reservation.pk])).status_code == 302
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.CANCELLED
    again = staff_client.post(reverse("staff_reservation_cancel", args=[reservation.pk]), follow=True)
    assert "already ended" in again.content.decode()


@pytest.mark.parametrize(
    ("form", "field_text"),
    [
        ({"account": "nobody@example.com", "cards": 2}, "Choose an active account"),
        ({"account": "alice@example.com", "cards": 9}, "8 H800 80GB cards in service"),
        ({"account": "alice@example.com", "cards": 2, "ends_at": "tomorrow-ish"}, "Enter a valid date/time"),
        ({"account": "alice@example.com", "cards": 0}, "greater than or equal to 1"),
    ],
)
def test_bad_input_on_the_staff_page_is_a_400_with_the_reason(alice, staff_client, fleet, form, field_text):
    data = {
        "region": Region.objects.get(slug="cn-north-1").pk,
        "gpu_model": GpuModel.objects.get(slug="h800").pk,
        "ends_at": when(timedelta(days=1)),
        **form,
    }
    response = staff_client.post(reverse("staff_reservations"), data)
    assert response.status_code == 400
    assert field_text in response.content.decode()
    assert not Reservation.objects.exists()


def test_the_staff_pages_do_not_exist_for_anyone_else(alice, alice_client, staff, fleet):
    reservation = held(alice, staff)
    assert alice_client.get(reverse("staff_reservations")).status_code == 404
    assert alice_client.post(reverse("staff_reservation_cancel", args=[reservation.pk])).status_code == 404
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.ACTIVE


# --- The holder's quota page and API ------------------------------------------------------------------------------


def test_the_holder_sees_its_reservation_on_the_quota_page_and_nobody_else_does(
    alice, alice_client, charlie_client, staff, fleet
):
    held(alice, staff, cards=4)
    body = alice_client.get(reverse("quota")).content.decode()
    assert "Reserved capacity" in body and "North China 1" in body
    assert "Reserved capacity" not in charlie_client.get(reverse("quota")).content.decode()


def test_the_holders_api_lists_its_reservations_and_anothers_is_a_404(
    alice, alice_client, charlie_client, staff, fleet
):
    reservation = held(alice, staff, cards=4)
    listed = alice_client.get("/api/v1/reservations/").json()["results"]
    assert [(r["id"], r["region"], r["gpu_model"], r["cards"], r["current"], r["in_use"]) for r in listed] == [
        (reservation.pk, "cn-north-1", "h800", 4, True, 0)
    ]
    assert alice_client.get(f"/api/v1/reservations/{reservation.pk}/").status_code == 200
    assert charlie_client.get(f"/api/v1/reservations/{reservation.pk}/").status_code == 404
    assert charlie_client.get("/api/v1/reservations/").json()["results"] == []
    assert alice_client.get("/api/v1/reservations/nope/").status_code == 404


# --- The staff API -------------------------------------------------------------------------------------------------


def test_staff_grant_list_and_cancel_through_the_api(alice, staff, staff_client, fleet):
    team = team_create(user=alice, name="Lab")
    body = {"account": f"team:{team.slug}", "region": "cn-north-1", "gpu_model": "h800", "cards": 4}
    created = staff_client.post(
        reverse(LIST),
        {**body, "ends_at": (timezone.now() + timedelta(days=1)).isoformat(), "note": "launch week"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    data = created.json()
    assert (data["account"], data["cards"], data["status"], data["created_by"]) == (
        f"team:{team.slug}",
        4,
        "active",
        staff.email,
    )
    assert [r["id"] for r in staff_client.get(reverse(LIST)).json()["results"]] == [data["id"]]
    cancel = reverse("api-staff-reservation-cancel", args=[data["id"]])
    assert staff_client.post(cancel).json()["status"] == "cancelled"
    again = staff_client.post(cancel)
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"
    assert staff_client.get(reverse(LIST), {"status": "active"}).json()["results"] == []
    assert [r["id"] for r in staff_client.get(reverse(LIST), {"status": ""}).json()["results"]] == [data["id"]]
    assert staff_client.get(reverse(LIST), {"status": "soon"}).status_code == 400


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"account": "nobody@example.com"}, "account"),
        ({"region": "mars-1"}, "region"),
        ({"gpu_model": "\x00"}, "gpu_model"),
        ({"cards": 0}, "cards"),
        ({"cards": 9}, "cards"),  # more than the region's 8 in service
        ({"ends_at": "2020-01-01T00:00:00Z"}, "ends_at"),
        ({"starts_at": "2030-01-02T00:00:00Z", "ends_at": "2030-01-01T00:00:00Z"}, "ends_at"),
    ],
)
def test_bad_input_to_the_staff_api_is_a_400_on_that_field(alice, staff_client, fleet, change, field):
    body = {
        "account": "alice@example.com",
        "region": "cn-north-1",
        "gpu_model": "h800",
        "cards": 2,
        "ends_at": (timezone.now() + timedelta(days=1)).isoformat(),
        **change,
    }
    response = staff_client.post(reverse(LIST), body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not Reservation.objects.exists()


def test_the_staff_api_refuses_anyone_else(alice, alice_client, staff, fleet):
    reservation = held(alice, staff)
    assert alice_client.get(reverse(LIST)).status_code == 403
    assert alice_client.post(reverse("api-staff-reservation-cancel", args=[reservation.pk])).status_code == 403


# --- The review page -----------------------------------------------------------------------------------------------


def test_the_review_page_shows_reserved_cards_and_approving_can_reserve(rich_alice, staff, staff_client, fleet):
    held(rich_alice, staff, cards=3)
    request = quota_request_create(
        user=rich_alice, gpu_model=GpuModel.objects.get(slug="h800"), cards=16, duration_days=5, reason="Training"
    )
    page = staff_client.get(reverse("quota_review")).content.decode()
    assert '<td class="reserved">3</td>' in page
    assert 'name="reserve"' in page and 'name="reserve_region"' in page

    region = Region.objects.get(slug="cn-north-1")
    decide = reverse("quota_decide", args=[request.pk, "approve"])
    # The checkbox without a region is refused, and nothing is approved.
    refused = staff_client.post(decide, {"cards": 5, "days": 5, "reserve": "on", "reserve_region": ""}, follow=True)
    assert "Choose the region" in refused.content.decode()
    request.refresh_from_db()
    assert request.status == QuotaRequest.Status.PENDING
    staff_client.post(decide, {"cards": 5, "days": 5, "reserve": "on", "reserve_region": region.pk})
    request.refresh_from_db()
    assert request.status == QuotaRequest.Status.APPROVED
    reservation = Reservation.objects.get(quota_request=request)
    assert (reservation.cards, reservation.ends_at) == (5, request.expires_at)


def test_the_staff_quota_api_approves_with_a_reservation(rich_alice, staff, staff_client, fleet):
    request = quota_request_create(
        user=rich_alice, gpu_model=GpuModel.objects.get(slug="h800"), cards=16, duration_days=5, reason="Training"
    )
    url = reverse("api-staff-quota-request-approve", args=[request.pk])
    bad = staff_client.post(url, {"cards": 4, "reserve_region": "mars-1"}, content_type="application/json")
    assert bad.status_code == 400 and "reserve_region" in bad.json()["error"]["fields"]
    too_many = staff_client.post(url, {"cards": 16, "reserve_region": "cn-north-1"}, content_type="application/json")
    assert too_many.status_code == 400 and "cards" in too_many.json()["error"]["fields"]
    too_long = staff_client.post(
        url,
        {"cards": 4, "reserve_region": "cn-north-1", "reserve_ends_at": "2099-01-01T00:00:00Z"},
        content_type="application/json",
    )
    assert too_long.status_code == 400 and "reserve_ends_at" in too_long.json()["error"]["fields"]
    assert QuotaRequest.objects.get(pk=request.pk).status == QuotaRequest.Status.PENDING
    ok = staff_client.post(url, {"cards": 4, "reserve_region": "cn-north-1"}, content_type="application/json")
    assert ok.status_code == 200, ok.content
    assert Reservation.objects.get(quota_request=request).cards == 4
