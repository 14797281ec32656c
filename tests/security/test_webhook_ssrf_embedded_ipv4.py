"""The webhook SSRF guard decodes the IPv4 address an IPv6 address carries (NAT64, 6to4, IPv4-compatible,
IPv4-mapped and IPv4-translated forms) and judges that: each of them reaches the IPv4 host it names
through a translator or a dual stack, so a private IPv4 inside must be refused like the IPv4 itself."""

from __future__ import annotations

import pytest

from notifications.webhooks import WebhookRefused, resolve

EMBEDDING_A_PRIVATE_IPV4 = [
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254, the cloud's metadata service
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "::a00:1",  # IPv4-compatible 10.0.0.1
    "::127.0.0.1",  # IPv4-compatible loopback
    "::169.254.169.254",  # IPv4-compatible link-local
    "::ffff:192.168.1.1",  # IPv4-mapped
    "::ffff:0:a00:1",  # IPv4-translated (SIIT) 10.0.0.1
]


@pytest.mark.parametrize("address", EMBEDDING_A_PRIVATE_IPV4)
def test_an_ipv6_address_embedding_a_private_ipv4_is_refused(address, settings):
    settings.NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(WebhookRefused):
        resolve(address, 443)


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "::ffff:8.8.8.8", "2606:4700:4700::1111"])
def test_an_ipv6_address_of_a_public_host_is_still_allowed(address, settings):
    settings.NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE = False
    assert resolve(address, 443) == address
