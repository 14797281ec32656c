"""The local runtime's resolver: the owner recorded at start, and nobody else, gets a target."""

from __future__ import annotations

import json

import pytest

from providers.local.runtime import registry
from providers.local.runtime.servers import Paths


@pytest.fixture
def runtime(tmp_path, settings):
    settings.LOCAL_RUNTIME = {"ROOT": tmp_path, "SERVICES": ["lab", "code"], "ENGINE": "process"}
    registry.get_runtime.cache_clear()
    yield registry.get_runtime()
    registry.get_runtime.cache_clear()


def _record(runtime, key: str, owner_ref: str) -> None:
    """What ``start`` writes, without starting servers."""
    paths = Paths(runtime.root / key)
    paths.run.mkdir(parents=True)
    paths.meta.write_text(json.dumps({"key": key, "owner_ref": owner_ref, "secrets": {"lab": "L", "code": "C"}}))
    runtime.ports.allocate(key, ["lab", "code"])


def test_the_owner_gets_targets_with_the_servers_secrets(runtime, alice):
    _record(runtime, "k1", registry.owner_ref_for(alice))
    lab = registry.proxy_target_for(instance_id="k1", service="lab", user=alice)
    code = registry.proxy_target_for(instance_id="k1", service="code", user=alice)
    assert lab.port == runtime.ports.get("k1")["lab"] and dict(lab.headers) == {"Authorization": "token L"}
    assert not lab.strip_prefix
    assert code.strip_prefix and dict(code.cookies) == {"code-server-session": "C"}


def test_anyone_else_gets_nothing(runtime, alice, charlie):
    _record(runtime, "k1", registry.owner_ref_for(alice))
    assert registry.proxy_target_for(instance_id="k1", service="lab", user=charlie) is None
    assert registry.proxy_target_for(instance_id="nope", service="lab", user=alice) is None
    assert registry.proxy_target_for(instance_id="k1", service="ssh", user=alice) is None


def test_a_stopped_instance_has_no_target(runtime, alice):
    _record(runtime, "k1", registry.owner_ref_for(alice))
    runtime.ports.release("k1")
    assert registry.proxy_target_for(instance_id="k1", service="lab", user=alice) is None
