"""Save as image, through the API on the simulated cloud: alice saves her instance, launches from the saved
image (its digest pinned), renames, shares and deletes it (refused while an instance uses it); it is billed
per GB-day and on her statement; charlie gets a 404 whatever his credential."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.services import api_token_create
from billing.models import Meter
from billing.settlement import meters_settle_all
from billing.statements import statement_get
from instances.models import Image, Instance
from instances.services import image_save_execute, instance_release, instance_stop
from instances.services.images import image_meter_ref
from instances.tests.conftest import committed, running, simulate
from providers import get_backend
from providers.simulated.models import SimulatedMachine

pytestmark = pytest.mark.django_db

BODY_DEFAULTS = {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "disk_gb": 50}


def _save(client, instance, **body):
    with committed():
        response = client.post(
            reverse("api-instance-save-image", args=[instance.pk]),
            {"name": "my-env", "tag": "v1", "note": "torch + my packages", **body},
            content_type="application/json",
        )
    return response


@pytest.fixture
def saved(rich_alice, alice_client):
    instance = running(rich_alice)
    response = _save(alice_client, instance)
    assert response.status_code == 202, response.content
    return instance, Image.objects.get(slug=response.json()["id"])


def test_saving_a_running_instance_makes_a_ready_image_in_the_owners_repository(saved, rich_alice, alice_client):
    instance, image = saved
    assert image.status == Image.Status.READY
    assert image.owner == rich_alice and image.source_instance == instance
    assert image.repository.endswith(f"/users/u{rich_alice.pk}/my-env") and image.tag == "v1"
    machine = SimulatedMachine.objects.get(key=str(instance.pk))
    assert machine.spec["saved_images"][0]["digest"] == image.digest  # the provider's answer, recorded
    listed = alice_client.get(reverse("api-image-list")).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [(r["id"], r["status"], r["size_bytes"] > 0, r["note"]) for r in rows] == [
        (image.slug, "ready", True, "torch + my packages")
    ]


def test_a_stopped_instance_can_be_saved_and_a_releasing_one_cannot(rich_alice, alice_client):
    instance = running(rich_alice)
    with committed():
        instance_stop(instance=instance)
    instance.refresh_from_db()
    assert instance.status == Instance.Status.STOPPED
    assert _save(alice_client, instance).status_code == 202
    with committed():
        instance_release(instance=instance)
    response = _save(alice_client, instance, tag="v2")
    assert response.status_code == 409 and response.json()["error"]["code"] == "invalid_state"


def test_the_same_name_and_tag_twice_is_a_409_and_a_bad_name_a_400(saved, alice_client):
    instance, _image = saved
    again = _save(alice_client, instance)
    assert again.status_code == 409 and again.json()["error"]["code"] == "image_exists"
    assert _save(alice_client, instance, name="My Env!").status_code == 400


def test_the_worker_running_twice_saves_once(saved):
    _instance, image = saved
    image_save_execute(image_id=image.pk)
    image.refresh_from_db()
    assert image.status == Image.Status.READY
    assert Meter.objects.filter(ref=image_meter_ref(image.pk)).count() == 1
    assert len(SimulatedMachine.objects.get(key=str(_instance.pk)).spec["saved_images"]) == 1


def test_a_provider_refusal_fails_the_image_with_its_reason_and_bills_nothing(rich_alice, alice_client):
    instance = running(rich_alice)
    with simulate(FAIL_IMAGE_SAVE=1):
        response = _save(alice_client, instance)
    image = Image.objects.get(slug=response.json()["id"])
    assert image.status == Image.Status.FAILED and "could not be saved" in image.status_reason
    assert not Meter.objects.filter(ref=image_meter_ref(image.pk)).exists()


def test_a_launch_from_the_saved_image_pins_its_digest(saved, rich_alice, alice_client):
    _instance, image = saved
    body = {**BODY_DEFAULTS, "image": image.slug}
    with committed():
        response = alice_client.post(reverse("api-instance-list"), body, content_type="application/json")
    assert response.status_code == 201, response.content
    launched = Instance.objects.get(pk=response.json()["id"])
    assert launched.image == image
    assert launched.image_ref == f"{image.repository}@{image.digest}"
    assert SimulatedMachine.objects.get(key=str(launched.pk)).spec["image_ref"] == launched.image_ref


def test_a_saved_image_is_never_in_the_catalogue(saved, alice_client, charlie_client):
    _instance, image = saved
    for client in (alice_client, charlie_client):
        catalogue = client.get(reverse("api-catalogue")).json()
        assert image.slug not in str(catalogue)


def test_charlie_gets_404_on_alices_image_whatever_his_credential(saved, charlie, charlie_client, catalogue):
    _instance, image = saved
    _token, raw = api_token_create(user=charlie, name="charlie", expires_at=None)
    for client in (charlie_client, Client(HTTP_AUTHORIZATION=f"Bearer {raw}")):
        assert client.get(reverse("api-image-detail", args=[image.slug])).status_code == 404
        for name, body in (("api-image-rename", {"name": "mine"}), ("api-image-share", {"shared": True})):
            response = client.post(reverse(name, args=[image.slug]), body, content_type="application/json")
            assert response.status_code == 404
        assert client.delete(reverse("api-image-detail", args=[image.slug])).status_code == 404
        listed = client.get(reverse("api-image-list")).json()
        assert image.slug not in str(listed)
        launch = client.post(
            reverse("api-instance-list"), {**BODY_DEFAULTS, "image": image.slug}, content_type="application/json"
        )
        assert launch.status_code == 400 and "image" in str(launch.json())
    image.refresh_from_db()
    assert image.status == Image.Status.READY and image.name == "my-env" and not image.shared


def test_rename_and_note(saved, alice_client):
    _instance, image = saved
    response = alice_client.post(
        reverse("api-image-rename", args=[image.slug]),
        {"name": "env-2", "note": "cleaned"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    image.refresh_from_db()
    assert (image.name, image.note) == ("env-2", "cleaned")
    assert image.pinned_ref.endswith(f"/my-env@{image.digest}")  # the pushed reference stays


def test_delete_is_refused_while_an_instance_uses_it_then_stops_the_bill(saved, rich_alice, alice_client):
    _instance, image = saved
    with committed():
        response = alice_client.post(
            reverse("api-instance-list"), {**BODY_DEFAULTS, "image": image.slug}, content_type="application/json"
        )
    user = Instance.objects.get(pk=response.json()["id"])
    refused = alice_client.delete(reverse("api-image-detail", args=[image.slug]))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "image_in_use"
    image.refresh_from_db()
    assert image.status == Image.Status.READY
    with committed():
        instance_release(instance=user)
    assert alice_client.delete(reverse("api-image-detail", args=[image.slug])).status_code == 204
    image.refresh_from_db()
    assert image.status == Image.Status.DELETED
    assert Meter.objects.get(ref=image_meter_ref(image.pk)).stopped_at is not None
    assert alice_client.get(reverse("api-image-detail", args=[image.slug])).status_code == 404


def test_it_is_billed_per_gb_day_and_on_the_statement(saved, rich_alice, alice_client, settings):
    _instance, image = saved
    meter = Meter.objects.get(ref=image_meter_ref(image.pk))
    gb = -(-image.size_bytes // 2**30)
    assert meter.sku.code == "image.gb" and meter.sku.is_storage and meter.unit_seconds == 86400
    assert meter.quantity == gb and meter.price_fen == settings.INSTANCES_IMAGE_PRICE_FEN_PER_GB_DAY
    Meter.objects.filter(pk=meter.pk).update(started_at=timezone.now() - timedelta(days=2))
    meters_settle_all()
    meter.refresh_from_db()
    assert meter.charged_fen == 2 * gb * settings.INSTANCES_IMAGE_PRICE_FEN_PER_GB_DAY
    month = timezone.localdate(timezone.now(), ZoneInfo(settings.TIME_ZONE)).replace(day=1)
    lines = {line.ref: line for line in statement_get(user=rich_alice, month=month).lines}
    line = lines[image_meter_ref(image.pk)]
    assert line.description == f"Image my-env:v1 ({gb} GB)" and line.unit == "GB-day"
    assert line.amount_fen == meter.charged_fen


def test_a_provider_without_the_capability_is_refused_before_anything_is_made(rich_alice, alice_client, monkeypatch):
    instance = running(rich_alice)
    backend = get_backend(instance.backend_alias)
    monkeypatch.setattr(type(backend), "supports_image_save", False)
    response = _save(alice_client, instance)
    assert response.status_code == 409 and response.json()["error"]["code"] == "image_save_not_supported"
    assert not Image.objects.filter(owner=rich_alice).exists()


def test_an_account_deleted_deletes_its_images_and_closes_their_meters(saved, rich_alice):
    from privacy import services as privacy

    _instance, image = saved
    request = privacy.deletion_request(user=rich_alice)
    with committed():
        privacy.deletions_due(now=request.due_at + timedelta(seconds=1))
    with committed():
        privacy.deletions_due(now=request.due_at + timedelta(seconds=2))
    image.refresh_from_db()
    assert image.status == Image.Status.DELETED
    assert Meter.objects.get(ref=image_meter_ref(image.pk)).stopped_at is not None


def test_a_save_retried_with_its_idempotency_key_answers_the_first_image(rich_alice, alice_client):
    instance = running(rich_alice)
    url = reverse("api-instance-save-image", args=[instance.pk])
    body = {"name": "my-env", "tag": "v1"}
    with committed():
        first = alice_client.post(url, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="save-1")
    second = alice_client.post(url, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="save-1")
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert Image.objects.filter(owner=rich_alice).count() == 1


def test_a_save_whose_task_vanished_is_redriven_then_failed_past_its_deadline(rich_alice, settings):
    from instances.services import image_save, images_saving_repair

    instance = running(rich_alice)
    image = image_save(instance=instance, actor=rich_alice, name="lost", tag="v1")  # its task never ran
    assert images_saving_repair() == {"images_failed": 0, "images_redriven": 0}  # not stale yet
    later = timezone.now() + timedelta(seconds=settings.INSTANCES_IMAGE_SAVE_REDRIVE_S + 1)
    with committed():
        assert images_saving_repair(now=later)["images_redriven"] == 1
    image.refresh_from_db()
    assert image.status == Image.Status.READY  # the task ran again, and finished it

    stuck = image_save(instance=instance, actor=rich_alice, name="stuck", tag="v1")
    past = timezone.now() + timedelta(seconds=settings.INSTANCES_IMAGE_SAVE_DEADLINE_S + 1)
    with simulate(FAIL_IMAGE_SAVE=1), committed():  # a save that cannot finish here: only its deadline ends it
        images_saving_repair(now=past)
    stuck.refresh_from_db()
    assert stuck.status == Image.Status.FAILED


def test_an_image_that_is_no_id_is_a_400_on_its_field_never_a_query(rich_alice, alice_client):
    for image in ("img-\x00", "\u00fem\x00", "img-zz"):
        response = alice_client.post(
            reverse("api-instance-list"), {**BODY_DEFAULTS, "image": image}, content_type="application/json"
        )
        assert response.status_code == 400 and "image" in response.json()["error"]["fields"]
