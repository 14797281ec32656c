from accounts.models import SSHKey
from accounts.services import ssh_key_add
from accounts.tests import keys

URL = "/api/v1/account/ssh-keys/"


def test_alice_adds_a_key_through_the_api(alice, alice_client):
    line = keys.ed25519_public()
    response = alice_client.post(URL, {"name": "laptop", "public_key": line}, content_type="application/json")
    assert response.status_code == 201
    body = response.json()
    key = SSHKey.objects.get(user=alice)
    assert body == {
        "id": key.pk,
        "name": "laptop",
        "key_type": "ssh-ed25519",
        "bits": 256,
        "fingerprint": key.fingerprint,
        "public_key": line,
        "created_at": body["created_at"],
    }


def test_a_refused_key_answers_400_with_the_reason_on_the_field(alice_client):
    response = alice_client.post(
        URL, {"name": "old", "public_key": keys.rsa_public(1024)}, content_type="application/json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert error["message"] == "Some fields are not valid."
    assert "at least 2048" in error["fields"]["public_key"][0]


def test_the_list_is_paginated_and_newest_first(alice, alice_client, django_assert_max_num_queries):
    for n in range(3):
        ssh_key_add(user=alice, name=f"key {n}", public_key=keys.ed25519_public())
    with django_assert_max_num_queries(5):
        body = alice_client.get(URL, {"page_size": 2}).json()
    assert body["count"] == 3
    assert [key["name"] for key in body["results"]] == ["key 2", "key 1"]
    assert body["next"]


def test_alice_renames_a_key(alice, alice_client):
    key = ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    response = alice_client.patch(f"{URL}{key.pk}/", {"name": "old laptop"}, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["name"] == "old laptop"
    key.refresh_from_db()
    assert key.name == "old laptop"


def test_a_rename_to_a_taken_name_is_refused(alice, alice_client):
    ssh_key_add(user=alice, name="desktop", public_key=keys.ed25519_public())
    key = ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    response = alice_client.patch(f"{URL}{key.pk}/", {"name": "Desktop"}, content_type="application/json")
    assert response.status_code == 400
    assert "desktop" in response.json()["error"]["fields"]["name"][0].lower()


def test_alice_deletes_a_key(alice, alice_client):
    key = ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    assert alice_client.delete(f"{URL}{key.pk}/").status_code == 204
    assert not SSHKey.objects.exists()
    assert alice_client.delete(f"{URL}{key.pk}/").status_code == 404


def test_put_is_not_offered(alice, alice_client):
    key = ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    response = alice_client.put(f"{URL}{key.pk}/", {"name": "x"}, content_type="application/json")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_refusal_quoting_a_name_with_a_percent_sign_is_still_a_400(alice, alice_client):
    line = keys.ed25519_public()
    ssh_key_add(user=alice, name="100% mine", public_key=line)
    response = alice_client.post(URL, {"name": "again", "public_key": line}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["public_key"] == ["You already added this key, as “100% mine”."]
