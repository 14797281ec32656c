"""For the privacy app: what identity holds of a person, exported, and forgotten on deletion (trial claims stay)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from billing.services import TrialUnavailable, trial_claim
from identity.models import PhoneCode, PhoneNumber, RealNameVerification, TrialClaim
from identity.services import (
    identity_export,
    identity_forget,
    phone_code_send,
    real_name_submit_organisation,
    real_name_verify_individual,
)

pytestmark = pytest.mark.django_db


def test_the_export_has_the_number_and_the_verdicts_never_an_id_number(alice):
    PhoneNumber.objects.create(user=alice, number="+8613800138000", verified_at=timezone.now())
    real_name_verify_individual(user=alice, name="张小三", id_number="440308199003071235")
    data = identity_export(user=alice)
    assert data["mobile_number"] == "+8613800138000"
    assert [v["name"] for v in data["real_name_verifications"]] == ["张*三"]
    assert "440308199003071235" not in str(data)


def test_forgetting_deletes_the_number_codes_verdicts_and_licence_but_keeps_the_trial_claim(
    alice, bob, settings, django_capture_on_commit_callbacks
):
    settings.IDENTITY_TRIAL_REQUIRES = "phone"
    PhoneNumber.objects.create(user=alice, number="+8613800138000", verified_at=timezone.now())
    phone_code_send(number="+8613800138000", purpose=PhoneCode.Purpose.LOGIN, ip="203.0.113.5", device="d" * 32)
    trial_claim(user=alice)
    row = real_name_submit_organisation(
        user=alice,
        company_name="示例科技有限公司",
        credit_code="91350100M000100Y43",
        document=SimpleUploadedFile("l.pdf", b"%PDF-1.4 licence"),
    )
    path = settings.IDENTITY_DOCUMENTS_DIR / row.document.name
    assert path.exists()
    with django_capture_on_commit_callbacks(execute=True):
        identity_forget(user=alice)
    assert not PhoneNumber.objects.exists() and not PhoneCode.objects.exists()
    assert not RealNameVerification.objects.exists() and not path.exists()
    assert TrialClaim.objects.get().user is None
    PhoneNumber.objects.create(user=bob, number="+8613800138000", verified_at=timezone.now())
    with pytest.raises(TrialUnavailable, match="already given"):
        trial_claim(user=bob)
