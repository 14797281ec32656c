"""Fixtures for the Slurm provider's tests: the cluster's (``fixtures``) and those of the instances app
that its tests on the cluster use (the small simulated fleet every instances test starts with, the
catalogue, alice with money)."""

from instances.tests.conftest import catalogue, rich_alice, small_fleet  # noqa: F401 (fixtures)
from providers.slurm.tests.cluster_fixtures import on_slurm, slurm_cluster, slurm_tmp_path  # noqa: F401 (fixtures)
