"""The schema is the truth: schemathesis fuzzes every API operation and checks every answer against it.

All of schemathesis's checks run (its default: every built-in check enabled): no 5xx, status codes,
content types, headers and bodies that the schema documents, requests the schema forbids refused and
requests it allows accepted. The console is called as a WSGI app in this process, so the fuzzer sees
the test's database (alice, funded, with the catalogue seeded) without a server thread; the answers are
the ones a live server gives, through the same middleware and URLconf.

Examples are bounded so the test stays within about two minutes on two cores.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from accounts.services import api_token_create
from instances.models import GpuModel
from instances.quota import quota_request_create
from instances.tests.conftest import backends, fund

EXAMPLES = 15

# Operations whose valid input depends on rows or content the schema cannot state. For these, and only
# when the 400 names nothing but the fields listed, the "schema-valid data is accepted" check is waived;
# every other check still runs on those answers.
_ROWS = "slugs and ids must name existing rows (the catalogue, your keys, volumes and instances)"
_SECRET = (
    "a name not reserved for the machine's own settings (PATH, LD_*, CONSOLE_*…); a value of at most "
    "VAULT_VALUE_MAX_BYTES bytes as UTF-8 (the schema counts characters), without NUL"
)
_LOGIN = (
    "a registry's host name with an optional port; a user name without a colon; a password of at most 8192 "
    "bytes as UTF-8 (the schema counts characters), without NUL"
)
STATE_DEPENDENT: dict[str, tuple[set[str], str]] = {
    "POST /api/v1/instances/": (
        {"region", "gpu_model", "image", "ssh_keys", "volumes", "disk_gb", "secrets"},
        _ROWS + " (and the names of your secrets); disk_gb's bounds depend on the image and settings",
    ),
    "POST /api/v1/deployments/": ({"app", "model", "region", "gpu_model", "volume", "volumes", "parameters"}, _ROWS),
    "POST /api/v1/deployments/{id}/redeploy/": ({"model", "parameters"}, _ROWS),
    "POST /api/v1/quota/requests/": ({"gpu_model"}, _ROWS),
    "POST /api/v1/volumes/": ({"region", "size_gb"}, _ROWS + "; size_gb's bounds are settings"),
    "POST /api/v1/volumes/{id}/attachments/": (
        {"instance", "mount_path"},
        _ROWS + "; mount_path must be an absolute path outside the system's own",
    ),
    "POST /api/v1/account/ssh-keys/": ({"public_key"}, "the key must parse as an OpenSSH public key"),
    "POST /api/v1/billing/orders/": ({"amount", "amount_fen"}, "exactly one of amount and amount_fen, in range"),
    "POST /api/v1/staff/quota/requests/{id}/approve/": (
        {"cards", "reserve_region", "reserve_ends_at"},
        "at most the cards the request asked for; a reservation within the grant's window, in a region's cards",
    ),
    "POST /api/v1/staff/reservations/": (
        {"account", "region", "gpu_model", "cards", "ends_at"},
        _ROWS + "; an account that exists, a window ahead, no more cards than the region has in service",
    ),
    "POST /api/v1/notifications/read/": ({"ids"}, "ids, or all: true"),
    "POST /api/v1/notifications/webhooks/": (
        {"url"},
        "https (http only to localhost outside production), no credentials",
    ),
    "PATCH /api/v1/notifications/webhooks/{id}/": ({"url"}, "https (http only to localhost outside production)"),
    "POST /api/v1/secrets/": ({"name", "value"}, _SECRET),
    "PUT /api/v1/secrets/{name}/": ({"value"}, _SECRET),
    "PUT /api/v1/instances/{id}/secrets/": ({"secrets"}, _ROWS + " (the names of your secrets)"),
    "POST /api/v1/instances/{id}/clone/": ({"snapshot"}, _ROWS + " (snapshot: a ready snapshot of this instance)"),
    "POST /api/v1/images/import/": (
        {"reference", "name", "tag", "note"},
        "an image reference on a registry the operator allows; a name and tag as a saved image's",
    ),
    "POST /api/v1/images/build/": (
        {"recipe", "name", "tag", "note"},
        "a recipe that starts FROM an image of the console's registry you may use, with no instruction the builder "
        "refuses; a name and tag as a saved image's",
    ),
    "POST /api/v1/registry-credentials/": ({"host", "username", "password"}, _LOGIN),
    "PUT /api/v1/registry-credentials/{id}/": ({"username", "password"}, _LOGIN),
}

# Staff operations are fuzzed as staff (a user gets their 403 before any input is read, which would
# leave the bodies untested; instances/tests/test_quota_staff_api.py checks the 403s).
STAFF_PREFIX = " /api/v1/staff/"

# Operations left out, each with its reason. (Everything else is fuzzed.)
# None is skipped today. Outside the schema, so not fuzzed: the deployment readiness check
# (/api/v1/deployments/<id>/readiness/), a plain Django view that the deployment's own key authorises
# (apps_marketplace/tests cover it), and the schema and docs pages themselves.
SKIPPED: dict[str, str] = {}


def _labels() -> list[str]:
    """Every operation of the schema, as "METHOD /path", so each is its own test."""
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    methods = ("get", "put", "post", "patch", "delete")
    return sorted(f"{m.upper()} {path}" for path, ops in paths.items() for m in ops if m in methods)


@pytest.fixture
def api_schema(db, settings, alice, staff):
    from console.wsgi import application
    from instances.catalogue import catalogue_seed

    settings.PROVISIONING_BACKENDS = backends()
    # The fuzzer sends hundreds of requests in seconds: throttling would answer 429 to most of them
    # (429 is documented; test_throttling checks it).
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": []}
    catalogue_seed()
    fund(alice, 1_000_000)
    _token, secret = api_token_create(user=alice, name="fuzzer", expires_at=None)
    _token, staff_secret = api_token_create(user=staff, name="fuzzer", expires_at=None)
    # Rows for the staff operations to find: a waiting quota request of alice's.
    quota_request_create(
        user=alice, gpu_model=GpuModel.objects.get(slug="a800-80g"), cards=64, duration_days=30, reason="fuzz"
    )
    # As Django's test client does: a request must not close the test's connection (and its transaction).
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
        yield schema, {"Authorization": f"Bearer {secret}"}, {"Authorization": f"Bearer {staff_secret}"}
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


# schemathesis's own pytest plugin does not run under pytest 9 (it reads a private attribute of the
# test item), so each operation is a parametrized test that draws its cases with Hypothesis directly.
@pytest.mark.parametrize(
    "label",
    [
        pytest.param(label, marks=pytest.mark.skip(reason=SKIPPED[label])) if label in SKIPPED else label
        for label in _labels()
    ],
)
def test_the_operation_keeps_to_the_schema(api_schema, label):
    """Every answer to EXAMPLES generated requests (valid and invalid) passes every check."""
    schema, headers, staff_headers = api_schema
    if STAFF_PREFIX in label:
        headers = staff_headers
    operation = schema.find_operation_by_label(label)
    assert operation is not None, label

    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case):
        response = case.call(headers=headers)
        known = STATE_DEPENDENT.get(label, (set(), ""))[0]
        if response.status_code == 400 and set(response.json()["error"].get("fields", {})) <= known:
            # A well-formed value that names no row (or no valid key): refused as the schema says, 400.
            case.validate_response(response, headers=headers, excluded_checks=[positive_data_acceptance])
        else:
            case.validate_response(response, headers=headers)

    run()
