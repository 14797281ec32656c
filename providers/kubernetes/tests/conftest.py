"""The instances app's fixtures these provider tests use: its autouse small simulated fleet (each test
names its own backend), the catalogue, money and, for the local provider, this host's backend."""

from instances.tests.conftest import catalogue, rich_alice, small_fleet, this_host  # noqa: F401 (fixtures)
