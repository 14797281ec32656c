def test_a_validation_error_uses_the_one_error_format(alice_client):
    response = alice_client.post("/api/v1/account/tokens/", {}, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "code": "invalid",
            "message": "Some fields are not valid.",
            "fields": {"name": ["This field is required."]},
        }
    }


def test_malformed_json_uses_the_one_error_format(alice_client):
    response = alice_client.post("/api/v1/account/ssh-keys/", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


def test_an_unknown_id_is_a_json_404(alice_client):
    response = alice_client.get("/api/v1/account/ssh-keys/999999/")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}
