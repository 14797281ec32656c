"""User content's own origins (``core.user_content``): one host per instance, recognised from the
request's host, and links that reach it through the sign-in hand-off only when it has a domain."""

from __future__ import annotations

import uuid

from core.user_content import content_host, content_label, label_of_host, path_matches_label, proxy_link

INSTANCE = uuid.UUID("6f1c2a9b-03de-4a5b-9c7d-0e1f2a3b4c5d")


def test_an_instance_s_host_names_it_and_nothing_else(settings):
    settings.CONSOLE_PROXY_HOST = "gpu-user.example:8443"
    label = content_label(INSTANCE)
    assert label == "6f1c2a9b03de4a5b" and content_host(INSTANCE) == f"{label}.gpu-user.example:8443"
    assert label_of_host(f"{label.upper()}.GPU-User.example:8443") == label  # case and port ignored
    assert label_of_host("gpu-user.example") == ""  # the bare domain: no instance's
    assert label_of_host(f"x.{label}.gpu-user.example") == ""  # deeper than one label: ours, no instance's
    assert label_of_host("console.example") is None  # not the user-content domain at all
    assert path_matches_label(f"/i/{INSTANCE}/lab/", label)
    assert not path_matches_label(f"/i/{uuid.uuid4()}/lab/", label)
    assert not path_matches_label("/i/not-an-id/lab/", label)


def test_links_go_through_the_hand_off_only_with_a_content_domain(settings):
    settings.CONSOLE_PROXY_HOST = ""
    assert proxy_link(f"/i/{INSTANCE}/lab/") == f"/i/{INSTANCE}/lab/"
    settings.CONSOLE_PROXY_HOST = "gpu-user.example"
    link = proxy_link(f"/i/{INSTANCE}/lab/")
    assert link.startswith(settings.CONSOLE_PROXY_HANDOFF_PATH + "?next=/i/")
