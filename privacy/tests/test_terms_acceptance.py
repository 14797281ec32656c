"""The terms and privacy policy: accepted at sign-up, asked again when a new version is published,
pages and the API held until then."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import APIToken
from accounts.services import api_token_create
from privacy import services
from privacy.models import Acceptance, DocumentVersion
from privacy.selectors import documents_in_force_ids, documents_pending_for

PASSWORD = "a long passphrase 42"


def publish_new(kind: str, staff) -> DocumentVersion:
    draft = services.document_draft_create(kind=kind, actor=staff)
    services.document_draft_update(version=draft, changes_en="Clearer refunds.", changes_zh="退款说明更清楚。")
    return services.document_publish(version=draft, actor=staff)


def test_the_first_versions_are_seeded_in_both_languages(db):
    ids = documents_in_force_ids()
    assert set(ids) == {"terms", "privacy"}
    for version in DocumentVersion.objects.filter(pk__in=ids.values()):
        assert version.version == 1 and version.body_en and version.body_zh and version.title_zh
        assert "Template" in version.body_en  # an operator reviews it


def test_sign_up_requires_the_box_and_records_the_acceptance(db):
    client = Client(REMOTE_ADDR="203.0.113.9")
    response = client.post(
        "/accounts/signup/", {"email": "dora@example.com", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert response.status_code == 200
    assert "Accept the terms of service and the privacy policy" in response.content.decode()
    assert not Acceptance.objects.exists()

    response = client.post(
        "/accounts/signup/",
        {"email": "dora@example.com", "password1": PASSWORD, "password2": PASSWORD, "accept_terms": "on"},
    )
    assert response.status_code == 302
    accepted = Acceptance.objects.filter(user__email="dora@example.com").select_related("document")
    assert sorted((a.document.kind, a.document.version, a.ip) for a in accepted) == [
        ("privacy", 1, "203.0.113.9"),
        ("terms", 1, "203.0.113.9"),
    ]


def test_the_sign_up_form_links_both_texts(db):
    body = Client().get("/accounts/signup/").content.decode()
    assert 'href="/legal/terms/"' in body and 'href="/legal/privacy/"' in body
    assert 'name="accept_terms"' in body


def test_a_new_version_sends_pages_to_the_accept_page_until_accepted(alice, alice_client, staff):
    assert alice_client.get("/instances/").status_code == 200
    new = publish_new("terms", staff)

    response = alice_client.get("/instances/?page=2")
    assert response.status_code == 302
    assert response.url == "/legal/accept/?next=%2Finstances%2F%3Fpage%3D2"
    # The texts, the accept page and log-out stay open.
    assert alice_client.get("/legal/terms/").status_code == 200
    page = alice_client.get("/legal/accept/")
    assert "Clearer refunds." in page.content.decode()

    refused = alice_client.post("/legal/accept/", {"version": [new.pk]})
    assert refused.status_code == 200 and not Acceptance.objects.filter(user=alice).exists()
    accepted = alice_client.post("/legal/accept/", {"version": [new.pk], "accept": "on", "next": "/instances/"})
    assert accepted.status_code == 302 and accepted.url == "/instances/"
    assert list(Acceptance.objects.filter(user=alice).values_list("document_id", flat=True)) == [new.pk]
    assert alice_client.get("/instances/").status_code == 200
    assert documents_pending_for(user=alice) == []


def test_an_htmx_request_is_redirected_whole(alice_client, staff):
    publish_new("privacy", staff)
    response = alice_client.get("/instances/", headers={"HX-Request": "true"})
    assert response.headers["HX-Redirect"].startswith("/legal/accept/")


def test_an_account_older_than_the_texts_is_asked_once(alice, alice_client):
    alice.date_joined = timezone.now() - timezone.timedelta(days=400)
    alice.save(update_fields=["date_joined"])
    assert alice_client.get("/dashboard/").status_code == 302
    pending = documents_pending_for(user=alice)
    assert [v.kind for v in pending] == ["terms", "privacy"]
    alice_client.post("/legal/accept/", {"version": [v.pk for v in pending], "accept": "on"})
    assert alice_client.get("/dashboard/").status_code == 200


def test_a_version_published_after_the_page_was_shown_is_asked_next(alice, alice_client, staff):
    first = publish_new("terms", staff)
    publish_new("privacy", staff)
    alice_client.post("/legal/accept/", {"version": [first.pk], "accept": "on"})
    assert [v.kind for v in documents_pending_for(user=alice)] == ["privacy"]


def test_the_api_answers_403_json_until_accepted(alice, alice_client, staff):
    _, raw = api_token_create(user=alice, name="ci", expires_at=None, scope=APIToken.Scope.FULL)
    token = Client(headers={"Authorization": f"Bearer {raw}"})
    assert token.get("/api/v1/instances/").status_code == 200
    publish_new("terms", staff)
    for client in (token, alice_client):
        response = client.get("/api/v1/instances/")
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "terms_not_accepted"
        assert "/legal/accept/" in response.json()["error"]["message"]


def test_a_published_version_cannot_be_edited(staff):
    version = DocumentVersion.objects.get(kind="terms", version=1)
    with pytest.raises(services.DocumentRefused):
        services.document_draft_update(version=version, body_en="changed")


def test_staff_draft_edit_and_publish_from_the_staff_page(staff, client_for, alice):
    client = client_for(staff)
    response = client.post("/staff/privacy/documents/terms/new/")
    draft = DocumentVersion.objects.get(kind="terms", version=2)
    assert response.status_code == 302 and draft.published_at is None
    form = {
        "title_en": "Terms of service",
        "title_zh": "服务条款",
        "body_en": "New text.",
        "body_zh": "新文本。",
        "changes_en": "Shorter.",
        "changes_zh": "更短。",
        "publish": "1",
    }
    client.post(f"/staff/privacy/documents/{draft.pk}/", form)
    draft.refresh_from_db()
    assert draft.published_at is not None and draft.body_zh == "新文本。"
    assert documents_in_force_ids()["terms"] == draft.pk
    assert client_for(alice).get("/staff/privacy/").status_code in (302, 404)
