"""The "Files" page of an instance: the owner's browser of its disk (the listing is a partial loaded by
htmx, read over SFTP from the stand-in sshd); a stranger gets 404; a stopped instance, a console whose
gateway is off and the simulated cloud each say why there are no files, never a 500."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from gateway.tests.test_gateway_pass_through import instance_sshd  # noqa: F401 (a fixture)
from instances.models import Instance

pytestmark = pytest.mark.django_db(transaction=True)


def _page(instance) -> str:
    return f"/instances/{instance.pk}/files/"


def test_the_owner_sees_the_folder_with_sizes_download_links_and_breadcrumb(world, instance_sshd, client_for):  # noqa: F811
    instance = world["instance"]
    (instance_sshd / "runs").mkdir()
    (instance_sshd / "runs" / "weights.bin").write_bytes(b"w" * 2048)
    os.utime(instance_sshd / "runs" / "weights.bin", (1_700_000_000, 1_700_000_000))
    (instance_sshd / "runs" / "logs").mkdir()
    client = client_for(world["alice"].user)

    page = client.get(_page(instance))
    assert page.status_code == 200
    body = page.content.decode()
    assert 'id="files-pick"' in body and 'id="files-new-folder"' in body
    assert f'data-api-content="/api/v1/instances/{instance.pk}/files/content/"' in body
    assert 'id="files-strings"' in body

    listing = client.get(_page(instance), {"partial": "listing", "path": "/runs/"})
    html = listing.content.decode()
    assert listing.status_code == 200
    assert 'data-path="/runs"' in html
    assert html.index("logs/") < html.index("weights.bin")  # folders first
    assert f"/api/v1/instances/{instance.pk}/files/content/?path=/runs/weights.bin" in html
    shown = timezone.localtime(datetime.fromtimestamp(1_700_000_000, tz=UTC)).strftime("%Y-%m-%d %H:%M")
    assert "2.0\xa0KB" in html and shown in html
    assert 'data-delete="/runs/weights.bin"' in html
    assert 'hx-get="?partial=listing&amp;path=/"' in html  # the breadcrumb goes back up


def test_the_listing_opens_the_home_folder_and_says_when_a_folder_is_missing(world, instance_sshd, client_for):  # noqa: F811
    client = client_for(world["alice"].user)
    home = client.get(_page(world["instance"]), {"partial": "listing"}).content.decode()
    assert 'data-path="/"' in home and "This folder is empty" in home
    missing = client.get(_page(world["instance"]), {"partial": "listing", "path": "/nowhere"})
    assert missing.status_code == 200 and "No such file or folder." in missing.content.decode()


def test_a_stranger_gets_404_and_a_visitor_is_sent_to_sign_in(world, client, client_for):
    instance = world["instance"]
    charlie = client_for(world["charlie"].user)
    assert charlie.get(_page(instance)).status_code == 404
    assert charlie.get(_page(instance), {"partial": "listing", "path": "/"}).status_code == 404
    anonymous = client.get(_page(instance))
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_a_stopped_instance_says_it_must_run(world, client_for):
    instance = world["instance"]
    Instance.objects.filter(pk=instance.pk).update(status=Instance.Status.STOPPED)
    client = client_for(world["alice"].user)
    body = client.get(_page(instance)).content.decode()
    assert "Files can be browsed while the instance runs; it is stopped now." in body
    assert 'id="files-pick"' not in body
    listing = client.get(_page(instance), {"partial": "listing", "path": "/"})
    assert listing.status_code == 200 and "it is stopped now" in listing.content.decode()


def test_a_console_without_its_gateway_says_so_in_the_page_and_the_api(world, client_for, settings):
    settings.GATEWAY_ENABLED = False
    instance, client = world["instance"], client_for(world["alice"].user)
    body = client.get(_page(instance)).content.decode()
    assert "SSH gateway, which is turned off on this console" in body and 'id="files-pick"' not in body
    refused = client.get(f"/api/v1/instances/{instance.pk}/files/", {"path": "/"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "unavailable"


def test_the_simulated_cloud_explains_it_has_no_files(world, client_for):
    listing = client_for(world["alice"].user).get(_page(world["instance"]), {"partial": "listing", "path": "/"})
    assert listing.status_code == 200
    assert "The simulated cloud has no files: this needs a real machine." in listing.content.decode()


def test_the_instance_page_links_to_its_files(world, client_for):
    instance = world["instance"]
    body = client_for(world["alice"].user).get(f"/instances/{instance.pk}/").content.decode()
    assert 'id="files-panel"' in body and f'href="{_page(instance)}"' in body


def test_a_file_too_large_for_the_browser_gets_no_download_link(world, instance_sshd, client_for, monkeypatch):  # noqa: F811
    monkeypatch.setattr("gateway.views.MAX_DOWNLOAD", 1000)
    (instance_sshd / "big.bin").write_bytes(b"b" * 1001)
    (instance_sshd / "small.txt").write_bytes(b"s" * 10)
    html = client_for(world["alice"].user).get(_page(world["instance"]), {"partial": "listing", "path": "/"})
    html = html.content.decode()
    assert "files/content/?path=/small.txt" in html and "files/content/?path=/big.bin" not in html
    assert "use scp or sftp through the SSH gateway" in html


def test_the_page_itself_asks_no_provider(world, client_for, monkeypatch):
    """Only the listing partial logs in to the machine; the page renders from the database alone."""
    from providers.simulated.backend import SimulatedBackend

    def refuse(self, **kwargs):
        raise AssertionError("the files page asked the provider")

    monkeypatch.setattr(SimulatedBackend, "ssh_target", refuse)
    page = client_for(world["alice"].user).get(_page(world["instance"]))
    assert page.status_code == 200 and 'hx-trigger="load"' in page.content.decode()
