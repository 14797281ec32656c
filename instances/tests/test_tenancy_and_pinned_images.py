"""Every account's machines run in a uid range of its own, and on the image digest chosen at launch."""

from __future__ import annotations

import pytest

from instances.models import Image, TenantRange
from instances.services.common import _spec
from instances.tenancy import tenant_for
from instances.tests.conftest import launch

pytestmark = pytest.mark.django_db


def test_two_accounts_never_share_a_uid_range_or_a_unix_user(alice, bob):
    a, b = tenant_for(account_id=alice.pk), tenant_for(account_id=bob.pk)

    assert a.name != b.name and a.uid != b.uid
    low, high = sorted((a, b), key=lambda t: t.uid_base)
    assert low.uid_base + low.uid_count <= high.uid_base
    # Above the host's people and the subordinate ranges useradd hands out by default.
    assert min(a.uid_base, b.uid_base) >= 100000 + 65536 * 8 and min(a.uid, b.uid) >= 60000


def test_an_accounts_tenant_is_allocated_once(alice):
    assert tenant_for(account_id=alice.pk) == tenant_for(account_id=alice.pk)
    assert TenantRange.objects.filter(account=alice).count() == 1


def test_a_launch_pins_the_images_digest_and_a_moved_tag_leaves_the_machine_alone(rich_alice):
    image = Image.objects.get(slug="pytorch-2.5-cu124")
    image.repository, image.tag, image.digest = "127.0.0.1:5050/console/pytorch", "2.5-cu124", "sha256:" + "a" * 64
    image.save()
    instance = launch(rich_alice)

    image.digest = "sha256:" + "b" * 64  # the tag moved: a new build was published
    image.save()

    spec = _spec(instance)
    assert instance.image_ref == spec.image_ref == "127.0.0.1:5050/console/pytorch@sha256:" + "a" * 64
    assert spec.tenant == tenant_for(account_id=rich_alice.pk)


def test_the_machine_gets_the_catalogues_cpu_and_ram_for_its_cards(rich_alice):
    instance = launch(rich_alice, count=2)

    spec = _spec(instance)
    assert spec.cpus == 2 * instance.gpu_model.cpu_cores_per_card
    assert spec.memory_gb == 2 * instance.gpu_model.ram_gb_per_card
