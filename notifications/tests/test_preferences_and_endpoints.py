"""The preferences page and API, and webhook endpoints: the secret shown once, a stranger's endpoint a
404, the test event through the same delivery."""

from __future__ import annotations

from notifications.models import Kind, NotificationPreference, WebhookDelivery, WebhookEndpoint


def test_the_page_saves_the_table_of_kinds_and_channels(alice, alice_client):
    page = alice_client.get("/notifications/preferences/").content.decode()
    assert 'name="email_low_balance" checked' in page and 'name="email_idle_stopped" aria' in page
    form = {f"email_{k.value}": "on" for k in Kind} | {f"webhook_{k.value}": "on" for k in Kind}
    del form["email_deployment_failed"]
    form["email_idle_stopped"] = "on"
    del form["email_deployment_ready"]
    assert alice_client.post("/notifications/preferences/", form).status_code == 302
    rows = {(p.kind, p.email, p.webhook) for p in NotificationPreference.objects.filter(user=alice)}
    assert rows == {("deployment_failed", False, True), ("idle_stopped", True, True)}  # only what differs


def test_the_api_reads_and_writes_preferences(alice_client):
    prefs = alice_client.get("/api/v1/notifications/preferences/").json()["preferences"]
    low = next(p for p in prefs if p["kind"] == "low_balance")
    assert low == {"kind": "low_balance", "label": "Low balance", "inbox": True, "email": True, "webhook": True}
    answer = alice_client.put(
        "/api/v1/notifications/preferences/",
        {"preferences": [{"kind": "low_balance", "email": False, "webhook": True}]},
        content_type="application/json",
    )
    assert next(p for p in answer.json()["preferences"] if p["kind"] == "low_balance")["email"] is False
    bad = alice_client.put(
        "/api/v1/notifications/preferences/",
        {"preferences": [{"kind": "nope", "email": False, "webhook": True}]},
        content_type="application/json",
    )
    assert bad.status_code == 400


def test_an_endpoint_s_secret_is_shown_once(alice, alice_client, settings):
    page = alice_client.post("/notifications/webhooks/", {"url": "https://example.com/hook"}).content.decode()
    endpoint = WebhookEndpoint.objects.get(user=alice)
    assert endpoint.secret in page
    assert endpoint.secret not in alice_client.get("/notifications/preferences/").content.decode()
    created = alice_client.post(
        "/api/v1/notifications/webhooks/", {"url": "https://example.org/h"}, content_type="application/json"
    )
    assert created.status_code == 201 and created.json()["secret"].startswith("whsec_")
    listed = alice_client.get("/api/v1/notifications/webhooks/").json()["results"]
    assert len(listed) == 2 and all("secret" not in e for e in listed)
    refused = alice_client.post(
        "/api/v1/notifications/webhooks/", {"url": "http://example.org/h"}, content_type="application/json"
    )
    assert refused.status_code == 400 and "url" in refused.json()["error"]["fields"]
    assert alice_client.post("/notifications/webhooks/", {"url": "http://example.org/h"}).status_code == 400


def test_a_stranger_s_endpoint_is_a_404(alice, charlie_client):
    endpoint = WebhookEndpoint.objects.create(user=alice, url="https://example.com/hook")
    base = f"/api/v1/notifications/webhooks/{endpoint.pk}/"
    assert charlie_client.get(base).status_code == 404
    assert charlie_client.patch(base, {"active": False}, content_type="application/json").status_code == 404
    assert charlie_client.delete(base).status_code == 404
    assert charlie_client.post(base + "test/").status_code == 404
    assert charlie_client.post(f"/notifications/webhooks/{endpoint.pk}/delete/").status_code == 404
    assert WebhookEndpoint.objects.filter(pk=endpoint.pk, active=True).exists()


def test_send_test_event_delivers_through_the_same_task(
    alice, alice_client, receiver, django_capture_on_commit_callbacks
):
    endpoint = WebhookEndpoint.objects.create(user=alice, url=receiver.url)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/api/v1/notifications/webhooks/{endpoint.pk}/test/")
    assert response.status_code == 202
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    assert delivery.kind == "test" and delivery.status == WebhookDelivery.Status.DELIVERED
    assert b'"type":"test"' in receiver.requests[0][1]
    page = alice_client.get("/notifications/preferences/").content.decode()
    assert "Delivered" in page and "HTTP 200" in page
    deliveries = alice_client.get(f"/api/v1/notifications/webhooks/{endpoint.pk}/deliveries/").json()["results"]
    assert deliveries[0]["attempts"] == 1 and deliveries[0]["status_code"] == 200
    # Turned off, then removed, from the page.
    alice_client.post(f"/notifications/webhooks/{endpoint.pk}/toggle/")
    assert not WebhookEndpoint.objects.get(pk=endpoint.pk).active
    alice_client.post(f"/notifications/webhooks/{endpoint.pk}/delete/")
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
