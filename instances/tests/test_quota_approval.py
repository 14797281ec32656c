from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from instances.errors import OperationNotAllowed, QuotaExceeded, QuotaRequestInvalid
from instances.models import GpuModel, QuotaAudit, QuotaRequest
from instances.quota import (
    quota_effective,
    quota_grants_expire,
    quota_request_approve,
    quota_request_create,
    quota_request_deny,
)
from instances.tests.conftest import committed, launch

R = QuotaRequest.Status


@pytest.fixture
def a800(catalogue):
    return GpuModel.objects.get(slug="a800-80g")


def _ask(user, gpu, cards=16, days=30):
    return quota_request_create(
        user=user, gpu_model=gpu, cards=cards, duration_days=days, reason="Fine-tuning a 70B model"
    )


def test_an_approval_raises_the_quota_until_it_expires_then_it_falls_back(rich_alice, a800, staff, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    request = _ask(rich_alice, a800, cards=16)
    with committed():
        quota_request_approve(request_id=request.pk, staff=staff, cards=12, days=7, message="12 for now")
    request.refresh_from_db()
    assert (request.status, request.granted_cards, request.decided_by) == (R.APPROVED, 12, staff)
    assert quota_effective(user=rich_alice, gpu_model=a800) == 12
    assert mail.outbox[-1].to == [rich_alice.email]
    assert "approved" in mail.outbox[-1].subject
    assert "12 for now" in mail.outbox[-1].body

    later = timezone.now() + timedelta(days=8)
    assert quota_effective(user=rich_alice, gpu_model=a800, now=later) == 8
    with committed():
        assert quota_grants_expire(now=later) == 1
        assert quota_grants_expire(now=later) == 0
    request.refresh_from_db()
    assert request.status == R.EXPIRED
    assert list(QuotaAudit.objects.filter(request=request).values_list("action", flat=True)) == [
        "requested",
        "approved",
        "expired",
    ]


def test_a_launch_over_quota_is_refused_and_one_within_an_approval_succeeds(rich_alice, a800, staff, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 4
    launch(rich_alice, count=4)
    with pytest.raises(QuotaExceeded):
        launch(rich_alice, count=4)
    request = _ask(rich_alice, a800, cards=8)
    quota_request_approve(request_id=request.pk, staff=staff)
    assert launch(rich_alice, count=4).gpu_count == 4


def test_a_denial_needs_a_message_and_tells_the_user(rich_alice, a800, staff):
    request = _ask(rich_alice, a800)
    with pytest.raises(QuotaRequestInvalid):
        quota_request_deny(request_id=request.pk, staff=staff, message=" ")
    with committed():
        quota_request_deny(request_id=request.pk, staff=staff, message="Capacity is reserved this month.")
    request.refresh_from_db()
    assert request.status == R.DENIED
    assert "declined" in mail.outbox[-1].subject
    assert QuotaAudit.objects.filter(request=request, action="denied", actor=staff).exists()


def test_a_decided_request_cannot_be_decided_again(rich_alice, a800, staff):
    request = _ask(rich_alice, a800)
    quota_request_approve(request_id=request.pk, staff=staff)
    with pytest.raises(OperationNotAllowed):
        quota_request_deny(request_id=request.pk, staff=staff, message="no")
    with pytest.raises(OperationNotAllowed):
        quota_request_approve(request_id=request.pk, staff=staff)


def test_staff_cannot_grant_more_than_was_asked(rich_alice, a800, staff):
    request = _ask(rich_alice, a800, cards=16)
    with pytest.raises(QuotaRequestInvalid):
        quota_request_approve(request_id=request.pk, staff=staff, cards=17)


def test_one_pending_request_per_model(rich_alice, a800):
    _ask(rich_alice, a800)
    with pytest.raises(QuotaRequestInvalid):
        _ask(rich_alice, a800)


def test_asking_for_no_more_than_the_current_quota_is_refused(rich_alice, a800, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 8
    with pytest.raises(QuotaRequestInvalid):
        _ask(rich_alice, a800, cards=8)
