import pytest
from django.urls import reverse

from instances.tests.conftest import running


@pytest.mark.parametrize("model", ["instance", "node", "straymachine", "quotarequest", "gpuquota", "reservation"])
def test_staff_see_the_changelists(rich_alice, staff, client_for, model):
    instance = running(rich_alice)
    client = client_for(staff)
    assert client.get(reverse(f"admin:instances_{model}_changelist")).status_code == 200
    if model == "instance":
        assert client.get(reverse("admin:instances_instance_change", args=[instance.pk])).status_code == 200
