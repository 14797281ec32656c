from django.urls import reverse

from instances.models import Instance
from instances.tests.conftest import running


def test_the_list_shows_status_gpu_and_price(rich_alice, alice_client):
    instance = running(rich_alice, count=2, name="train-a")
    page = alice_client.get(reverse("instances"))
    body = page.content.decode()
    assert page.status_code == 200
    assert "train-a" in body
    assert "2 × A800 80GB" in body
    assert "¥3.80/h" in body
    assert f'data-live-instance="{instance.pk}"' in body


def test_the_list_is_an_empty_state_with_a_launch_button_at_first(alice_client, catalogue):
    body = alice_client.get(reverse("instances")).content.decode()
    assert "No instances yet" in body
    assert reverse("instance_launch") in body


def test_the_launch_page_shows_models_prices_and_free_cards_on_a_fresh_install(rich_alice, alice_client):
    page = alice_client.get(reverse("instance_launch"))
    body = page.content.decode()
    assert page.status_code == 200
    assert "A800 80GB" in body and "¥1.90" in body
    assert '"free": 16' in body  # two 8-card A800 nodes in cn-north-1, all free


def test_launching_from_the_page_redirects_to_the_instance(rich_alice, alice_client):
    from instances.models import GpuModel, Image, Region

    response = alice_client.post(
        reverse("instance_launch"),
        {
            "region": Region.objects.get(slug="cn-north-1").pk,
            "gpu_model": GpuModel.objects.get(slug="a800-80g").pk,
            "gpu_count": 1,
            "image": Image.objects.first().pk,
            "disk_gb": 50,
            "name": "from-the-page",
        },
    )
    instance = Instance.objects.get(name="from-the-page")
    assert response.status_code == 302
    assert response["Location"] == reverse("instance_detail", args=[instance.pk])


def test_a_refused_launch_shows_why_on_the_form(alice, alice_client, catalogue):
    from instances.models import GpuModel, Image, Region

    response = alice_client.post(
        reverse("instance_launch"),
        {
            "region": Region.objects.get(slug="cn-north-1").pk,
            "gpu_model": GpuModel.objects.get(slug="a800-80g").pk,
            "gpu_count": 1,
            "image": Image.objects.first().pk,
            "disk_gb": 50,
        },
    )
    assert response.status_code == 200
    assert "Top up" in response.content.decode()
    assert not Instance.objects.exists()


def test_the_detail_page_shows_the_timeline_with_reasons(rich_alice, alice_client):
    instance = running(rich_alice)
    body = alice_client.get(reverse("instance_detail", args=[instance.pk])).content.decode()
    assert "Timeline" in body
    assert "Booted on cn-north-1-a800-80g-" in body
    assert "Launched by alice@example.com" in body


def test_the_row_partial_is_the_row_the_list_renders(rich_alice, alice_client):
    instance = running(rich_alice)
    row = alice_client.get(reverse("instance_detail", args=[instance.pk]) + "?partial=row").content.decode()
    assert row.startswith("<tr") or row.lstrip().startswith("<tr")
    assert f'id="instance-{instance.pk}"' in row


def test_stopping_from_the_list_answers_the_new_row_to_htmx(rich_alice, alice_client):
    instance = running(rich_alice)
    response = alice_client.post(
        reverse("instance_action", args=[instance.pk, "stop"]), {"from": "list"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert 'data-status="stopping"' in response.content.decode() or 'data-status="stopped"' in response.content.decode()


def test_renaming_and_auto_stop_from_the_detail_page(rich_alice, alice_client):
    instance = running(rich_alice)
    alice_client.post(reverse("instance_rename", args=[instance.pk]), {"name": "renamed"})
    alice_client.post(reverse("instance_auto_stop", args=[instance.pk]), {"idle_minutes": 45})
    instance.refresh_from_db()
    assert (instance.name, instance.auto_stop_idle_minutes) == ("renamed", 45)
