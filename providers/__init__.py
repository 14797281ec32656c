"""The providers: what runs the console's machines, each behind one contract (``providers.base``).

One package per provider, each the same shape (its class in ``backend.py``, what it drives beside it)::

    providers.simulated   the simulated cloud: the default backend, and the one tests use (a Django app:
                          its fleet is in tables of its own, so web, worker and beat share one cloud)
    providers.local       this host: per instance a JupyterLab, a code-server and an sshd (``runtime``)
    providers.slurm       a Slurm cluster: an instance is a batch job (``job`` runs on its nodes)
    providers.kubernetes  a Kubernetes namespace: an instance is a StatefulSet of one GPU pod

The console chooses one per region by alias, as Django chooses a storage or an e-mail backend::

    PROVISIONING_BACKENDS = {
        "default": {"BACKEND": "providers.simulated.backend.SimulatedBackend", "OPTIONS": {...}},
    }

and reaches it through ``get_backend(alias)``. A provider is told what to run (``InstanceSpec``) and
answers what it sees (``Observation``): it imports nothing of the console's apps (the import
contract "providers" in ``.importlinter`` keeps it so), so each can be tested and replaced alone;
``providers/tests/test_contract.py`` runs the contract's clauses against every one.

The loader (``get_backend``, ``backend_aliases``, ``backend_class``) is imported on first use, not
here: the Slurm job (``python -m providers.slurm.job``) imports this package on compute nodes, and
must not import Django there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from providers.base import (
    AppLaunch,
    BackendError,
    BuildLimits,
    ClusterResizeCapability,
    ClustersCapability,
    EntryPoints,
    EntryPointsCapability,
    GpuMetricsCapability,
    GpuProcess,
    GpuSample,
    ImageBuildCapability,
    ImagesCapability,
    InstanceSpec,
    MachineInfo,
    NodeInfo,
    Observation,
    Observed,
    PermanentBackendError,
    ProvisioningBackend,
    RegistryLogin,
    SecretValue,
    SnapshotsCapability,
    SshTarget,
    TransientBackendError,
    VolumeMount,
    VolumesCapability,
)

if TYPE_CHECKING:
    from providers.loader import backend_aliases, backend_class, get_backend

__all__ = [
    "AppLaunch",
    "BackendError",
    "BuildLimits",
    "ClusterResizeCapability",
    "ClustersCapability",
    "EntryPoints",
    "EntryPointsCapability",
    "GpuMetricsCapability",
    "GpuProcess",
    "GpuSample",
    "ImageBuildCapability",
    "ImagesCapability",
    "InstanceSpec",
    "MachineInfo",
    "NodeInfo",
    "Observation",
    "Observed",
    "PermanentBackendError",
    "ProvisioningBackend",
    "RegistryLogin",
    "SecretValue",
    "SnapshotsCapability",
    "SshTarget",
    "TransientBackendError",
    "VolumeMount",
    "VolumesCapability",
    "backend_aliases",
    "backend_class",
    "get_backend",
]

_LOADER = ("get_backend", "backend_aliases", "backend_class")


def __getattr__(name: str):
    if name in _LOADER:
        # Local: the loader imports Django, and the Slurm job imports this package on compute nodes
        # that have no Django settings (see the docstring above); only the console asks for it.
        from providers import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
