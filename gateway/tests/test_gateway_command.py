"""The instance page and the API show the gateway command while the gateway is on and the instance runs;
new instances get the gateway's key among their authorized keys."""

from __future__ import annotations

import pytest

from gateway.keys import instance_public_key
from instances.services.common import _spec
from instances.tests.conftest import committed

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_page_and_the_api_show_the_gateway_command(world, client_for, settings):
    alice, instance = world["alice"], world["instance"]
    client = client_for(alice.user)
    command = f"ssh -p 2222 {instance.pk}@testserver"
    assert client.get(f"/api/v1/instances/{instance.pk}/").json()["entry_points"]["gateway_command"] == command
    assert f'<code id="gateway-command">{command}</code>' in client.get(f"/instances/{instance.pk}/").content.decode()

    settings.GATEWAY_HOST, settings.GATEWAY_PORT = "ssh.gpu.example.org", 22
    api = client.get(f"/api/v1/instances/{instance.pk}/").json()
    assert api["entry_points"]["gateway_command"] == f"ssh {instance.pk}@ssh.gpu.example.org"

    settings.GATEWAY_ENABLED = False
    assert client.get(f"/api/v1/instances/{instance.pk}/").json()["entry_points"]["gateway_command"] is None
    assert "gateway-command" not in client.get(f"/instances/{instance.pk}/").content.decode()


def test_no_command_once_the_instance_stops(world, client_for):
    from instances.services import instance_stop

    alice, instance = world["alice"], world["instance"]
    with committed():
        instance_stop(instance=instance)
    api = client_for(alice.user).get(f"/api/v1/instances/{instance.pk}/").json()
    assert api["status"] == "stopped"
    assert api["entry_points"]["gateway_command"] is None


def test_the_gateways_key_is_installed_beside_the_owners(world, settings):
    alice, instance = world["alice"], world["instance"]
    keys = _spec(instance).ssh_public_keys
    assert keys == (alice.ssh_key.public_key, instance_public_key(instance.pk))
    assert instance_public_key(instance.pk) != instance_public_key(instance.owner.instances.model().pk)

    settings.GATEWAY_ENABLED = False
    assert _spec(instance).ssh_public_keys == (alice.ssh_key.public_key,)
