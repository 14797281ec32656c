"""Real-name verification: individuals through the provider, organisations by staff; only the minimum kept."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from identity.errors import IdentityError, RealNameRejected, RealNameUnavailable
from identity.models import RealNameVerification
from identity.services import real_name_review, real_name_submit_organisation, real_name_verify_individual

pytestmark = pytest.mark.django_db
ID = "440308199003071235"
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def licence(content: bytes = PDF, name: str = "营业执照.pdf") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/pdf")


def test_an_individual_is_verified_and_only_the_minimum_is_kept(alice):
    row = real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    row.refresh_from_db()
    assert row.status == "verified" and row.kind == "individual"
    assert row.masked_name == "张*三" and row.provider == "test" and row.provider_reference.startswith("test-")
    stored = " ".join(str(getattr(row, f.attname)) for f in RealNameVerification._meta.concrete_fields)
    assert ID not in stored and ID[:6] + "19900307" not in stored and "小" not in stored
    assert row.person_key.startswith("id:") and len(row.person_key) == 67


def test_an_invalid_id_number_never_reaches_the_provider(alice):
    with pytest.raises(IdentityError) as refused:
        real_name_verify_individual(user=alice, name="张小三", id_number="440308199003071236")
    assert refused.value.field == "id_number"
    assert not RealNameVerification.objects.exists()


def test_a_mismatch_is_refused_and_counted(alice):
    with pytest.raises(RealNameRejected):
        real_name_verify_individual(user=alice, name="张不符", id_number=ID)
    assert RealNameVerification.objects.get().status == "rejected"


def test_five_refusals_a_day_are_the_most(alice):
    for _ in range(5):
        with pytest.raises(RealNameRejected):
            real_name_verify_individual(user=alice, name="张不符", id_number=ID)
    with pytest.raises(RealNameRejected, match="Too many attempts"):
        real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    assert RealNameVerification.objects.count() == 5  # the sixth never asked the provider


def test_a_provider_that_is_down_keeps_nothing(alice, settings):
    settings.IDENTITY_REAL_NAME_PROVIDER = {
        "BACKEND": "identity.realname.test.TestRealNameProvider",
        "OPTIONS": {"UNAVAILABLE": True},
    }
    with pytest.raises(RealNameUnavailable):
        real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    assert not RealNameVerification.objects.exists()


def test_a_verified_account_is_not_verified_twice(alice):
    real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    with pytest.raises(RealNameRejected):
        real_name_verify_individual(user=alice, name="李四", id_number="11010519491231002X")


def test_an_organisation_waits_for_staff_who_approve_and_the_licence_is_deleted(
    alice, staff, settings, django_capture_on_commit_callbacks
):
    row = real_name_submit_organisation(
        user=alice, company_name="示例科技有限公司", credit_code="91350100m000100y43", document=licence()
    )
    assert row.status == "pending" and row.credit_code == "91350100M000100Y43"
    path = settings.IDENTITY_DOCUMENTS_DIR / row.document.name
    assert path.read_bytes() == PDF and "营业执照" not in row.document.name
    with django_capture_on_commit_callbacks(execute=True):
        assert real_name_review(verification_id=row.pk, staff_user=staff, approve=True) is True
    row.refresh_from_db()
    assert row.status == "verified" and row.reviewed_by == staff and row.person_key.startswith("org:")
    assert not row.document and not path.exists()
    assert real_name_review(verification_id=row.pk, staff_user=staff, approve=False, reason="late") is False


def test_a_rejection_needs_a_reason(alice, staff):
    row = real_name_submit_organisation(
        user=alice, company_name="示例科技有限公司", credit_code="91350100M000100Y43", document=licence()
    )
    with pytest.raises(IdentityError):
        real_name_review(verification_id=row.pk, staff_user=staff, approve=False)
    assert real_name_review(
        verification_id=row.pk, staff_user=staff, approve=False, reason="The licence is unreadable."
    )
    row.refresh_from_db()
    assert row.status == "rejected" and row.reason == "The licence is unreadable."


@pytest.mark.parametrize(
    ("code", "document", "field"),
    [
        ("91350100M000100Y44", licence(), "credit_code"),
        ("91350100M000100Y43", licence(b"MZ\x90\x00 not a licence", "licence.pdf"), "document"),
    ],
)
def test_an_organisation_with_a_bad_code_or_file_is_refused(alice, code, document, field):
    with pytest.raises(IdentityError) as refused:
        real_name_submit_organisation(user=alice, company_name="示例科技有限公司", credit_code=code, document=document)
    assert refused.value.field == field


def test_the_page_verifies_an_individual(alice_client):
    response = alice_client.post(
        "/account/identity/real-name/individual/", {"name": "张小三", "id_number": ID}, follow=True
    )
    page = response.content.decode()
    assert "Your real name is verified." in page and "张*三" in page and ID not in page


def test_the_page_says_503_when_the_provider_is_down(alice_client, settings):
    settings.IDENTITY_REAL_NAME_PROVIDER = {
        "BACKEND": "identity.realname.test.TestRealNameProvider",
        "OPTIONS": {"UNAVAILABLE": True},
    }
    response = alice_client.post("/account/identity/real-name/individual/", {"name": "张小三", "id_number": ID})
    assert response.status_code == 503 and response["Retry-After"] == "60"


def test_staff_review_page_lists_and_serves_the_licence_to_staff_only(alice, staff, client_for, charlie_client):
    row = real_name_submit_organisation(
        user=alice, company_name="示例科技有限公司", credit_code="91350100M000100Y43", document=licence()
    )
    staff_client = client_for(staff)
    assert "示例科技有限公司" in staff_client.get("/staff/identity/").content.decode()
    document = staff_client.get(f"/staff/identity/{row.pk}/document/")
    assert document.status_code == 200 and b"".join(document.streaming_content) == PDF
    assert document["X-Content-Type-Options"] == "nosniff"
    assert charlie_client.get("/staff/identity/").status_code == 404
    assert charlie_client.get(f"/staff/identity/{row.pk}/document/").status_code == 404
    assert charlie_client.post(f"/staff/identity/{row.pk}/decide/", {"decision": "approve"}).status_code == 404
    response = staff_client.post(f"/staff/identity/{row.pk}/decide/", {"decision": "approve"})
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == "verified"


def test_without_a_provider_individuals_are_not_offered(alice, alice_client, settings):
    settings.IDENTITY_REAL_NAME_PROVIDER = {"BACKEND": "", "OPTIONS": {}}
    with pytest.raises(RealNameUnavailable, match="does not verify"):
        real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    page = alice_client.get("/account/identity/").content.decode()
    assert 'id="real-name-individual"' not in page and 'id="real-name-organisation"' in page


def test_staff_read_verdicts_in_the_admin_without_the_person_key(alice, staff, client_for):
    real_name_verify_individual(user=alice, name="张小三", id_number=ID)
    client = client_for(staff)
    listing = client.get("/admin/identity/realnameverification/")
    assert listing.status_code == 200 and "张*三" in listing.content.decode()
    row = RealNameVerification.objects.get()
    detail = client.get(f"/admin/identity/realnameverification/{row.pk}/change/").content.decode()
    assert row.person_key not in detail
