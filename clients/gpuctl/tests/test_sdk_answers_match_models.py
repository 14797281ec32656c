"""The SDK's typed models against a live console: about fifty operations, across instances, ports and
shares, deployments, volumes and their files, billing, quota, the account, notifications and teams, are
called through the SDK and every answer is checked against its ``TypedDict``: required keys present,
no null where the schema says none, enum values among the schema's, no undocumented key. A server
that drifts from its schema fails here, as a client generated from the schema would break."""

from __future__ import annotations

import inspect
import types
import typing

import pytest
from gpuctl import ApiError, Client, models

pytestmark = pytest.mark.django_db(transaction=True)


def check(value, hint, where, problems):
    origin = typing.get_origin(hint)
    if origin is typing.NotRequired:
        return check(value, typing.get_args(hint)[0], where, problems)
    if hint is typing.Any:
        return
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None:
            if type(None) not in args:
                problems.append(f"{where}: null, schema says {hint}")
            return
        for a in args:
            if a is type(None):
                continue
            sub = []
            check(value, a, where, sub)
            if not sub:
                return
        problems.append(f"{where}: {value!r:.60} not {hint}")
        return
    if value is None:
        problems.append(f"{where}: null, schema says {hint}")
        return
    if origin is typing.Literal:
        if value not in typing.get_args(hint):
            problems.append(f"{where}: {value!r} not in {typing.get_args(hint)}")
        return
    if origin is list:
        if not isinstance(value, list):
            problems.append(f"{where}: not a list")
            return
        for i, v in enumerate(value[:3]):
            check(v, typing.get_args(hint)[0], f"{where}[{i}]", problems)
        return
    if origin is dict:
        if not isinstance(value, dict):
            problems.append(f"{where}: not a dict")
        return
    if origin is typing.NotRequired:
        check(value, typing.get_args(hint)[0], where, problems)
        return
    if isinstance(hint, type) and typing.is_typeddict(hint):
        if not isinstance(value, dict):
            problems.append(f"{where}: {type(value).__name__} not {hint.__name__}")
            return
        hints = typing.get_type_hints(hint, include_extras=True)
        for key, h in hints.items():
            required = key in hint.__required_keys__
            if key not in value:
                if required:
                    problems.append(f"{where}.{key}: missing")
                continue
            check(value[key], h, f"{where}.{key}", problems)
        for key in value:
            if key not in hints:
                problems.append(f"{where}.{key}: undocumented")
        return
    if hint is float and isinstance(value, (int, float)):
        return
    if isinstance(hint, type) and not isinstance(value, hint):
        problems.append(f"{where}: {value!r:.40} not {hint.__name__}")


def test_the_answers_of_the_console_are_what_the_typed_models_say(console, settings, tmp_path):
    from instances.tests.conftest import backends

    settings.PROVISIONING_BACKENDS = backends(VOLUMES_DIR=str(tmp_path / "v"))
    sdk = Client(console["url"], console["token"])
    problems = []
    called = set()

    def call(name, *args, **kw):
        called.add(name)
        f = getattr(sdk, name)
        ret = inspect.signature(f).return_annotation
        namespace = {"m": models, "Iterator": list, "Any": typing.Any}
        hint = eval(ret, namespace)  # noqa: S307 - the SDK's own return annotation, e.g. "Iterator[m.Instance]"
        try:
            value = f(*args, **kw)
            if ret.startswith("Iterator"):
                value = list(value)
        except ApiError as e:
            problems.append(f"{name}: refused {e!r}")
            return None
        check(value, hint, name, problems)
        return value

    instance = call(
        "instances_create",
        {"region": "cn-north-1", "gpu_model": "a800-80g", "gpu_count": 1, "image": "pytorch-2.5-cu124", "name": "t"},
    )
    call("instances_list")
    call("instances_get", instance["id"])
    call("instances_events_list", instance["id"])
    call("instances_metrics_get", instance["id"])
    call("instances_ports_list", instance["id"])
    port = call("instances_ports_create", instance["id"], {"port": 8000, "label": "web"})
    call("instances_ports_shares_create", instance["id"], port["id"], {})
    call("instances_rename", instance["id"], {"name": "u"})
    call("instances_auto_stop", instance["id"], {"idle_minutes": 30})
    call("catalogue_get")
    call("apps_list")
    call("apps_get", "llama-3-instruct-chat")
    call("apps_fit_get", "llama-3-instruct-chat")
    call("models_list")
    call("datasets_list")
    deployment = call(
        "deployments_create",
        {"app": "llama-3-instruct-chat", "gpu_model": "a800-80g", "region": "cn-north-1", "gpu_count": 1},
    )
    call("deployments_list")
    call("deployments_get", deployment["id"])
    call("deployments_regenerate_key", deployment["id"])
    volume = call("volumes_create", {"name": "x", "region": "cn-north-1", "size_gb": 1})
    call("volumes_list")
    call("volumes_get", volume["id"])
    call("volumes_attachments_list", volume["id"])
    call("volumes_files_list", volume["id"], path="/")
    call("billing_balance_get")
    call("billing_transactions_list")
    call("billing_orders_list")
    call("billing_statements_list")
    call("billing_statements_get", "2026-12")
    call("quota_list")
    call("quota_requests_list")
    call("reservations_list")
    call("quota_requests_create", {"gpu_model": "h800", "cards": 16, "duration_days": 30, "reason": "x"})
    call("account_profile_get")
    call("account_tokens_list")
    call("account_ssh_keys_list")
    call("account_security_events_list")
    call("account_tokens_create", {"name": "x"})
    call("notifications_list")
    call("notifications_preferences_get")
    call("notifications_webhooks_list")
    webhook = call("notifications_webhooks_create", {"url": "https://example.com/hook"})
    team = call("teams_create", {"name": "Lab", "slug": "lab"})
    call("teams_list")
    for operation in (
        "teams_get",
        "teams_members_list",
        "teams_wallet_get",
        "teams_audit_list",
        "teams_invitations_list",
    ):
        call(operation, team["slug"])
    call("notifications_webhooks_get", webhook["id"])
    call("notifications_webhooks_deliveries_list", webhook["id"])
    call("notifications_read_many", {"all": True})
    assert len(called) >= 45
    assert problems == []
