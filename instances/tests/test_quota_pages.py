from django.core import mail
from django.urls import reverse

from instances.models import GpuModel, QuotaAudit, QuotaRequest


def _ask(client):
    gpu = GpuModel.objects.get(slug="h800")
    return client.post(
        reverse("quota"), {"gpu_model": gpu.pk, "cards": 16, "duration_days": 14, "reason": "Pre-training run"}
    )


def test_a_user_sees_their_quota_and_can_ask_for_more(rich_alice, alice_client, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    page = alice_client.get(reverse("quota")).content.decode()
    assert "H800 80GB" in page and "Request more" in page
    assert _ask(alice_client).status_code == 302
    assert QuotaRequest.objects.get().status == "pending"
    assert "Request pending" in alice_client.get(reverse("quota")).content.decode()


def test_staff_approve_fewer_cards_in_one_click_and_the_user_is_told(
    rich_alice, alice_client, staff, client_for, django_capture_on_commit_callbacks
):
    _ask(alice_client)
    request = QuotaRequest.objects.get()
    staff_client = client_for(staff)
    review = staff_client.get(reverse("quota_review")).content.decode()
    assert "alice@example.com" in review and "Pre-training run" in review
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("quota_decide", args=[request.pk, "approve"]), {"cards": 12, "days": 7, "message": "12 for a week"}
        )
    assert response.status_code == 302
    request.refresh_from_db()
    assert (request.status, request.granted_cards, request.decided_by) == ("approved", 12, staff)
    assert QuotaAudit.objects.filter(request=request, action="approved", actor=staff).exists()
    assert any("approved" in m.subject for m in mail.outbox)


def test_staff_decline_with_a_message(rich_alice, alice_client, staff, client_for):
    _ask(alice_client)
    request = QuotaRequest.objects.get()
    client_for(staff).post(reverse("quota_decide", args=[request.pk, "deny"]), {"message": "Not this month"})
    request.refresh_from_db()
    assert (request.status, request.message) == ("denied", "Not this month")


def test_only_staff_can_review(rich_alice, alice_client):
    _ask(alice_client)
    request = QuotaRequest.objects.get()
    assert alice_client.get(reverse("quota_review")).status_code == 302
    alice_client.post(reverse("quota_decide", args=[request.pk, "approve"]), {"cards": 16})
    request.refresh_from_db()
    assert request.status == "pending"
