"""How often one user may send a test event to their webhook endpoints.

Each test event is a delivery a worker runs, against a URL the user chose: without a limit of its own,
one user pressing "Send test" in a loop (or a script on the API) fills the webhook queue, and only the
global API throttle, sized for browsing, would slow them. The page and the API share this limit.
"""

from __future__ import annotations

from rest_framework.throttling import UserRateThrottle


class WebhookTestThrottle(UserRateThrottle):
    """Per user (per address for the anonymous, who never get this far); the rate is
    ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["webhook_test"]``."""

    scope = "webhook_test"
