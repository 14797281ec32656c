"""A console API token (full or read-only) opens nothing at the instance proxy: only a session or the
deployment's own key does, so a read-only token cannot reach a user server to change anything there."""

import pytest

from accounts.models import APIToken
from accounts.services import api_token_create
from apps_marketplace import proxy_targets
from apps_marketplace.tests.conftest import deploy

SERVER = object()  # where the provider says the app listens


class _Provider:
    """The simulated cloud serves no proxy target; this one serves every service (the one seam mocked)."""

    def proxy_target(self, *, key: str, service: str):
        return SERVER


@pytest.mark.parametrize("scope", [APIToken.Scope.READ, APIToken.Scope.FULL])
def test_a_console_token_is_not_a_deployment_key(rich_alice, scope, monkeypatch):
    monkeypatch.setattr(proxy_targets, "get_backend", lambda alias: _Provider())
    deployment, key = deploy(rich_alice)
    _token, raw = api_token_create(user=rich_alice, name="t", expires_at=None, scope=scope)
    instance_id = str(deployment.instance_id)
    assert (
        proxy_targets.deployment_proxy_target(instance_id=instance_id, service="app", user=None, api_key=key) is SERVER
    )
    for service in ("app", "lab", "code"):
        assert (
            proxy_targets.deployment_proxy_target(instance_id=instance_id, service=service, user=None, api_key=raw)
            is None
        )
