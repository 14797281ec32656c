"""A start whose spec asks for no cards (no-GPU mode) runs without any: CUDA_VISIBLE_DEVICES is empty and
the cards it held go back; a later start with cards takes them again."""

from __future__ import annotations

from dataclasses import replace

import pytest

from providers import InstanceSpec
from providers.local.tests.local_helpers import wait_until

pytestmark = pytest.mark.local

SPEC = InstanceSpec(node="test-host", gpu_model="h200", gpu_count=2, image="pytorch-2.5-cu124", disk_gb=50)


def test_a_start_without_cards_holds_none_and_a_start_with_them_takes_them_again(this_host):
    backend = this_host(services=("ssh",))
    state = backend.create(key="k1", spec=SPEC)
    wait_until(lambda: backend.poll(key="k1", state=state).state == "running", what="sshd")
    backend.stop(key="k1", state=state)

    state = backend.start(key="k1", state=state, node="test-host", spec=replace(SPEC, gpu_count=0))
    assert state["gpus"] == []
    assert [(m.key, m.cards) for m in backend.machines()] == [("k1", 0)]
    other = backend.create(key="k2", spec=SPEC)  # both cards were free for another machine
    assert other["gpus"] == ["0", "1"]
    backend.destroy(key="k2", state=other)

    backend.stop(key="k1", state=state)
    state = backend.start(key="k1", state=state, node="test-host", spec=SPEC)
    assert state["gpus"] == ["0", "1"]
    backend.destroy(key="k1", state=state)
