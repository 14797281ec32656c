"""The instance page's line of starts: a start refused for lack of cards offers "Wait in line" beside
its reason; in line, the page says since when and where, with "Leave the line"."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from instances.models import Instance
from instances.services import instance_stop
from instances.tests.conftest import backends, committed, fund, running


@pytest.fixture
def stopped(rich_alice, bob, settings):
    """Alice's stopped 8 × H800 instance, and bob's on the only H800 node: no cards for her start."""
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    instance = running(rich_alice, gpu="h800", count=8)
    with committed():
        instance_stop(instance=instance)
    fund(bob, 1_000_000)
    running(bob, gpu="h800", count=8)
    return instance


def _act(client, instance, action):
    return client.post(reverse("instance_action", args=[instance.pk, action]))


def _page(client, instance) -> str:
    return client.get(reverse("instance_detail", args=[instance.pk])).content.decode()


def test_a_start_refused_for_lack_of_cards_offers_to_wait_in_line_beside_the_reason(stopped, alice_client):
    assert "No node in" not in _page(alice_client, stopped)

    assert _act(alice_client, stopped, "start").status_code == 302
    page = _page(alice_client, stopped)

    assert "No node in" in page and "free H800" in page
    assert reverse("instance_action", args=[stopped.pk, "wait-in-line"]) in page
    assert "Wait in line" in page


def test_waiting_in_line_shows_since_when_and_the_place_with_a_button_to_leave(stopped, alice_client):
    _act(alice_client, stopped, "start")

    assert _act(alice_client, stopped, "wait-in-line").status_code == 302
    page = _page(alice_client, stopped)

    stopped.refresh_from_db()
    assert stopped.status == Instance.Status.STOPPED and stopped.start_queued_at is not None
    assert "Waiting for cards since" in page and "(position 1)" in page
    assert "Leave the line" in page
    assert "Wait in line" not in page
    body = alice_client.get(reverse("instance_detail", args=[stopped.pk]) + "?partial=body").content.decode()
    assert "(position 1)" in body  # the live partial says the same
    assert "waiting in line for cards" in alice_client.get(reverse("instances")).content.decode()


def test_leaving_the_line_from_the_page(stopped, alice_client):
    _act(alice_client, stopped, "wait-in-line")

    assert _act(alice_client, stopped, "leave-line").status_code == 302

    stopped.refresh_from_db()
    assert stopped.start_queued_at is None
    page = _page(alice_client, stopped)
    assert "Waiting for cards since" not in page and "Leave the line" not in page


def test_the_offer_is_not_made_for_other_refusals(stopped, alice_client, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 4

    _act(alice_client, stopped, "start")

    page = _page(alice_client, stopped)
    assert "quota" in page.lower()
    assert "Wait in line" not in page
    assert "A start needs 8 H800 80GB cards: your quota is 4 and 0 are in use, so it would be refused." in page


def test_a_start_refused_while_in_line_says_why_and_keeps_the_place(stopped, alice_client):
    _act(alice_client, stopped, "wait-in-line")

    _act(alice_client, stopped, "start")
    page = _page(alice_client, stopped)

    assert "No node in" in page  # the refusal, as a message
    assert "(position 1)" in page and "Wait in line" not in page


def test_a_stopped_instance_says_before_its_start_that_no_node_has_its_cards_and_offers_the_line(stopped, alice_client):
    page = _page(alice_client, stopped)

    assert 'id="start-outlook"' in page
    assert "no node has 8 free H800 80GB cards (at most 0), so a start now would be refused" in page
    assert reverse("instance_action", args=[stopped.pk, "wait-in-line"]) in page
    assert "waiting in line for these cards" not in page  # nobody is


def test_the_outlook_counts_who_waits_and_when_an_auto_stop_frees_the_cards(rich_alice, bob, alice_client, settings):
    settings.INSTANCES_DEFAULT_GPU_QUOTA = 64
    mine = []
    for _n in range(2):
        instance = running(rich_alice, gpu="h800", count=8)
        with committed():
            instance_stop(instance=instance)
        mine.append(instance)
    fund(bob, 1_000_000)
    running(bob, gpu="h800", count=8)
    _act(alice_client, mine[0], "wait-in-line")
    stopped = mine[1]
    at = timezone.now() + timedelta(hours=2)
    Instance.objects.filter(gpu_model__slug="h800", status=Instance.Status.RUNNING).update(auto_stop_at=at)

    page = _page(alice_client, stopped)

    assert "1 instance is waiting in line for these cards." in page
    assert f"Cards are known to free up by {timezone.localtime(at):%Y-%m-%d %H:%M}" in page


def test_a_stopped_instance_whose_cards_are_free_says_a_start_should_get_them(rich_alice, alice_client):
    instance = running(rich_alice, gpu="h800", count=4)
    with committed():
        instance_stop(instance=instance)

    page = _page(alice_client, instance)

    assert "a start should get its 4 H800 80GB cards (8 free in the region, up to 8 on one node)" in page
    assert 'class="start-outlook fits"' in page


def test_the_outlook_is_not_shown_while_it_waits_in_line(stopped, alice_client):
    _act(alice_client, stopped, "wait-in-line")
    assert 'id="start-outlook"' not in _page(alice_client, stopped)


def test_where_the_disk_is_on_shared_storage_the_outlook_says_any_node_will_do(rich_alice, alice_client, settings):
    instance = running(rich_alice, gpu="h800", count=4)
    with committed():
        instance_stop(instance=instance)
    moves = "a start takes cards on whichever node has them, with nothing to move"
    assert moves not in _page(alice_client, instance)  # node-local disks: not said

    settings.PROVISIONING_BACKENDS = backends(DISK_FOLLOWS=True)
    assert moves in _page(alice_client, instance)
