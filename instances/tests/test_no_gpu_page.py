"""The instance page offers "Start without GPU" (with its price) beside Start on a stopped machine, and
says so clearly while it runs without cards."""

from django.urls import reverse

from instances.models import Instance, Node
from instances.services import instance_stop
from instances.tests.conftest import committed, running

S = Instance.Status


def _stopped(user, **kwargs) -> Instance:
    instance = running(user, **kwargs)
    with committed():
        instance_stop(instance=instance)
    return instance


def _page(client, instance) -> str:
    return client.get(reverse("instance_detail", args=[instance.pk])).content.decode()


def test_a_stopped_instance_offers_start_without_gpu_with_its_price(rich_alice, alice_client, settings):
    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 10
    instance = _stopped(rich_alice, count=2)
    page = _page(alice_client, instance)
    assert reverse("instance_action", args=[instance.pk, "start-no-gpu"]) in page
    assert "Start without GPU · ¥0.10/h" in page


def test_the_button_starts_it_without_cards_and_the_page_says_so(rich_alice, alice_client, settings):
    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 10
    instance = _stopped(rich_alice, count=2)
    free = sum(Node.objects.values_list("free_cards", flat=True))
    with committed():
        response = alice_client.post(reverse("instance_action", args=[instance.pk, "start-no-gpu"]))
    assert response.status_code == 302
    instance.refresh_from_db()
    assert (instance.status, instance.no_gpu) == (S.RUNNING, True)
    assert sum(Node.objects.values_list("free_cards", flat=True)) == free
    page = _page(alice_client, instance)
    assert "Running without GPU — CPU only, ¥0.10/h; stop and start to get cards." in page
    assert "start-no-gpu" not in page  # running: only Stop, Restart, Release


def test_a_cluster_is_not_offered_it_and_a_post_says_why(rich_alice, alice_client):
    instance = _stopped(rich_alice, count=4, nodes=2)
    assert "start-no-gpu" not in _page(alice_client, instance)
    response = alice_client.post(reverse("instance_action", args=[instance.pk, "start-no-gpu"]), follow=True)
    assert "A cluster cannot start without GPUs" in response.content.decode()
    instance.refresh_from_db()
    assert instance.status == S.STOPPED


def test_charlie_gets_404(rich_alice, charlie_client):
    instance = _stopped(rich_alice)
    response = charlie_client.post(reverse("instance_action", args=[instance.pk, "start-no-gpu"]))
    assert response.status_code == 404
    instance.refresh_from_db()
    assert instance.status == S.STOPPED


def test_the_list_shows_a_run_without_gpu_at_its_price(rich_alice, alice_client, settings):
    settings.INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = 10
    instance = _stopped(rich_alice, count=2)
    with committed():
        alice_client.post(reverse("instance_action", args=[instance.pk, "start-no-gpu"]))
    row = alice_client.get(reverse("instance_detail", args=[instance.pk]) + "?partial=row").content.decode()
    assert "without GPU" in row
    assert "¥0.10/h" in row and "¥3.80/h" not in row
    page = _page(alice_client, instance)
    assert "¥0.10/h without GPU" in page and "¥3.80/h while running" not in page
