"""Every call of the local backend may be repeated: create twice makes one set of processes, stop and
destroy twice are done, and a machine that is gone says so instead of being made again by a start."""

from __future__ import annotations

import pytest

from providers import InstanceSpec, PermanentBackendError, TransientBackendError
from providers.local.tests.local_helpers import wait_until

pytestmark = pytest.mark.local

SPEC = InstanceSpec(node="test-host", gpu_model="h200", gpu_count=2, image="pytorch-2.5-cu124", disk_gb=50)


def test_create_twice_makes_one_machine_and_stop_and_destroy_twice_are_done(this_host):
    backend = this_host(services=("ssh",))
    first = backend.create(key="k1", spec=SPEC)
    wait_until(lambda: backend.poll(key="k1", state=first).state == "running", what="sshd")
    pid = backend.runtime.status("k1").servers["ssh"].pid

    again = backend.create(key="k1", spec=SPEC)
    assert again == first and first["gpus"] == ["0", "1"]
    assert backend.runtime.status("k1").servers["ssh"].pid == pid
    assert [(m.key, m.cards, m.observed) for m in backend.machines()] == [("k1", 2, "running")]

    with pytest.raises(TransientBackendError, match="0 free on this host"):  # both cards are taken
        backend.create(key="k2", spec=SPEC)
    assert backend.runtime.instance_keys() == ["k1"]

    for _ in range(2):
        backend.stop(key="k1", state=first)
        assert backend.poll(key="k1", state=first).state == "stopped"
    for _ in range(2):
        backend.destroy(key="k1", state=first)
        assert backend.poll(key="k1", state=first).state == "gone"
    with pytest.raises(PermanentBackendError):
        backend.start(key="k1", state=first, node="test-host")
    assert backend.machines() == []
