"""The simulated cloud counts a cluster's cards on every node it spans, with no database-specific lookup
(a JSON containment lookup, PostgreSQL's alone, once made every launch fail elsewhere)."""

import uuid

import pytest

from providers import InstanceSpec, PermanentBackendError, get_backend

HEAD, PEER = "cn-north-1-a800-80g-01", "cn-north-1-a800-80g-02"


def _create(backend, *, node, cards, peers=()):
    key = str(uuid.uuid4())
    spec = InstanceSpec(
        node=node, gpu_model="a800-80g", gpu_count=cards, image="x", disk_gb=50, nodes=1 + len(peers), peer_nodes=peers
    )
    return key, backend.create(key=key, spec=spec)


def test_a_clusters_peer_node_refuses_a_machine_that_no_longer_fits(db):
    backend = get_backend("default")
    _create(backend, node=HEAD, cards=6, peers=(PEER,))

    with pytest.raises(PermanentBackendError, match="fewer than 4 free GPUs"):
        _create(backend, node=PEER, cards=4)
    _create(backend, node=PEER, cards=2)  # what is left of the peer


def test_a_stopped_cluster_gives_its_peers_cards_back(db):
    backend = get_backend("default")
    key, state = _create(backend, node=HEAD, cards=8, peers=(PEER,))
    backend.stop(key=key, state=state)

    _create(backend, node=PEER, cards=8)
    _create(backend, node=HEAD, cards=8)
