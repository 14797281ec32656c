import pytest
from django.core.exceptions import ValidationError

from accounts.models import SSHKey
from accounts.services import ssh_key_add
from accounts.tests import keys

URL = "/account/ssh-keys/"


def field_errors(error: ValidationError, field: str) -> list[ValidationError]:
    return error.error_dict[field]


def test_alice_adds_a_key_and_sees_it_listed_with_its_fingerprint(alice, alice_client):
    line = keys.ed25519_public()
    response = alice_client.post(URL, {"name": "laptop", "public_key": line}, follow=True)
    assert response.status_code == 200
    key = SSHKey.objects.get(user=alice)
    assert key.name == "laptop"
    assert key.public_key == line
    body = response.content.decode()
    assert "laptop" in body and key.fingerprint in body
    assert "SSH key “laptop” added." in body


def test_without_a_name_the_comment_becomes_the_name(alice):
    key = ssh_key_add(user=alice, name="  ", public_key=keys.ed25519_public(comment="alice@workstation"))
    assert key.name == "alice@workstation"


def test_without_a_name_or_comment_it_asks_for_a_name(alice):
    with pytest.raises(ValidationError) as caught:
        ssh_key_add(user=alice, name="", public_key=keys.ed25519_public(comment=""))
    assert field_errors(caught.value, "name")[0].code == "required"
    assert not SSHKey.objects.exists()


def test_the_same_key_twice_names_the_existing_one(alice):
    line = keys.ed25519_public()
    ssh_key_add(user=alice, name="laptop", public_key=line)
    with pytest.raises(ValidationError) as caught:
        ssh_key_add(user=alice, name="laptop again", public_key=line.replace("alice@laptop", "other comment"))
    error = field_errors(caught.value, "public_key")[0]
    assert error.code == "duplicate_key"
    assert "“laptop”" in error.message
    assert SSHKey.objects.filter(user=alice).count() == 1


def test_a_name_already_used_is_refused_whatever_its_case(alice):
    ssh_key_add(user=alice, name="Laptop", public_key=keys.ed25519_public())
    with pytest.raises(ValidationError) as caught:
        ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    assert field_errors(caught.value, "name")[0].code == "duplicate_name"


def test_two_people_may_add_the_same_key(alice, charlie):
    line = keys.ed25519_public()
    ssh_key_add(user=alice, name="shared", public_key=line)
    ssh_key_add(user=charlie, name="shared", public_key=line)
    assert SSHKey.objects.count() == 2


def test_a_refused_key_shows_the_reason_beside_the_field(alice, alice_client):
    private = keys.openssh_private()
    response = alice_client.post(URL, {"name": "oops", "public_key": private})
    assert response.status_code == 400
    body = response.content.decode()
    assert private.splitlines()[1] not in body  # never echoed back into the page
    assert 'class="field has-error"' in body
    assert "This is a PRIVATE key" in body
    assert not SSHKey.objects.exists()


def test_a_duplicate_paste_on_the_page_names_the_existing_key(alice, alice_client):
    line = keys.ed25519_public()
    ssh_key_add(user=alice, name="laptop", public_key=line)
    response = alice_client.post(URL, {"name": "", "public_key": line})
    assert response.status_code == 400
    assert "You already added this key, as “laptop”." in response.content.decode()


def test_the_empty_list_says_what_to_do(alice_client):
    response = alice_client.get(URL)
    assert response.status_code == 200
    assert "No SSH keys yet" in response.content.decode()


def test_the_list_page_does_a_fixed_number_of_queries(alice, alice_client, django_assert_max_num_queries):
    for n in range(5):
        ssh_key_add(user=alice, name=f"key {n}", public_key=keys.ed25519_public())
    with django_assert_max_num_queries(6):
        response = alice_client.get(URL)
    assert response.content.decode().count('class="fingerprint"') == 5
