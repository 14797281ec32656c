import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from instances.errors import FundsTooLow, LaunchInvalid, NoCapacity, QuotaExceeded
from instances.models import Instance, Node
from instances.tests.conftest import launch, statuses
from providers import get_backend

S = Instance.Status


def test_a_launch_runs_on_a_node_of_the_chosen_model(rich_alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        instance = launch(rich_alice, count=2)
    instance.refresh_from_db()
    assert instance.status == S.RUNNING
    assert instance.node.gpu_model.slug == "a800-80g"
    assert instance.node.free_cards == 6
    assert statuses(instance) == [
        ("", "requested"),
        ("requested", "scheduling"),
        ("scheduling", "provisioning"),
        ("provisioning", "running"),
    ]
    machines = get_backend("default").machines()
    assert [m.key for m in machines] == [str(instance.pk)]


def test_it_is_placed_on_the_fullest_node_that_fits(rich_alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first = launch(rich_alice, count=2)
        second = launch(rich_alice, count=4)
    first.refresh_from_db()
    second.refresh_from_db()
    # Best fit: the second joins the half-used node, keeping the other node whole for an 8-card launch.
    assert second.node_id == first.node_id
    assert Node.objects.filter(gpu_model__slug="a800-80g", region__slug="cn-north-1", free_cards=8).count() == 1


def test_it_refuses_a_card_count_other_than_1_2_4_or_8(rich_alice):
    with pytest.raises(LaunchInvalid) as exc:
        launch(rich_alice, count=3)
    assert exc.value.field == "gpu_count"
    assert not Instance.objects.exists()


def test_it_refuses_a_disk_out_of_range(rich_alice):
    with pytest.raises(LaunchInvalid):
        launch(rich_alice, disk_gb=5)


def test_it_refuses_when_no_node_has_enough_free_cards_and_creates_nothing(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    launch(rich_alice, gpu="h800", count=8)
    with pytest.raises(NoCapacity) as exc:
        launch(rich_alice, gpu="h800", count=1)
    assert "H800" in exc.value.message
    assert Instance.objects.count() == 1


def test_it_refuses_over_quota_and_says_how_to_raise_it(rich_alice, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 4
    launch(rich_alice, count=4)
    with pytest.raises(QuotaExceeded) as exc:
        launch(rich_alice, count=1)
    assert "4 cards" in exc.value.message
    assert "quota page" in exc.value.message


def test_it_refuses_without_money_for_the_minimum_runway(alice, catalogue):
    with pytest.raises(FundsTooLow) as exc:
        launch(alice)
    assert exc.value.code == "insufficient_funds"
    assert "Top up" in exc.value.message
    assert not Instance.objects.exists()
    assert Node.objects.filter(free_cards__lt=8).count() == 0


def test_a_launch_takes_a_bounded_number_of_queries(rich_alice):
    launch(rich_alice)  # warm: nodes synced, SKUs priced
    with CaptureQueriesContext(connection) as ctx:
        launch(rich_alice)
    assert len(ctx.captured_queries) <= 45
