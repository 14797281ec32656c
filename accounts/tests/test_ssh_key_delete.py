from accounts.models import SSHKey
from accounts.services import ssh_key_add, ssh_key_delete
from accounts.tests import keys


def test_delete_asks_for_confirmation_first(alice, alice_client):
    key = ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    response = alice_client.get(f"/account/ssh-keys/{key.pk}/delete/")
    assert response.status_code == 200
    assert "Delete the key “laptop”?" in response.content.decode()
    assert SSHKey.objects.filter(pk=key.pk).exists()


def test_posting_the_confirmation_deletes_the_key(alice, alice_client):
    key = ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    response = alice_client.post(f"/account/ssh-keys/{key.pk}/delete/")
    assert response.status_code == 302
    assert response["Location"] == "/account/ssh-keys/"
    assert not SSHKey.objects.filter(pk=key.pk).exists()


def test_deleting_twice_is_harmless(alice):
    key = ssh_key_add(user=alice, name="laptop", public_key=keys.ed25519_public())
    assert ssh_key_delete(user=alice, key_id=key.pk) is True
    assert ssh_key_delete(user=alice, key_id=key.pk) is False


def test_a_deleted_key_may_be_added_again(alice):
    line = keys.ed25519_public()
    key = ssh_key_add(user=alice, name="laptop", public_key=line)
    ssh_key_delete(user=alice, key_id=key.pk)
    assert ssh_key_add(user=alice, name="laptop", public_key=line).fingerprint == key.fingerprint
