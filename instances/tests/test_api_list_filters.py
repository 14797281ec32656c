"""The instance list filters and orders with django-filter; bad query parameters are 400s naming them."""

from instances.tests.conftest import launch, running

URL = "/api/v1/instances/"


def _names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


def test_it_filters_by_status_region_and_gpu_model(rich_alice, alice_client):
    running(rich_alice, name="north-a800")
    waiting = launch(rich_alice, name="east-a800", region="cn-east-1").status
    launch(rich_alice, name="north-h800", gpu="h800")
    assert _names(alice_client.get(URL, {"region": "cn-east-1"})) == ["east-a800"]
    assert _names(alice_client.get(URL, {"gpu_model": "h800"})) == ["north-h800"]
    assert _names(alice_client.get(URL, {"status": "running"})) == ["north-a800"]
    assert sorted(_names(alice_client.get(URL, {"status": ["running", waiting]}))) == [
        "east-a800",
        "north-a800",
        "north-h800",
    ]


def test_it_orders_by_name_both_ways(rich_alice, alice_client):
    for name in ("b", "a", "c"):
        launch(rich_alice, name=name)
    assert _names(alice_client.get(URL, {"ordering": "name"})) == ["a", "b", "c"]
    assert _names(alice_client.get(URL, {"ordering": "-name"})) == ["c", "b", "a"]


def test_an_unknown_status_or_ordering_is_a_400_naming_the_parameter(rich_alice, alice_client):
    for params, field in (({"status": "flying"}, "status"), ({"ordering": "owner"}, "ordering")):
        response = alice_client.get(URL, params)
        assert response.status_code == 400
        assert field in response.json()["error"]["fields"]


def test_a_bad_page_or_page_size_is_a_400_and_a_page_past_the_end_a_404(rich_alice, alice_client):
    for params, field in (
        ({"page_size": "abc"}, "page_size"),
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "101"}, "page_size"),
        ({"page": "-1"}, "page"),
    ):
        response = alice_client.get(URL, params)
        assert response.status_code == 400, params
        assert list(response.json()["error"]["fields"]) == [field]
    assert alice_client.get(URL, {"page": "9"}).json()["error"]["code"] == "not_found"
    assert alice_client.get(URL, {"page_size": "100"}).status_code == 200
