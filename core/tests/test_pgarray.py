"""Integer arrays sent as one literal read back as the same integers, and nothing else gets in."""

import pytest
from django.db import connection

from core.pgarray import bigint_array


@pytest.mark.django_db
def test_integers_and_nulls_round_trip_through_the_cast():
    values = [0, 1, -7, 2**62, None, 42]
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::bigint[]", [bigint_array(values)])
        assert cursor.fetchone()[0] == values
        cursor.execute("SELECT %s::bigint[]", [bigint_array([])])
        assert cursor.fetchone()[0] == []


@pytest.mark.parametrize("bad", ["1}", True, 1.5, "NULL"])
def test_anything_but_an_integer_is_refused(bad):
    with pytest.raises(TypeError):
        bigint_array([1, bad])
