"""The instance API answers as its schema says: events are a page like every list, filters refuse empty values."""

from instances.tests.conftest import running


def test_events_are_paginated_oldest_first(rich_alice, alice_client):
    instance = running(rich_alice)
    url = f"/api/v1/instances/{instance.pk}/events/"
    body = alice_client.get(url, {"page_size": 1}).json()
    assert body["count"] == instance.events.count() >= 2
    assert len(body["results"]) == 1 and body["next"]
    first = instance.events.order_by("created_at", "id").first()
    assert body["results"][0]["new"] == first.new
    assert alice_client.get(url, {"page_size": 0}).status_code == 400


def test_an_empty_typed_filter_is_a_400_naming_it(alice_client):
    for params in ({"status": ""}, {"released": ""}, {"released": "maybe"}):
        response = alice_client.get("/api/v1/instances/", params)
        assert response.status_code == 400, params
        assert list(response.json()["error"]["fields"]) == list(params)
    for params in ({"region": ""}, {"ordering": ""}, {"released": "true"}, {"released": "1"}):
        assert alice_client.get("/api/v1/instances/", params).status_code == 200, params
