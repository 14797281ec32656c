"""Who may do what: one table, checked over every API route, the pages that name an object, the proxy,
the SSH gateway and the files API (issue #24).

Read ``POLICY`` as a grid. Its columns are the principals (``PRINCIPALS``): alice's session (acting on
her personal account), her full API token, her read-only token, her token scoped to team A, a former
member of team A (removed, his session still naming the team) and his team-A token, and a session of
each role in team A. Its rows are a kind of resource and an action (``read``: GET; ``write``: anything
else), and each row has a line per context the object lives in: alice's personal account, team A
(made by alice, so a colleague's for the member) and team B (charlie's, where none of them is). A cell
says what the answer must be:

- ``ok``: allowed: the request gets past every access check (not 401, 403 nor 404; a request without
  a body or a path may still be a 400, a machine that is not running a 409, and so on);
- ``404``: not found, as a URL naming nothing: the object is in no context this credential acts in;
- ``403``: refused by role or scope, the same answer for any object, a missing one included;
- ``ro``: 403 ``read_only_token``, refused centrally before any view, for any object;
- ``401``: the credential no longer authenticates (a former member's team token);
- ``log``: a page redirects to log in (API tokens work on the API only).

``ROUTES`` names the kind of every API route and page with an object in its URL; the test fails on a
route missing from it, so a new route needs its row. Whatever the cell says, an object of team B's is
never shown (no answer contains ``STRANGER_MARK``) and never answers other than a missing object does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.db import transaction
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from apps_marketplace.loaders import marketplace_catalogue_load
from instances.catalogue import catalogue_seed
from instances.tests.conftest import backends
from tests.security.access_world import STRANGER_MARK, world_build

PRINCIPALS = (
    "session",
    "token",
    "read_token",
    "team_token",
    "former",
    "former_token",
    "owner",
    "admin",
    "member",
    "billing",
)
CONTEXTS = ("personal", "team_a", "team_b")


@dataclass(frozen=True)
class Route:
    kind: str
    objects: dict  # URL keyword -> the kind of object it names (its pk, or a team's slug)
    method: str = ""  # pages: the method that does what the page is for
    contextless: bool = False  # the same answer whoever's object the URL names (staff routes)


# Every API route, by name: the kind of resource it reaches and what its URL names.
INST, VOL, DEP = {"pk": "instance"}, {"pk": "volume"}, {"pk": "deployment"}
API_ROUTES: dict[str, Route] = {
    # Credentials and settings of the person
    "api-account-profile": Route("person", {}),
    "api-account-rate-limit": Route("person", {}),
    "api-account-ssh-key-list": Route("person", {}),
    "api-account-ssh-key-detail": Route("ssh_key", {"pk": "ssh_key"}),
    "api-account-token-list": Route("person", {}),
    "api-account-token-detail": Route("token", {"pk": "token"}),
    "api-account-security-event-list": Route("person", {}),
    "api-notification-preferences": Route("person", {}),
    "api-notification-webhook-list": Route("person", {}),
    "api-notification-webhook-detail": Route("webhook", {"pk": "webhook"}),
    "api-notification-webhook-deliveries": Route("webhook", {"pk": "webhook"}),
    "api-notification-webhook-test": Route("webhook", {"pk": "webhook"}),
    "api-notification-list": Route("person", {}),
    "api-notification-read-all": Route("person", {}),
    "api-notification-detail": Route("notification", {"pk": "notification"}),
    "api-notification-read": Route("notification", {"pk": "notification"}),
    "api-device-start": Route("device_login", {}),
    "api-device-token": Route("device_login", {}),
    # Money
    "api_billing_balance": Route("wallet", {}),
    "api_billing_transactions": Route("wallet", {}),
    "api_billing_orders": Route("wallet", {}),
    "api_billing_order": Route("order", {"pk": "order"}),
    "api_billing_statements": Route("wallet", {}),
    "api_billing_statement": Route("wallet", {"month": "month"}),
    # The catalogue, the same for everyone
    "api-catalogue": Route("public", {}),
    "api-apps-list": Route("public", {}),
    "api-apps-detail": Route("public", {"slug": "app"}),
    "api-apps-fit": Route("public", {"slug": "app"}),
    "api-models-list": Route("public", {}),
    "api-models-detail": Route("public", {"pk": "model"}),
    "api-datasets-list": Route("public", {}),
    "api-datasets-detail": Route("public", {"pk": "dataset"}),
    # Instances and what hangs on them
    "api-instance-list": Route("resources", {}),
    "api-instance-detail": Route("instance", INST),
    "api-instance-auto-stop": Route("instance", INST),
    "api-instance-events": Route("instance", INST),
    "api-instance-runs": Route("instance", INST),
    "api-instance-keep-running": Route("instance", INST),
    "api-instance-leave-queue": Route("instance", INST),
    "api-instance-release": Route("instance", INST),
    "api-instance-rename": Route("instance", INST),
    "api-instance-save-image": Route("instance", INST),
    "api-instance-snapshots": Route("instance", INST),
    "api-instance-snapshot-schedule": Route("instance", INST),
    "api-instance-clone": Route("instance", INST),
    "api-instance-secrets": Route("instance", INST),
    "api-instance-resize": Route("instance", INST),
    "api-instance-restart": Route("instance", INST),
    "api-instance-start": Route("instance", INST),
    "api-instance-stop": Route("instance", INST),
    "api-instance-metrics": Route("instance_parts", INST),
    "api-instance-files": Route("instance_files", {"instance_id": "instance"}),
    "api-instance-file-stat": Route("instance_files", {"instance_id": "instance"}),
    "api-instance-folder": Route("instance_files", {"instance_id": "instance"}),
    "api-instance-file-content": Route("instance_files", {"instance_id": "instance"}),
    "api-instance-ports": Route("instance_parts", {"instance_id": "instance"}),
    "api-instance-port": Route("instance_parts", {"instance_id": "instance", "port_id": "port"}),
    "api-instance-port-shares": Route("instance_parts", {"instance_id": "instance", "port_id": "port"}),
    "api-instance-port-share-revoke": Route(
        "instance_parts", {"instance_id": "instance", "port_id": "port", "share_id": "share"}
    ),
    # Images saved from instances (an unshared one of a team's: its saver and the admins only)
    "api-image-list": Route("resources", {}),
    "api-image-detail": Route("saved_image", {"pk": "saved_image"}),
    "api-image-rename": Route("saved_image", {"pk": "saved_image"}),
    "api-image-share": Route("saved_image", {"pk": "saved_image"}),
    "api-image-recipe": Route("saved_image", {"pk": "saved_image"}),
    "api-image-build-log": Route("saved_image", {"pk": "saved_image"}),
    # Snapshots of an instance's disk: as their instance (a member sees a colleague's, operates none)
    "api-snapshot-detail": Route("snapshot", {"pk": "snapshot"}),
    "api-snapshot-restore": Route("snapshot", {"pk": "snapshot"}),
    "api-image-import": Route("resources", {}),
    "api-image-build": Route("resources", {}),
    # Volumes
    "api-volume-list": Route("resources", {}),
    "api-volume-detail": Route("volume", VOL),
    "api-volume-attachments": Route("volume_attach", VOL),
    "api-volume-detach": Route("volume", {"pk": "volume", "attachment_id": "attachment"}),
    "api-volume-resize": Route("volume", VOL),
    "api-volume-files": Route("volume", {"volume_id": "volume"}),
    "api-volume-file-stat": Route("volume", {"volume_id": "volume"}),
    "api-volume-folder": Route("volume", {"volume_id": "volume"}),
    "api-volume-file-content": Route("volume", {"volume_id": "volume"}),
    # Secrets (names and dates: a value is never answered)
    "api-secret-list": Route("resources", {}),
    "api-secret-detail": Route("secret", {"name": "secret"}),
    "api-registry-credential-list": Route("resources", {}),
    "api-registry-credential-detail": Route("registry_credential", {"pk": "registry_credential"}),
    # Deployments
    "api-deployments-list": Route("resources", {}),
    "api-deployments-detail": Route("deployment", DEP),
    "api-deployments-redeploy": Route("deployment", DEP),
    "api-deployments-regenerate-key": Route("deployment", DEP),
    "api-deployments-restart": Route("deployment", DEP),
    "api-deployments-start": Route("deployment", DEP),
    "api-deployments-stop": Route("deployment", DEP),
    "deployment_readiness": Route("readiness", {"deployment_id": "deployment"}),
    # Quota and reserved capacity
    "api-quota": Route("quota", {}),
    "api-quota-request-list": Route("quota", {}),
    "api-quota-request-detail": Route("quota_request", {"pk": "quota_request"}),
    "api-reservation-list": Route("quota", {}),
    "api-reservation-detail": Route("reservation", {"pk": "reservation"}),
    "api-staff-quota-request-list": Route("staff", {}, contextless=True),
    "api-staff-quota-request-detail": Route("staff", {"pk": "quota_request"}, contextless=True),
    "api-staff-quota-request-approve": Route("staff", {"pk": "quota_request"}, contextless=True),
    "api-staff-quota-request-deny": Route("staff", {"pk": "quota_request"}, contextless=True),
    "api-staff-reservation-list": Route("staff", {}, contextless=True),
    "api-staff-reservation-detail": Route("staff", {"pk": "reservation"}, contextless=True),
    "api-staff-reservation-cancel": Route("staff", {"pk": "reservation"}, contextless=True),
    # Teams
    "api-team-list": Route("person", {}),
    "api-team-detail": Route("team", {"slug": "team"}),
    "api-team-members": Route("team", {"slug": "team"}),
    "api-team-member": Route("team_members", {"slug": "team", "pk": "member"}),
    "api-team-invitations": Route("team_members", {"slug": "team"}),
    "api-team-invitation-revoke": Route("team_members", {"slug": "team", "pk": "invitation"}),
    "api-team-audit": Route("team_audit", {"slug": "team"}),
    "api-team-wallet": Route("team_wallet", {"slug": "team"}),
    "api-team-wallet-transfers": Route("team_wallet", {"slug": "team"}),
}


# --- The table ----------------------------------------------------------------------------------------
#
# Columns, in order: session token read_token team_token former former_token owner admin member billing
# (``PRINCIPALS``). ``-`` is the one context of a route whose URL names no account's object: the acting
# context's own list, wallet or settings.
#
#                                session token  ro_tok team_tok former f_token owner  admin  member billing
POLICY: dict[str, dict[str, dict[str, str]]] = {
    # The person's own settings and credentials. A team's token reads them (who am I, which keys to launch
    # with) but changes nothing of its maker's; a former member keeps his own.
    "person": {
        "read": {"-": "ok     ok     ok     ok       ok     401     ok     ok     ok     ok"},
        "write": {"-": "ok     ok     ro     tt       ok     401     ok     ok     ok     ok"},
    },
    "ssh_key": {
        "read": {
            "personal": "ok     ok     ok     ok       404    401     ok     404    404    404",
            "team_b": "404    404    404    404      404    401     404    404    404    404",
        },
        "write": {
            "personal": "ok     ok     ro     tt       404    401     ok     404    404    404",
            "team_b": "404    404    ro     tt       404    401     404    404    404    404",
        },
    },
    # Device log-in: anyone may start one, with or without a credential; the code is the secret.
    "device_login": {"write": {"-": "ok     ok     ok     ok       ok     ok      ok     ok     ok     ok"}},
    # The catalogue: the same for everyone signed in.
    "public": {"read": {"-": "ok     ok     ok     ok       ok     401     ok     ok     ok     ok"}},
    # The acting account's wallet: its balance, transactions, statements, top-ups.
    "wallet": {
        "read": {"-": "ok     ok     ok     ok       ok     401     ok     ok     403    ok"},
        "write": {"-": "ok     ok     ro     ok       ok     401     ok     ok     403    403"},
    },
    "order": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    403    404",
            "team_a": "404    404    404    ok       404    401     ok     ok     403    ok",
            "team_b": "404    404    404    404      404    401     404    404    403    404",
        },
    },
    # Lists and creates of instances, volumes, deployments in the acting context.
    "resources": {
        "read": {"-": "ok     ok     ok     ok       ok     401     ok     ok     ok     403"},
        "write": {"-": "ok     ok     ro     ok       ok     401     ok     ok     ok     403"},
    },
    # An instance: a member sees a colleague's and operates none of it; a billing viewer sees none.
    "instance": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    404    403",
            "team_a": "404    404    404    ok       404    401     ok     ok     ok     403",
            "team_b": "404    404    404    404      404    401     404    404    404    403",
        },
        "write": {
            "personal": "ok     ok     ro     404      404    401     404    404    404    403",
            "team_a": "404    404    ro     ok       404    401     ok     ok     403    403",
            "team_b": "404    404    ro     404      404    401     404    404    404    403",
        },
    },
    # Its disk (the files API): reading it is operating it, as SSH is.
    "instance_files": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    404    404",
            "team_a": "404    404    404    ok       404    401     ok     ok     403    404",
            "team_b": "404    404    404    404      404    401     404    404    404    404",
        },
        "write": {
            "personal": "ok     ok     ro     404      404    401     404    404    404    404",
            "team_a": "404    404    ro     ok       404    401     ok     ok     403    404",
            "team_b": "404    404    ro     404      404    401     404    404    404    404",
        },
    },
    # Its GPU metrics, ports and share links.
    "instance_parts": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    404    404",
            "team_a": "404    404    404    ok       404    401     ok     ok     ok     404",
            "team_b": "404    404    404    404      404    401     404    404    404    404",
        },
        "write": {
            "personal": "ok     ok     ro     404      404    401     404    404    404    404",
            "team_a": "404    404    ro     ok       404    401     ok     ok     403    404",
            "team_b": "404    404    ro     404      404    401     404    404    404    404",
        },
    },
    # An image saved from an instance, not shared: in team A (saved by alice) a member sees none of it.
    "saved_image": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    404    403",
            "team_a": "404    404    404    ok       404    401     ok     ok     404    403",
            "team_b": "404    404    404    404      404    401     404    404    404    403",
        },
        "write": {
            "personal": "ok     ok     ro     404      404    401     404    404    404    403",
            "team_a": "404    404    ro     ok       404    401     ok     ok     404    403",
            "team_b": "404    404    ro     404      404    401     404    404    404    403",
        },
    },
    "volume": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    404    403",
            "team_a": "404    404    404    ok       404    401     ok     ok     ok     403",
            "team_b": "404    404    404    404      404    401     404    404    404    403",
        },
        "write": {
            "personal": "ok     ok     ro     404      404    401     404    404    404    403",
            "team_a": "404    404    ro     ok       404    401     ok     ok     403    403",
            "team_b": "404    404    ro     404      404    401     404    404    404    403",
        },
    },
    # Attaching a volume: a member attaches a colleague's (read-only: test_team_volume_viewers_attach_read_only).
    "volume_attach": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    404    403",
            "team_a": "404    404    404    ok       404    401     ok     ok     ok     403",
            "team_b": "404    404    404    404      404    401     404    404    404    403",
        },
        "write": {
            "personal": "ok     ok     ro     404      404    401     404    404    404    403",
            "team_a": "404    404    ro     ok       404    401     ok     ok     ok     403",
            "team_b": "404    404    ro     404      404    401     404    404    404    403",
        },
    },
    "deployment": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    404    403",
            "team_a": "404    404    404    ok       404    401     ok     ok     ok     403",
            "team_b": "404    404    404    404      404    401     404    404    404    403",
        },
        "write": {
            "personal": "ok     ok     ro     404      404    401     404    404    404    403",
            "team_a": "404    404    ro     ok       404    401     ok     ok     403    403",
            "team_b": "404    404    ro     404      404    401     404    404    404    403",
        },
    },
    # A deployment's readiness: for a person who sees it in any of their contexts (a session) or the
    # deployment's own key; API tokens are not read here.
    "readiness": {
        "read": {
            "personal": "ok     404    404    404      404    404     ok     404    404    404",
            "team_a": "ok     404    404    404      404    404     ok     ok     ok     404",
            "team_b": "404    404    404    404      404    404     404    404    404    404",
        },
        "write": {
            "personal": "ok     404    404    404      404    404     ok     404    404    404",
            "team_a": "ok     404    404    404      404    404     ok     ok     ok     404",
            "team_b": "404    404    404    404      404    404     404    404    404    404",
        },
    },
    # Quota, quota requests and reserved capacity: owners and admins in a team.
    "quota": {
        "read": {"-": "ok     ok     ok     ok       ok     401     ok     ok     403    403"},
        "write": {"-": "ok     ok     ro     ok       ok     401     ok     ok     403    403"},
    },
    "quota_request": {
        "read": {
            "personal": "ok     ok     ok     404      404    401     404    404    403    403",
            "team_a": "404    404    404    ok       404    401     ok     ok     403    403",
            "team_b": "404    404    404    404      404    401     404    404    403    403",
        },
    },
    "staff": {
        "read": {"-": "403    403    403    403      403    401     403    403    403    403"},
        "write": {"-": "403    403    ro     403      403    401     403    403    403    403"},
    },
    # Teams, by the slug in the URL: the person's membership decides (a team token: its own team only).
    "team": {
        "read": {
            "team_a": "ok     ok     ok     ok       404    401     ok     ok     ok     ok",
            "team_b": "404    404    404    404      404    401     404    404    404    404",
        },
    },
    "team_members": {
        "read": {
            "team_a": "ok     ok     ok     ok       404    401     ok     ok     403    403",
            "team_b": "404    404    404    404      404    401     404    404    404    404",
        },
        "write": {
            "team_a": "ok     ok     ro     ok       404    401     ok     ok     403    403",
            "team_b": "404    404    ro     404      404    401     404    404    404    404",
        },
    },
    "team_wallet": {
        "read": {
            "team_a": "ok     ok     ok     ok       404    401     ok     ok     403    ok",
            "team_b": "404    404    404    404      404    401     404    404    404    404",
        },
        "write": {
            "team_a": "ok     ok     ro     ok       404    401     ok     ok     403    403",
            "team_b": "404    404    ro     404      404    401     404    404    404    404",
        },
    },
}
POLICY["token"] = POLICY["webhook"] = POLICY["notification"] = POLICY["ssh_key"]  # the person's, alike
POLICY["reservation"] = POLICY["quota_request"]
POLICY["secret"] = POLICY["volume"]  # a member sees a colleague's names, changes only their own
POLICY["registry_credential"] = POLICY["secret"]  # a secret too: hosts and user names, as secrets' names
POLICY["team_audit"] = {"read": POLICY["team_members"]["read"]}
POLICY["snapshot"] = POLICY["instance"]  # a snapshot is its instance's: seen and operated alike


def expected(kind: str, action: str, context: str, principal: str) -> str:
    return POLICY[kind][action][context].split()[PRINCIPALS.index(principal)]


# Every page whose URL names an object, by name, with the method that does what it is for. Pages take
# the session only: a request with an API token is a visitor who is asked to log in.
IP, VP = {"pk": "instance"}, {"pk": "volume"}
PAGE_ROUTES: dict[str, Route] = {
    "account_ssh_key_delete": Route("ssh_key", {"key_id": "ssh_key"}, "POST"),
    "account_api_token_revoke": Route("ssh_key", {"token_id": "token"}, "POST"),
    "notification_open": Route("ssh_key", {"pk": "notification"}, "GET"),
    "notification_webhook_delete": Route("ssh_key", {"pk": "webhook"}, "POST"),
    "notification_webhook_toggle": Route("ssh_key", {"pk": "webhook"}, "POST"),
    "notification_webhook_test": Route("ssh_key", {"pk": "webhook"}, "POST"),
    "billing_order": Route("order", {"order_id": "order"}, "GET"),
    "billing_simulated_checkout": Route("order_pay", {"order_id": "order"}, "GET"),
    "budget_instance_cap": Route("instance", IP, "POST"),
    "instance_detail": Route("instance", IP, "GET"),
    "instance_rename": Route("instance", IP, "POST"),
    "instance_save_image": Route("instance", IP, "POST"),
    "instance_snapshot_create": Route("instance", IP, "POST"),
    "instance_snapshot_schedule": Route("instance", IP, "POST"),
    "instance_clone": Route("instance", IP, "POST"),
    "snapshot_change": Route("snapshot", {"slug": "snapshot", "action": "=delete"}, "POST"),
    "image_change": Route("saved_image", {"slug": "saved_image", "action": "=share"}, "POST"),
    "image_recipe": Route("saved_image", {"slug": "saved_image"}, "GET"),
    "image_build": Route("saved_image", {"slug": "saved_image"}, "POST"),
    "instance_auto_stop": Route("instance", IP, "POST"),
    "instance_resize": Route("instance", IP, "POST"),
    "instance_secrets": Route("instance", IP, "POST"),
    "instance_action": Route("instance", {"pk": "instance", "action": "stop"}, "POST"),
    "instance_files": Route("instance_files", IP, "GET"),
    "instance_ports": Route("instance_parts", IP, "GET"),
    "instance_port_add": Route("instance_parts", IP, "POST"),
    "instance_port_state": Route("instance_parts", {"pk": "instance", "port_id": "port"}, "GET"),
    "instance_port_remove": Route("instance_parts", {"pk": "instance", "port_id": "port"}, "POST"),
    "instance_port_share_add": Route("instance_parts", {"pk": "instance", "port_id": "port"}, "POST"),
    "instance_port_share_revoke": Route(
        "instance_parts", {"pk": "instance", "port_id": "port", "share_id": "share"}, "POST"
    ),
    "volume_detail": Route("volume", VP, "GET"),
    "volume_files": Route("volume", VP, "GET"),
    "volume_resize": Route("volume", VP, "POST"),
    "volume_delete": Route("volume", VP, "POST"),
    "volume_attach": Route("volume_attach", VP, "POST"),
    "volume_detach": Route("volume", {"pk": "volume", "attachment_id": "attachment"}, "POST"),
    "secret_replace": Route("secret", {"name": "secret"}, "POST"),
    "secret_delete": Route("secret", {"name": "secret"}, "POST"),
    "registry_credential_delete": Route("registry_credential", {"pk": "registry_credential"}, "POST"),
    "deployment_detail": Route("deployment", {"deployment_id": "deployment"}, "GET"),
    "deployment_action": Route("deployment", {"deployment_id": "deployment", "verb": "stop"}, "POST"),
    "team_detail": Route("team", {"slug": "team"}, "GET"),
    "team_audit": Route("team_members", {"slug": "team"}, "GET"),
    "team_wallet": Route("team_wallet", {"slug": "team"}, "GET"),
    "team_wallet_move": Route("team_wallet", {"slug": "team"}, "POST"),
    "team_rename": Route("team_members", {"slug": "team"}, "POST"),
    "team_invite": Route("team_members", {"slug": "team"}, "POST"),
    "team_invitation_revoke": Route("team_members", {"slug": "team", "invitation_id": "invitation"}, "POST"),
    "team_member_role": Route("team_members", {"slug": "team", "member_id": "member"}, "POST"),
    "team_member_limits": Route("team_members", {"slug": "team", "member_id": "member"}, "POST"),
    "team_member_remove": Route("team_members", {"slug": "team", "member_id": "member"}, "POST"),
    "team_delete": Route("team_delete", {"slug": "team"}, "POST"),
    "team_leave": Route("team", {"slug": "team"}, "POST"),
}
# Pages whose URL names something, but no account's object: what they are, instead of a row.
PAGES_OUTSIDE_THE_TABLE = {
    "account_confirm_email": "a secret key from an e-mail (allauth)",
    "account_reset_password_from_key": "a secret key from an e-mail (allauth)",
    "team_invitation": "a secret invitation token (teams/tests/test_invitations.py)",
    "invoice_pdf": "an issued invoice: the acting account's billing view (invoices/tests)",
    "billing_statement": "a month of the acting account's statement (the wallet's row)",
    "billing_statement_csv": "a month of the acting account's statement (the wallet's row)",
    "billing_statement_breakdown_csv": "a month of the acting account's statement (the wallet's row)",
    "billing_webhook": "a payment gateway's notification, signed by the gateway",
    "apps_detail": "the public catalogue",
    "apps_deploy": "the public catalogue: the deployment is made in the acting context",
    "quota_decide": "staff only",
    "mfa_edit_webauthn": "the signed-in person's own passkeys: allauth looks them up among request.user's "
    "(test_two_factor_sign_in.py: another person's passkey is a 404)",
    "mfa_remove_webauthn": "the signed-in person's own passkeys (as above)",
    "privacy_document": "the public terms of service and privacy policy",
    "privacy_export_download": "the signed-in person's own data export, never a team's: looked up among "
    "request.user's (privacy/tests/test_data_export.py: another person's is a 404)",
}


def page_routes() -> list[tuple[str, str]]:
    """``(name, pattern)`` of every page whose URL names something."""
    found = {}
    for text, pattern in _walk(get_resolver()):
        if text.startswith(("api/", "admin/", "staff/", "dev/", "i18n/")) or "<" not in text:
            continue
        found[pattern.name] = text
    return sorted(found.items())


def test_every_page_naming_an_object_has_a_row_in_the_table():
    names = {name for name, _text in page_routes()}
    missing = sorted(names - set(PAGE_ROUTES) - set(PAGES_OUTSIDE_THE_TABLE))
    assert missing == [], f"pages without a row in the table of who may do what: {missing}"
    assert sorted((set(PAGE_ROUTES) | set(PAGES_OUTSIDE_THE_TABLE)) - names) == []


# Pages, as the API's rows, where they differ: a page answers a role that sees nothing with a 404 (the
# API with a 403 naming the role), and API tokens are not credentials there (``log``).
#                                session token  ro_tok team_tok former f_token owner  admin  member billing
_MINE = {
    "personal": "ok     log    log    log      404    log     404    404    404    404",
    "team_a": "404    log    log    log      404    log     ok     ok     ok     404",
    "team_b": "404    log    log    log      404    log     404    404    404    404",
}
_OPERATE = {**_MINE, "team_a": "404    log    log    log      404    log     ok     ok     403    404"}
_TEAM = {
    "team_a": "ok     log    log    log      404    log     ok     ok     ok     ok",
    "team_b": "404    log    log    log      404    log     404    404    404    404",
}
_TEAM_ADMIN = {**_TEAM, "team_a": "ok     log    log    log      404    log     ok     ok     403    403"}
PAGE_POLICY: dict[str, dict[str, dict[str, str]]] = {
    "ssh_key": {
        action: {
            "personal": "ok     log    log    log      404    log     ok     404    404    404",
            "team_b": "404    log    log    log      404    log     404    404    404    404",
        }
        for action in ("read", "write")
    },
    "order": {
        "read": {
            "personal": "ok     log    log    log      404    log     404    404    403    404",
            "team_a": "404    log    log    log      404    log     ok     ok     403    ok",
            "team_b": "404    log    log    log      404    log     404    404    403    404",
        },
    },
    "order_pay": {
        "read": {
            "personal": "ok     log    log    log      404    log     404    404    403    403",
            "team_a": "404    log    log    log      404    log     ok     ok     403    403",
            "team_b": "404    log    log    log      404    log     404    404    403    403",
        },
    },
    "instance": {"read": _MINE, "write": _OPERATE},
    # An unshared image of team A's (saved by alice): a member does not see it.
    "saved_image": {
        "read": {**_MINE, "team_a": "404    log    log    log      404    log     ok     ok     404    404"},
        "write": {**_MINE, "team_a": "404    log    log    log      404    log     ok     ok     404    404"},
    },
    "instance_files": {"read": _OPERATE},
    "snapshot": {"write": _OPERATE},
    "instance_parts": {"read": _MINE, "write": _OPERATE},
    "volume": {"read": _MINE, "write": _OPERATE},
    "volume_attach": {"write": _MINE},
    "secret": {"write": _OPERATE},
    "registry_credential": {"write": _OPERATE},
    "deployment": {"read": _MINE, "write": _OPERATE},
    "team": {"read": _TEAM, "write": _TEAM},  # seeing it, and leaving it
    "team_members": {"read": _TEAM_ADMIN, "write": _TEAM_ADMIN},
    "team_wallet": {
        "read": {**_TEAM, "team_a": "ok     log    log    log      404    log     ok     ok     403    ok"},
        "write": _TEAM_ADMIN,
    },
    "team_delete": {
        "write": {**_TEAM, "team_a": "ok     log    log    log      404    log     ok     403    403    403"}
    },
}
PAGE_BODIES = {
    "team_member_role": {"role": "admin"},
    "team_rename": {"name": "Lab two"},
    "team_invite": {"email": "newcomer@example.com", "role": "member"},
    "team_wallet_move": {"direction": "in", "amount_fen": 100},
    "secret_replace": {"value": "replaced"},
}


def _walk(resolver, prefix=""):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry


def _methods(pattern: URLPattern) -> list[str]:
    callback = pattern.callback
    actions = getattr(callback, "actions", None)
    view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if actions:
        allowed = view.http_method_names  # a router's route may name a method its viewset refuses
        return sorted(m.upper() for m in actions if m in allowed)
    if view is None:
        return ["GET", "POST"]  # a plain function answers any method
    return sorted(m.upper() for m in view.http_method_names if m not in ("options", "head") and hasattr(view, m))


def api_operations() -> list[tuple[str, str, str]]:
    """``(route name, method, pattern)`` of every API operation the URL resolver knows."""
    found = {}
    for text, pattern in _walk(get_resolver()):
        if not text.startswith("api/v1/") or "format" in text:
            continue
        for method in _methods(pattern):
            found[(pattern.name, method)] = text
    return sorted((name, method, text) for (name, method), text in found.items())


def test_every_api_route_has_a_row_in_the_table():
    missing = sorted({name for name, _method, _text in api_operations() if name not in API_ROUTES})
    assert missing == [], f"API routes without a row in the table of who may do what: {missing}"
    stale = sorted(set(API_ROUTES) - {name for name, _m, _t in api_operations()})
    assert stale == [], f"rows for routes that no longer exist: {stale}"


# --- The world, once per module --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Built once in a transaction that the module's end rolls back; each test runs in a savepoint of it."""
    settings = override_settings(PROVISIONING_BACKENDS=backends(), INSTANCES_REDRIVE_AFTER_S=0)
    settings.enable()
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            catalogue_seed()
            marketplace_catalogue_load()
            built = world_build()
            yield built
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)
            settings.disable()


# Values that name no account's object: the same in every context.
SHARED = {"app": "llama-3-instruct-chat", "month": "2026-12"}

# Bodies for the writes that check their body before the object or the role: without one, every
# principal would get the same 400 and the cell would prove nothing.
BODIES = {
    ("api-instance-list", "POST"): {
        "region": "cn-north-1",
        "gpu_model": "a800-80g",
        "gpu_count": 1,
        "image": "pytorch-2.5-cu124",
    },
    ("api-instance-rename", "POST"): {"name": "renamed"},
    ("api-instance-save-image", "POST"): {"name": "saved", "tag": "v9"},
    ("api-instance-snapshot-schedule", "POST"): {"every_hours": 6, "keep": 2},
    ("api-image-rename", "POST"): {"name": "renamed"},
    ("api-image-share", "POST"): {"shared": True},
    ("api-image-import", "POST"): {"reference": "registry.example.com/team/image:1"},
    ("api-image-build", "POST"): {"recipe": "FROM registry.example.com/team/image:1\n", "name": "built"},
    ("api-instance-resize", "POST"): {"node_count": 2},
    ("api-team-wallet-transfers", "POST"): {"direction": "in", "amount_fen": 100},
    ("api-quota-request-list", "POST"): {"gpu_model": "h800", "cards": 64, "duration_days": 7, "reason": "a run"},
    ("api_billing_orders", "POST"): {"amount_fen": 10_000},
}


def _value(world, context: str, what: str):
    if what in SHARED:
        return SHARED[what]
    if what in ("model", "dataset"):
        from apps_marketplace.models import DatasetEntry, ModelEntry

        return (ModelEntry if what == "model" else DatasetEntry).objects.order_by("pk").first().pk
    if what == "stop":
        return what
    if what.startswith("="):  # a literal part of the URL ("share" alone names the port's share link)
        return what[1:]
    obj = world.contexts[context].objects.get(what)
    if obj is None:
        return None
    if what in ("team", "saved_image", "snapshot"):
        return obj.slug
    return obj.name if what == "secret" else obj.pk


def contexts_of(route: Route) -> tuple[str, ...]:
    """The contexts a route's cells are checked in: one (``-``) where its URL names no account's object."""
    if not route.contextless and any(
        what not in SHARED and what not in ("model", "dataset", "stop") and not what.startswith("=")
        for what in route.objects.values()
    ):
        return CONTEXTS
    return ("-",)


def request_as(world, principal: str, method: str, url: str, body=None):
    client, headers = world.clients[principal]
    if method == "GET":
        return client.get(url, **headers)
    return getattr(client, method.lower())(url, body or {}, content_type="application/json", **headers)


# --- The cells -------------------------------------------------------------------------------------------


def _answer(response) -> str:
    """A response as the table writes it."""
    status = response.status_code
    if status in (401, 404):
        return str(status)
    if status == 403:
        try:
            code = response.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = ""
        return {"read_only_token": "ro", "team_token": "tt"}.get(code, "403")
    if status == 302 and "/accounts/login/" in response.get("Location", ""):
        return "log"
    return "ok"


# Cells checked on each row's first route only, the table still saying every one. A team role's session
# acts on team A's account, and the former member's on his own: an object of alice's personal account
# (or, for him, of team B) is another account's to them, exactly as team B's is to the roles (the same
# check, ``teams.access.principal_access``), and that cell is checked on every route. A former member's
# team token is refused at authentication, before any route's code runs.
SETTLED_BEFORE_THE_ROUTE = {
    ("personal", "admin"),
    ("personal", "member"),
    ("personal", "billing"),
    ("personal", "former"),
    ("team_b", "former"),
}


def _sampled(context: str, principal: str) -> bool:
    return principal == "former_token" or (context, principal) in SETTLED_BEFORE_THE_ROUTE


def _api_cells():
    first_of_row = set()
    for name, method, _text in api_operations():
        route = API_ROUTES.get(name)
        if route is None:
            continue  # test_every_api_route_has_a_row_in_the_table says so
        action = "read" if method == "GET" else "write"
        for context in contexts_of(route):
            if context not in POLICY[route.kind][action]:
                continue  # e.g. an SSH key in team A's context: a person's, never a team's
            first = (route.kind, action, context) not in first_of_row
            first_of_row.add((route.kind, action, context))
            for principal in PRINCIPALS:
                if first or not _sampled(context, principal):
                    yield pytest.param(name, method, context, principal, id=f"{name}-{method}-{context}-{principal}")


def _check(world, name: str, route: Route, method: str, context: str, principal: str, body=None) -> None:
    kwargs = {
        keyword: _value(world, "personal" if context == "-" else context, what)
        for keyword, what in route.objects.items()
    }
    url = reverse(name, kwargs=kwargs)
    response = request_as(world, principal, method, url, body)
    action = "read" if method == "GET" else "write"
    want = expected(route.kind, action, context, principal)
    got = _answer(response)
    assert got == want, f"{principal} {method} {url} ({context}): {response.status_code} {response.content[:300]!r}"
    if response.status_code < 300 and not getattr(response, "streaming", False):
        assert STRANGER_MARK not in response.content.decode(errors="replace"), f"{url} shows a stranger's object"


@pytest.fixture(autouse=True)
def _clear_cache():
    """The project's fixture clears the cache (throttles, rate limits) before and after each test; here
    before is enough, and the module's thousands of cells are spared half of it."""
    from django.core.cache import cache

    from core.memo import process_memos_forget

    process_memos_forget()
    cache.clear()


@pytest.mark.parametrize(("name", "method", "context", "principal"), list(_api_cells()))
def test_api(world, db, name, method, context, principal):
    _check(world, name, API_ROUTES[name], method, context, principal, BODIES.get((name, method)))


def test_a_stranger_s_object_answers_as_a_missing_one_in_every_row():
    """The table itself: in team B's context a cell is a 404, or the refusal the principal gets for that
    row's objects in every context (a role, a scope), which says nothing of whether the object exists."""
    for kind, actions in POLICY.items():
        for action, rows in actions.items():
            if "team_b" not in rows:
                continue
            for principal in PRINCIPALS:
                cell = expected(kind, action, "team_b", principal)
                if cell == "404":
                    continue
                everywhere = {expected(kind, action, context, principal) for context in rows}
                assert cell != "ok" and everywhere == {cell}, (kind, action, principal)


# A page takes no API token: every token is the anonymous visitor the ``token`` column stands for, so
# the other token columns are checked on each row's first page only.
PAGE_SAMPLED = {"read_token", "team_token", "former_token"}


def _page_cells():
    first_of_row = set()
    for name, route in PAGE_ROUTES.items():
        action = "read" if route.method == "GET" else "write"
        for context in contexts_of(route):
            if context in PAGE_POLICY[route.kind][action]:
                first = (route.kind, action, context) not in first_of_row
                first_of_row.add((route.kind, action, context))
                for principal in PRINCIPALS:
                    sampled = principal in PAGE_SAMPLED or (context, principal) in SETTLED_BEFORE_THE_ROUTE
                    if first or not sampled:
                        yield pytest.param(name, context, principal, id=f"{name}-{context}-{principal}")


@pytest.mark.parametrize(("name", "context", "principal"), list(_page_cells()))
def test_page(world, db, name, context, principal):
    route = PAGE_ROUTES[name]
    kwargs = {keyword: _value(world, context, what) for keyword, what in route.objects.items()}
    url = reverse(name, kwargs=kwargs)
    client, headers = world.clients[principal]
    if route.method == "GET":
        response = client.get(url, **headers)
    else:
        response = client.post(url, PAGE_BODIES.get(name, {}), **headers)
    action = "read" if route.method == "GET" else "write"
    want = PAGE_POLICY[route.kind][action][context].split()[PRINCIPALS.index(principal)]
    assert _answer(response) == want, f"{principal} {route.method} {url} ({context}): {response.status_code}"
    if response.status_code == 200:
        assert STRANGER_MARK not in response.content.decode(errors="replace"), f"{url} shows a stranger's object"


# --- The ways in outside the API and the pages -----------------------------------------------------------
#
# The proxy (an instance's servers and declared ports on the user-content host) and the SSH gateway ask
# per person, in no acting context: whoever operates the instance, in any of their contexts. Each person
# holds a key chosen for every instance, so the gateway's answer turns on that alone.
#                     personal team_a team_b
OPERATORS = {
    "alice": "ok       ok     404",  # her own, and her team's as its owner
    "ada": "404      ok     404",  # an admin operates every team instance
    "mel": "404      404    404",  # a member sees a colleague's instance but opens nothing of it
    "bill": "404      404    404",  # a billing viewer
    "fred": "404      404    404",  # removed from team A
    "charlie": "404      404    ok",  # team B's owner
}


def _operators_cells():
    for person in OPERATORS:
        for context in CONTEXTS:
            yield pytest.param(person, context, id=f"{person}-{context}")


@pytest.fixture
def upstream(monkeypatch):
    """The simulated cloud serves every server and port at ``upstream``: only the access decision is left."""
    from providers.simulated.backend import SimulatedBackend

    monkeypatch.setattr(SimulatedBackend, "proxy_target", lambda self, *, key, service: "upstream", raising=False)
    monkeypatch.setattr(SimulatedBackend, "port_target", lambda self, *, key, port: "upstream", raising=False)


def _want(person: str, context: str) -> str:
    return OPERATORS[person].split()[CONTEXTS.index(context)]


@pytest.mark.parametrize(("person", "context"), list(_operators_cells()))
def test_proxy(world, db, upstream, person, context):
    from apps_marketplace.proxy_targets import deployment_proxy_target
    from ports.proxy_targets import port_proxy_target

    instance = world.contexts[context].objects["instance"]
    user = world.people[person]
    server = deployment_proxy_target(instance_id=str(instance.pk), service="lab", user=user)
    port = port_proxy_target(instance_id=str(instance.pk), service="p8080", user=user)
    want = _want(person, context)
    assert ("ok" if server == "upstream" else "404") == want
    assert ("ok" if port == "upstream" else "404") == want


@pytest.mark.parametrize("context", CONTEXTS)
def test_proxy_share_links_open_to_anyone_while_their_maker_operates(world, db, upstream, context):
    share = world.contexts[context].objects["share"]
    from ports.proxy_targets import port_proxy_target

    assert (
        port_proxy_target(instance_id=str(share.port.instance_id), service=f"s-{share.token}", user=None) == "upstream"
    )


@pytest.mark.parametrize(("person", "context"), list(_operators_cells()))
def test_ssh_gateway(world, db, person, context):
    from gateway.selectors import gateway_verdict

    instance = world.contexts[context].objects["instance"]
    verdict = gateway_verdict(login=str(instance.pk), fingerprint=world.keys[person])
    assert verdict is not None
    assert ("ok" if verdict.allowed else "404") == _want(person, context), verdict.refusal


# --- The README's rendering --------------------------------------------------------------------------------


def policy_markdown() -> str:
    """The API's table as the README shows it: a row per kind and action, a cell per principal giving
    its answer for an object of the personal context / team A / team B (one answer where the route
    names no account's object)."""
    lines = [
        "| kind | action | " + " | ".join(PRINCIPALS) + " |",
        "|---|---|" + "---|" * len(PRINCIPALS),
    ]
    for kind in sorted(POLICY):
        for action, rows in POLICY[kind].items():
            cells = [
                "/".join(rows[context].split()[n] if context in rows else "·" for context in CONTEXTS)
                if "-" not in rows
                else rows["-"].split()[n]
                for n in range(len(PRINCIPALS))
            ]
            lines.append(f"| {kind} | {action} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_readme_shows_this_table():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert policy_markdown() in readme, "README's table of who may do what differs: paste policy_markdown()"
