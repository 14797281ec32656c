# The instances app's fleet, catalogue and funded alice.
from instances.tests.conftest import catalogue, rich_alice, small_fleet  # noqa: F401
