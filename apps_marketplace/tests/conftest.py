import pytest

from apps_marketplace.loaders import marketplace_catalogue_load
from instances.catalogue import catalogue_seed


@pytest.fixture
def catalogue(db):
    """The shipped GPU and marketplace catalogues, as `make run` seeds them."""
    catalogue_seed()
    return marketplace_catalogue_load()
