"""A launch where IDENTITY_REAL_NAME_REQUIRED is on: the person launching must have a verified real name."""

from __future__ import annotations

import pytest

from identity.services import real_name_verify_individual
from instances.errors import RealNameMissing
from instances.models import Instance
from instances.tests.conftest import launch


def test_off_by_default_a_launch_needs_no_real_name(rich_alice):
    assert launch(rich_alice).pk and Instance.objects.count() == 1


def test_on_a_launch_is_refused_until_the_person_is_verified(rich_alice, settings):
    settings.IDENTITY_REAL_NAME_REQUIRED = True
    with pytest.raises(RealNameMissing) as refused:
        launch(rich_alice)
    assert refused.value.code == "real_name_required"
    assert not Instance.objects.exists()
    real_name_verify_individual(user=rich_alice, name="张小三", id_number="440308199003071235")
    assert launch(rich_alice).pk and Instance.objects.count() == 1
