"""Every operation of the console's REST API as a typed method (``Client``); the models are in
``gpuctl.models``, generated from the same schema.

Names follow the schema's ``operationId`` (``v1_instances_stop_create`` → ``instances_stop``): ``_list``
methods return iterators that fetch page after page as you go, ``_get`` one object, ``_create`` a new
one (with an ``Idempotency-Key``, random unless you pass ``idempotency_key=``). Path parameters are
positional; the JSON body is ``body``; query parameters are keyword-only.
``tests/test_client_matches_schema.py`` fails when the schema and these signatures disagree.

    from gpuctl import Client, NotFound
    console = Client("https://console.example.com", "gpuc_…")
    for instance in console.instances_list(status=["running"]):
        print(instance["name"], instance["status"])
"""

from __future__ import annotations

from collections.abc import Iterator

from gpuctl import models as m
from gpuctl.client import Transport, operation


class Client(Transport):
    """One console, one token: ``Client("https://console.example.com", "gpuc_…")``.

    Keyword arguments: ``timeout`` (s), ``max_retries`` and ``backoff_s`` (429/503), ``max_wait_s``.
    Each method's body is its signature alone: ``@operation`` makes the call (see ``gpuctl.client``).
    """

    @operation("v1_account_device_create", "POST", "/account/device/")
    def account_device_create(
        self, body: m.StartRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.Started:
        """Start a device log-in (for a command line)."""

    @operation("v1_account_device_token_create", "POST", "/account/device/token/")
    def account_device_token_create(
        self, body: m.TokenRequestRequest, *, idempotency_key: str | None = None
    ) -> m.Token:
        """Poll for the token of a device log-in."""

    @operation("v1_account_profile_retrieve", "GET", "/account/profile/")
    def account_profile_get(self) -> m.Profile:
        """account_profile_get."""

    @operation("v1_account_profile_partial_update", "PATCH", "/account/profile/")
    def account_profile_update(self, body: m.PatchedProfileRequest | None = None) -> m.Profile:
        """account_profile_update."""

    @operation("v1_account_rate_limit_retrieve", "GET", "/account/rate-limit/")
    def account_rate_limit_get(self) -> m.RateLimit:
        """Your rate limits (the account's, this token's own) and what is left of them this minute."""

    @operation("v1_account_security_events_list", "GET", "/account/security-events/", paginated=True)
    def account_security_events_list(self) -> Iterator[m.SecurityEvent]:
        """List your security log (newest first)."""

    @operation("v1_account_ssh_keys_list", "GET", "/account/ssh-keys/", paginated=True)
    def account_ssh_keys_list(self) -> Iterator[m.SSHKey]:
        """List your SSH keys."""

    @operation("v1_account_ssh_keys_create", "POST", "/account/ssh-keys/")
    def account_ssh_keys_create(self, body: m.SSHKeyCreateRequest, *, idempotency_key: str | None = None) -> m.SSHKey:
        """Add an SSH key."""

    @operation("v1_account_ssh_keys_retrieve", "GET", "/account/ssh-keys/{id}/")
    def account_ssh_keys_get(self, id: int) -> m.SSHKey:
        """Get an SSH key."""

    @operation("v1_account_ssh_keys_partial_update", "PATCH", "/account/ssh-keys/{id}/")
    def account_ssh_keys_update(self, id: int, body: m.PatchedSSHKeyUpdateRequest | None = None) -> m.SSHKey:
        """Rename an SSH key."""

    @operation("v1_account_ssh_keys_destroy", "DELETE", "/account/ssh-keys/{id}/")
    def account_ssh_keys_delete(self, id: int) -> None:
        """Delete an SSH key."""

    @operation("v1_account_tokens_list", "GET", "/account/tokens/", paginated=True)
    def account_tokens_list(self) -> Iterator[m.APIToken]:
        """List your API tokens."""

    @operation("v1_account_tokens_create", "POST", "/account/tokens/")
    def account_tokens_create(
        self, body: m.APITokenCreateRequest, *, idempotency_key: str | None = None
    ) -> m.APITokenCreated:
        """Create an API token."""

    @operation("v1_account_tokens_retrieve", "GET", "/account/tokens/{id}/")
    def account_tokens_get(self, id: int) -> m.APIToken:
        """Get an API token (never its secret)."""

    @operation("v1_account_tokens_destroy", "DELETE", "/account/tokens/{id}/")
    def account_tokens_delete(self, id: int) -> None:
        """Revoke an API token."""

    @operation("v1_apps_list", "GET", "/apps/", paginated=True)
    def apps_list(self, *, category: str | None = None, q: str | None = None) -> Iterator[m.App]:
        """List one-click apps."""

    @operation("v1_apps_retrieve", "GET", "/apps/{slug}/")
    def apps_get(self, slug: str) -> m.App:
        """A one-click app."""

    @operation("v1_apps_fit_retrieve", "GET", "/apps/{slug}/fit/")
    def apps_fit_get(
        self,
        slug: str,
        *,
        concurrency: int | None = None,
        context_length: int | None = None,
        model: str | None = None,
        precision: str | None = None,
    ) -> m.Fit:
        """Fit check: which GPUs and card counts can serve a model, at what price."""

    @operation("v1_billing_balance_retrieve", "GET", "/billing/balance/")
    def billing_balance_get(self) -> m.Balance:
        """Balance and runway."""

    @operation("v1_billing_orders_list", "GET", "/billing/orders/", paginated=True)
    def billing_orders_list(self) -> Iterator[m.TopUpOrder]:
        """Top-up orders."""

    @operation("v1_billing_orders_create", "POST", "/billing/orders/")
    def billing_orders_create(
        self, body: m.TopUpCreateRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.TopUpOrderCreated:
        """Create a top-up order."""

    @operation("v1_billing_orders_retrieve", "GET", "/billing/orders/{id}/")
    def billing_orders_get(self, id: int) -> m.TopUpOrder:
        """A top-up order."""

    @operation("v1_billing_statements_list", "GET", "/billing/statements/")
    def billing_statements_list(self) -> m.StatementMonths:
        """Statements."""

    @operation("v1_billing_statements_retrieve", "GET", "/billing/statements/{month}/")
    def billing_statements_get(self, month: str) -> m.Statement:
        """A monthly statement, itemised."""

    @operation("v1_billing_transactions_list", "GET", "/billing/transactions/", paginated=True)
    def billing_transactions_list(
        self,
        *,
        date_from: str | None = None,
        date_to: str | None = None,
        kind: list[str] | None = None,
        ordering: list[str] | None = None,
    ) -> Iterator[m.Transaction]:
        """Transactions."""

    @operation("v1_catalogue_retrieve", "GET", "/catalogue/")
    def catalogue_get(self) -> m.Catalogue:
        """GPU models (with free cards now and prices), images and regions."""

    @operation("v1_datasets_list", "GET", "/datasets/", paginated=True)
    def datasets_list(
        self,
        *,
        licence: str | None = None,
        organisation: str | None = None,
        q: str | None = None,
        size: str | None = None,
        sort: str | None = None,
        task: str | None = None,
    ) -> Iterator[m.DatasetEntry]:
        """List public datasets."""

    @operation("v1_datasets_retrieve", "GET", "/datasets/{id}/")
    def datasets_get(self, id: int) -> m.DatasetEntry:
        """A public dataset."""

    @operation("v1_deployments_list", "GET", "/deployments/", paginated=True)
    def deployments_list(self) -> Iterator[m.Deployment]:
        """List your deployments."""

    @operation("v1_deployments_create", "POST", "/deployments/")
    def deployments_create(self, body: m.DeployRequest, *, idempotency_key: str | None = None) -> m.DeploymentCreated:
        """Deploy an app."""

    @operation("v1_deployments_retrieve", "GET", "/deployments/{id}/")
    def deployments_get(self, id: str) -> m.Deployment:
        """Get one deployment."""

    @operation("v1_deployments_destroy", "DELETE", "/deployments/{id}/")
    def deployments_delete(self, id: str) -> None:
        """Delete (releases the instance)."""

    @operation("v1_deployments_redeploy_create", "POST", "/deployments/{id}/redeploy/")
    def deployments_redeploy(
        self, id: str, body: m.RedeployRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.Deployment:
        """Redeploy with another model or parameters (restarts in place)."""

    @operation("v1_deployments_regenerate_key_create", "POST", "/deployments/{id}/regenerate-key/")
    def deployments_regenerate_key(self, id: str, *, idempotency_key: str | None = None) -> m.DeploymentApiKey:
        """Make a new API key (the old one stops working)."""

    @operation("v1_deployments_restart_create", "POST", "/deployments/{id}/restart/")
    def deployments_restart(self, id: str, *, idempotency_key: str | None = None) -> m.Deployment:
        """Restart in place."""

    @operation("v1_deployments_start_create", "POST", "/deployments/{id}/start/")
    def deployments_start(self, id: str, *, idempotency_key: str | None = None) -> m.Deployment:
        """Start a stopped deployment."""

    @operation("v1_deployments_stop_create", "POST", "/deployments/{id}/stop/")
    def deployments_stop(self, id: str, *, idempotency_key: str | None = None) -> m.Deployment:
        """Stop (GPUs freed, disk kept)."""

    @operation("v1_images_list", "GET", "/images/", paginated=True)
    def images_list(self) -> Iterator[m.SavedImage]:
        """List your saved images."""

    @operation("v1_images_retrieve", "GET", "/images/{id}/")
    def images_get(self, id: str) -> m.SavedImage:
        """Get one saved image."""

    @operation("v1_images_destroy", "DELETE", "/images/{id}/")
    def images_delete(self, id: str) -> None:
        """Delete a saved image (refused while an instance uses it)."""

    @operation("v1_images_rename_create", "POST", "/images/{id}/rename/")
    def images_rename(
        self, id: str, body: m.ImageRenameRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.SavedImage:
        """Rename a saved image, or change its note."""

    @operation("v1_images_share_create", "POST", "/images/{id}/share/")
    def images_share(self, id: str, body: m.ImageShareRequest, *, idempotency_key: str | None = None) -> m.SavedImage:
        """Share a saved image with the team, or stop sharing it."""

    @operation("v1_images_recipe_retrieve", "GET", "/images/{id}/recipe/", stream=True)
    def images_recipe(self, id: str) -> Iterator[bytes]:
        """A saved image's recipe: the Containerfile that rebuilds it (plain text)."""

    @operation("v1_images_build_log_retrieve", "GET", "/images/{id}/build-log/", stream=True)
    def images_build_log(self, id: str) -> Iterator[bytes]:
        """A built image's build log (its tail, plain text)."""

    @operation("v1_images_build_create", "POST", "/images/build/")
    def images_build(self, body: m.ImageBuildRequest) -> m.SavedImage:
        """Build a new image from a recipe: checked first (a 400 names the line), then built by the console."""

    @operation("v1_images_import_create", "POST", "/images/import/")
    def images_import(self, body: m.ImageImportRequest) -> m.SavedImage:
        """Bring your own image: inspected in its registry (an allowed one), recorded ready and pinned."""

    @operation("v1_instances_list", "GET", "/instances/", paginated=True)
    def instances_list(
        self,
        *,
        gpu_model: str | None = None,
        ordering: list[str] | None = None,
        region: str | None = None,
        released: bool | None = None,
        status: list[str] | None = None,
    ) -> Iterator[m.Instance]:
        """List your instances."""

    @operation("v1_instances_create", "POST", "/instances/")
    def instances_create(self, body: m.LaunchRequest, *, idempotency_key: str | None = None) -> m.Instance:
        """Launch an instance."""

    @operation("v1_instances_files_list", "GET", "/instances/{instance_id}/files/")
    def instances_files_list(self, instance_id: str, *, path: str) -> list[m.Entry]:
        """List a folder."""

    @operation("v1_instances_files_destroy", "DELETE", "/instances/{instance_id}/files/")
    def instances_files_delete(self, instance_id: str, *, path: str) -> None:
        """Delete a file or an empty folder."""

    @operation("v1_instances_files_content_retrieve", "GET", "/instances/{instance_id}/files/content/", stream=True)
    def instances_files_download(self, instance_id: str, *, path: str) -> Iterator[bytes]:
        """Download a file."""

    @operation("v1_instances_files_content_update", "PUT", "/instances/{instance_id}/files/content/")
    def instances_files_upload(self, instance_id: str, content: bytes, *, path: str, offset: int = 0) -> m.Entry:
        """Upload a chunk of a file."""

    @operation("v1_instances_files_folder_create", "POST", "/instances/{instance_id}/files/folder/")
    def instances_files_mkdir(self, instance_id: str, *, path: str, idempotency_key: str | None = None) -> None:
        """Make a folder (and its parents)."""

    @operation("v1_instances_files_stat_retrieve", "GET", "/instances/{instance_id}/files/stat/")
    def instances_files_stat_get(self, instance_id: str, *, path: str) -> m.Entry:
        """A file's size (where to resume)."""

    @operation("v1_instances_ports_list", "GET", "/instances/{instance_id}/ports/")
    def instances_ports_list(self, instance_id: str) -> list[m.Port]:
        """The instance's service ports."""

    @operation("v1_instances_ports_create", "POST", "/instances/{instance_id}/ports/")
    def instances_ports_create(
        self, instance_id: str, body: m.PortCreateRequest, *, idempotency_key: str | None = None
    ) -> m.Port:
        """Serve a port."""

    @operation("v1_instances_ports_destroy", "DELETE", "/instances/{instance_id}/ports/{port_id}/")
    def instances_ports_delete(self, instance_id: str, port_id: int) -> None:
        """Stop serving a port (its share links go too)."""

    @operation("v1_instances_ports_shares_create", "POST", "/instances/{instance_id}/ports/{port_id}/shares/")
    def instances_ports_shares_create(
        self,
        instance_id: str,
        port_id: int,
        body: m.ShareCreateRequest | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> m.Share:
        """Make a share link."""

    @operation(
        "v1_instances_ports_shares_revoke_create",
        "POST",
        "/instances/{instance_id}/ports/{port_id}/shares/{share_id}/revoke/",
    )
    def instances_ports_shares_revoke(
        self, instance_id: str, port_id: int, share_id: int, *, idempotency_key: str | None = None
    ) -> m.Share:
        """Revoke a share link."""

    @operation("v1_instances_retrieve", "GET", "/instances/{id}/")
    def instances_get(self, id: str) -> m.Instance:
        """Get one instance."""

    @operation("v1_instances_auto_stop_create", "POST", "/instances/{id}/auto-stop/")
    def instances_auto_stop(
        self, id: str, body: m.AutoStopRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.Instance:
        """Set or clear auto-stop."""

    @operation("v1_instances_events_list", "GET", "/instances/{id}/events/", paginated=True)
    def instances_events_list(self, id: str) -> Iterator[m.Event]:
        """Status history."""

    @operation("v1_instances_keep_running_create", "POST", "/instances/{id}/keep-running/")
    def instances_keep_running(self, id: str, *, idempotency_key: str | None = None) -> m.Instance:
        """Keep running: restart the idle clock of auto-stop."""

    @operation("v1_instances_leave_queue_create", "POST", "/instances/{id}/leave-queue/")
    def instances_leave_queue(self, id: str, *, idempotency_key: str | None = None) -> m.Instance:
        """Leave the line of starts waiting for cards."""

    @operation("v1_instances_metrics_retrieve", "GET", "/instances/{id}/metrics/")
    def instances_metrics_get(self, id: str, *, range: str | None = None) -> m.Series:
        """GPU metrics of an instance."""

    @operation("v1_instances_release_create", "POST", "/instances/{id}/release/")
    def instances_release(self, id: str, *, idempotency_key: str | None = None) -> m.Instance:
        """Release (destroy with its disk)."""

    @operation("v1_instances_rename_create", "POST", "/instances/{id}/rename/")
    def instances_rename(self, id: str, body: m.RenameRequest, *, idempotency_key: str | None = None) -> m.Instance:
        """Rename."""

    @operation("v1_instances_resize_create", "POST", "/instances/{id}/resize/")
    def instances_resize(self, id: str, body: m.ResizeRequest, *, idempotency_key: str | None = None) -> m.Instance:
        """Resize a running cluster by whole nodes."""

    @operation("v1_instances_restart_create", "POST", "/instances/{id}/restart/")
    def instances_restart(self, id: str, *, idempotency_key: str | None = None) -> m.Instance:
        """Restart in place."""

    @operation("v1_instances_clone_create", "POST", "/instances/{id}/clone/")
    def instances_clone(
        self, id: str, body: m.CloneRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.Instance:
        """Clone: a new instance with this one's image and a copy of its disk (from ``snapshot``, or one taken now)."""

    @operation("v1_instances_save_image_create", "POST", "/instances/{id}/save-image/")
    def instances_save_image(
        self, id: str, body: m.ImageSaveRequest, *, idempotency_key: str | None = None
    ) -> m.SavedImage:
        """Save as image (answered at once: the image is "saving", then "ready")."""

    @operation("v1_instances_snapshot_schedule_retrieve", "GET", "/instances/{id}/snapshot-schedule/")
    def instances_snapshot_schedule_get(self, id: str) -> m.SnapshotSchedule:
        """The instance's snapshot schedule (``every_hours`` None: none)."""

    @operation("v1_instances_snapshot_schedule_create", "POST", "/instances/{id}/snapshot-schedule/")
    def instances_snapshot_schedule_set(
        self, id: str, body: m.SnapshotScheduleRequest, *, idempotency_key: str | None = None
    ) -> m.SnapshotSchedule:
        """Set (every N hours, keep the last K) or clear (``every_hours`` 0) the snapshot schedule."""

    @operation("v1_instances_snapshots_list", "GET", "/instances/{id}/snapshots/")
    def instances_snapshots_list(self, id: str) -> list[m.Snapshot]:
        """The instance's snapshots, newest first."""

    @operation("v1_instances_snapshots_create", "POST", "/instances/{id}/snapshots/")
    def instances_snapshots_create(
        self, id: str, body: m.SnapshotCreateRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.Snapshot:
        """Snapshot the instance's disk (answered at once: "creating", then "ready")."""

    @operation("v1_instances_secrets_list", "GET", "/instances/{id}/secrets/")
    def instances_secrets_list(self, id: str) -> list[m.InstanceSecretChoice]:
        """The secrets the instance gets at boot: names, and whether each is also a variable."""

    @operation("v1_instances_runs_list", "GET", "/instances/{id}/runs/")
    def instances_runs_list(self, id: str) -> list[m.ExperimentRun]:
        """The W&B runs a running instance started, newest first (addresses as its programs recorded them)."""

    @operation("v1_instances_secrets_update", "PUT", "/instances/{id}/secrets/")
    def instances_secrets_set(self, id: str, body: m.InstanceSecretsRequest) -> list[m.InstanceSecretChoice]:
        """Choose the secrets the instance gets, from its next start or restart (replaces the choice)."""

    @operation("v1_instances_start_create", "POST", "/instances/{id}/start/")
    def instances_start(
        self, id: str, body: m.InstanceStartRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.Instance:
        """Start a stopped instance: with its cards, without GPU (``{"no_gpu": True}``), or waiting in
        line for cards (``{"wait": True}``: answered with the instance still ``stopped`` and its
        ``queue_position`` when no cards are free)."""

    @operation("v1_instances_stop_create", "POST", "/instances/{id}/stop/")
    def instances_stop(self, id: str, *, idempotency_key: str | None = None) -> m.Instance:
        """Stop (GPUs freed, disk kept)."""

    @operation("v1_models_list", "GET", "/models/", paginated=True)
    def models_list(
        self,
        *,
        licence: str | None = None,
        organisation: str | None = None,
        q: str | None = None,
        size: str | None = None,
        sort: str | None = None,
        task: str | None = None,
    ) -> Iterator[m.ModelEntry]:
        """List public models."""

    @operation("v1_models_retrieve", "GET", "/models/{id}/")
    def models_get(self, id: int) -> m.ModelEntry:
        """A public model."""

    @operation("v1_notifications_list", "GET", "/notifications/", paginated=True)
    def notifications_list(self, *, unread: bool | None = None) -> Iterator[m.Notification]:
        """List your notifications, newest first."""

    @operation("v1_notifications_retrieve", "GET", "/notifications/{id}/")
    def notifications_get(self, id: str) -> m.Notification:
        """Get one notification."""

    @operation("v1_notifications_read_create", "POST", "/notifications/{id}/read/")
    def notifications_read(self, id: str, *, idempotency_key: str | None = None) -> m.Notification:
        """Mark one notification read."""

    @operation("v1_notifications_preferences_retrieve", "GET", "/notifications/preferences/")
    def notifications_preferences_get(self) -> m.Preferences:
        """Your notification preferences."""

    @operation("v1_notifications_preferences_update", "PUT", "/notifications/preferences/")
    def notifications_preferences_replace(self, body: m.PreferencesRequest) -> m.Preferences:
        """Set notification preferences (the kinds given; others keep theirs)."""

    @operation("notifications_read_many", "POST", "/notifications/read/")
    def notifications_read_many(
        self, body: m.MarkReadRequest, *, idempotency_key: str | None = None
    ) -> m.NotificationsMarked:
        """Mark several (ids) or all of your notifications read."""

    @operation("v1_notifications_webhooks_list", "GET", "/notifications/webhooks/", paginated=True)
    def notifications_webhooks_list(self) -> Iterator[m.WebhookEndpoint]:
        """List your webhook endpoints."""

    @operation("v1_notifications_webhooks_create", "POST", "/notifications/webhooks/")
    def notifications_webhooks_create(
        self, body: m.WebhookEndpointRequest, *, idempotency_key: str | None = None
    ) -> m.WebhookEndpointCreated:
        """Add a webhook endpoint (its secret is in this answer only)."""

    @operation("v1_notifications_webhooks_retrieve", "GET", "/notifications/webhooks/{id}/")
    def notifications_webhooks_get(self, id: str) -> m.WebhookEndpoint:
        """Get one webhook endpoint."""

    @operation("v1_notifications_webhooks_partial_update", "PATCH", "/notifications/webhooks/{id}/")
    def notifications_webhooks_update(
        self, id: str, body: m.PatchedWebhookEndpointRequest | None = None
    ) -> m.WebhookEndpoint:
        """Change an endpoint's URL or turn it on or off."""

    @operation("v1_notifications_webhooks_destroy", "DELETE", "/notifications/webhooks/{id}/")
    def notifications_webhooks_delete(self, id: str) -> None:
        """Remove a webhook endpoint."""

    @operation(
        "v1_notifications_webhooks_deliveries_list", "GET", "/notifications/webhooks/{id}/deliveries/", paginated=True
    )
    def notifications_webhooks_deliveries_list(self, id: str) -> Iterator[m.Delivery]:
        """This endpoint's recent deliveries."""

    @operation("v1_notifications_webhooks_test_create", "POST", "/notifications/webhooks/{id}/test/")
    def notifications_webhooks_test(self, id: str, *, idempotency_key: str | None = None) -> m.Delivery:
        """Send a test event to this endpoint."""

    @operation("v1_quota_list", "GET", "/quota/")
    def quota_list(self) -> list[m.QuotaRow]:
        """Your GPU quota per model and what is in use."""

    @operation("v1_quota_requests_list", "GET", "/quota/requests/", paginated=True)
    def quota_requests_list(self) -> Iterator[m.QuotaRequest]:
        """Your quota requests."""

    @operation("v1_quota_requests_create", "POST", "/quota/requests/")
    def quota_requests_create(
        self, body: m.QuotaRequestRequest, *, idempotency_key: str | None = None
    ) -> m.QuotaRequest:
        """Ask for more GPU quota."""

    @operation("v1_quota_requests_retrieve", "GET", "/quota/requests/{id}/")
    def quota_requests_get(self, id: int) -> m.QuotaRequest:
        """One quota request."""

    @operation("v1_reservations_list", "GET", "/reservations/", paginated=True)
    def reservations_list(self) -> Iterator[m.Reservation]:
        """Your reserved capacity: reservations that have not ended."""

    @operation("v1_reservations_retrieve", "GET", "/reservations/{id}/")
    def reservations_get(self, id: str) -> m.Reservation:
        """One of your reservations."""

    @operation("v1_registry_credentials_list", "GET", "/registry-credentials/", paginated=True)
    def registry_credentials_list(self) -> Iterator[m.RegistryCredential]:
        """Your logins to private registries: hosts and user names, never passwords."""

    @operation("v1_registry_credentials_create", "POST", "/registry-credentials/")
    def registry_credentials_create(self, body: m.RegistryCredentialCreateRequest) -> m.RegistryCredential:
        """Save a login to a private registry (409 ``credential_exists`` when its host has one)."""

    @operation("v1_registry_credentials_retrieve", "GET", "/registry-credentials/{id}/")
    def registry_credentials_get(self, id: str) -> m.RegistryCredential:
        """One registry login's host and user name."""

    @operation("v1_registry_credentials_update", "PUT", "/registry-credentials/{id}/")
    def registry_credentials_update(self, id: str, body: m.RegistryCredentialUpdateRequest) -> m.RegistryCredential:
        """Replace a registry login's user name and password."""

    @operation("v1_registry_credentials_destroy", "DELETE", "/registry-credentials/{id}/")
    def registry_credentials_delete(self, id: str) -> None:
        """Delete a registry login."""

    @operation("v1_secrets_list", "GET", "/secrets/", paginated=True)
    def secrets_list(self) -> Iterator[m.Secret]:
        """Your secrets (the acting account's): names and dates, never values."""

    @operation("v1_secrets_create", "POST", "/secrets/")
    def secrets_create(self, body: m.SecretCreateRequest) -> m.Secret:
        """Save a new secret (409 ``secret_exists`` when the name is taken)."""

    @operation("v1_secrets_retrieve", "GET", "/secrets/{name}/")
    def secrets_get(self, name: str) -> m.Secret:
        """One secret's name and dates."""

    @operation("v1_secrets_update", "PUT", "/secrets/{name}/")
    def secrets_update(self, name: str, body: m.SecretValueRequest) -> m.Secret:
        """Replace a saved secret's value."""

    @operation("v1_secrets_destroy", "DELETE", "/secrets/{name}/")
    def secrets_delete(self, name: str) -> None:
        """Delete a secret."""

    @operation("v1_staff_quota_requests_list", "GET", "/staff/quota/requests/", paginated=True)
    def staff_quota_requests_list(self, *, status: str | None = None) -> Iterator[m.StaffQuotaRequest]:
        """Quota requests (staff): the waiting queue, most urgent first, or all."""

    @operation("v1_staff_quota_requests_retrieve", "GET", "/staff/quota/requests/{id}/")
    def staff_quota_requests_get(self, id: int) -> m.StaffQuotaRequest:
        """One quota request (staff)."""

    @operation("v1_staff_quota_requests_approve_create", "POST", "/staff/quota/requests/{id}/approve/")
    def staff_quota_requests_approve(
        self, id: int, body: m.StaffQuotaApproveRequest | None = None, *, idempotency_key: str | None = None
    ) -> m.StaffQuotaRequest:
        """Approve a quota request (staff)."""

    @operation("v1_staff_quota_requests_deny_create", "POST", "/staff/quota/requests/{id}/deny/")
    def staff_quota_requests_deny(
        self, id: int, body: m.StaffQuotaDenyRequest, *, idempotency_key: str | None = None
    ) -> m.StaffQuotaRequest:
        """Decline a quota request with a reason (staff)."""

    @operation("v1_staff_reservations_list", "GET", "/staff/reservations/", paginated=True)
    def staff_reservations_list(self, *, status: str | None = None) -> Iterator[m.StaffReservation]:
        """Reservations (staff)."""

    @operation("v1_staff_reservations_create", "POST", "/staff/reservations/")
    def staff_reservations_create(
        self, body: m.StaffReservationCreateRequest, *, idempotency_key: str | None = None
    ) -> m.StaffReservation:
        """Reserve cards for an account (staff)."""

    @operation("v1_staff_reservations_retrieve", "GET", "/staff/reservations/{id}/")
    def staff_reservations_get(self, id: str) -> m.StaffReservation:
        """One reservation (staff)."""

    @operation("v1_staff_reservations_cancel_create", "POST", "/staff/reservations/{id}/cancel/")
    def staff_reservations_cancel(self, id: str, *, idempotency_key: str | None = None) -> m.StaffReservation:
        """Cancel a reservation now (staff)."""

    @operation("v1_teams_list", "GET", "/teams/", paginated=True)
    def teams_list(self) -> Iterator[m.Team]:
        """List your teams."""

    @operation("v1_teams_create", "POST", "/teams/")
    def teams_create(self, body: m.TeamCreateRequest, *, idempotency_key: str | None = None) -> m.Team:
        """Create a team."""

    @operation("v1_teams_retrieve", "GET", "/teams/{slug}/")
    def teams_get(self, slug: str) -> m.Team:
        """Get a team."""

    @operation("v1_teams_audit_list", "GET", "/teams/{slug}/audit/", paginated=True)
    def teams_audit_list(self, slug: str) -> Iterator[m.TeamEvent]:
        """A team's audit log, newest first."""

    @operation("v1_teams_invitations_list", "GET", "/teams/{slug}/invitations/", paginated=True)
    def teams_invitations_list(self, slug: str) -> Iterator[m.Invitation]:
        """List a team's invitations."""

    @operation("v1_teams_invitations_create", "POST", "/teams/{slug}/invitations/")
    def teams_invitations_create(
        self, slug: str, body: m.InvitationCreateRequest, *, idempotency_key: str | None = None
    ) -> m.Invitation:
        """Invite someone by e-mail."""

    @operation("v1_teams_invitations_revoke_create", "POST", "/teams/{slug}/invitations/{id}/revoke/")
    def teams_invitations_revoke(self, slug: str, id: int, *, idempotency_key: str | None = None) -> m.Invitation:
        """Revoke a pending invitation."""

    @operation("v1_teams_members_list", "GET", "/teams/{slug}/members/", paginated=True)
    def teams_members_list(self, slug: str) -> Iterator[m.Member]:
        """List a team's members."""

    @operation("v1_teams_members_partial_update", "PATCH", "/teams/{slug}/members/{id}/")
    def teams_members_update(self, slug: str, id: int, body: m.PatchedMemberUpdateRequest | None = None) -> m.Member:
        """Change a member's role or limits."""

    @operation("v1_teams_members_destroy", "DELETE", "/teams/{slug}/members/{id}/")
    def teams_members_delete(self, slug: str, id: int) -> None:
        """Remove a member (or leave, for yourself)."""

    @operation("v1_teams_wallet_retrieve", "GET", "/teams/{slug}/wallet/")
    def teams_wallet_get(self, slug: str) -> m.TeamWallet:
        """A team's balance and runway."""

    @operation("v1_teams_wallet_transfers_create", "POST", "/teams/{slug}/wallet/transfers/")
    def teams_wallet_transfers_create(
        self, slug: str, body: m.MoneyMoveRequest, *, idempotency_key: str | None = None
    ) -> m.MoneyMoved:
        """Move paid money into or out of a team."""

    @operation("v1_snapshots_retrieve", "GET", "/snapshots/{id}/")
    def snapshots_get(self, id: str) -> m.Snapshot:
        """Get one snapshot (its state and progress)."""

    @operation("v1_snapshots_destroy", "DELETE", "/snapshots/{id}/")
    def snapshots_delete(self, id: str) -> None:
        """Delete a snapshot (its bill stops)."""

    @operation("v1_snapshots_restore_create", "POST", "/snapshots/{id}/restore/")
    def snapshots_restore(self, id: str, *, idempotency_key: str | None = None) -> m.Snapshot:
        """Restore a snapshot into its stopped instance (answered at once: "restoring", then "ready")."""

    @operation("v1_volumes_list", "GET", "/volumes/", paginated=True)
    def volumes_list(self) -> Iterator[m.Volume]:
        """List your volumes."""

    @operation("v1_volumes_create", "POST", "/volumes/")
    def volumes_create(self, body: m.VolumeCreateRequest, *, idempotency_key: str | None = None) -> m.Volume:
        """Create a volume."""

    @operation("v1_volumes_retrieve", "GET", "/volumes/{id}/")
    def volumes_get(self, id: str) -> m.Volume:
        """Get one volume."""

    @operation("v1_volumes_destroy", "DELETE", "/volumes/{id}/")
    def volumes_delete(self, id: str) -> m.Volume:
        """Delete a volume and its files."""

    @operation("v1_volumes_attachments_list", "GET", "/volumes/{id}/attachments/", paginated=True)
    def volumes_attachments_list(self, id: str) -> Iterator[m.Attachment]:
        """The volume's attachments."""

    @operation("v1_volumes_attachments_create", "POST", "/volumes/{id}/attachments/")
    def volumes_attachments_create(
        self, id: str, body: m.AttachRequest, *, idempotency_key: str | None = None
    ) -> m.Attachment:
        """Attach to one of your instances (mounted at its next start or restart)."""

    @operation("v1_volumes_attachments_destroy", "DELETE", "/volumes/{id}/attachments/{attachment_id}/")
    def volumes_attachments_delete(self, id: str, attachment_id: str) -> m.Attachment:
        """Detach (at once from a stopped instance; at the next stop or restart from a running one)."""

    @operation("v1_volumes_resize_create", "POST", "/volumes/{id}/resize/")
    def volumes_resize(self, id: str, body: m.VolumeResizeRequest, *, idempotency_key: str | None = None) -> m.Volume:
        """Grow a volume (never shrink)."""

    @operation("v1_volumes_files_list", "GET", "/volumes/{volume_id}/files/")
    def volumes_files_list(self, volume_id: str, *, path: str) -> list[m.Entry]:
        """List a folder of a volume."""

    @operation("v1_volumes_files_destroy", "DELETE", "/volumes/{volume_id}/files/")
    def volumes_files_delete(self, volume_id: str, *, path: str) -> None:
        """Delete a file, a link or an empty folder of a volume."""

    @operation("v1_volumes_files_content_retrieve", "GET", "/volumes/{volume_id}/files/content/", stream=True)
    def volumes_files_download(self, volume_id: str, *, path: str) -> Iterator[bytes]:
        """Download a file of a volume (streamed)."""

    @operation("v1_volumes_files_content_update", "PUT", "/volumes/{volume_id}/files/content/")
    def volumes_files_upload(self, volume_id: str, content: bytes, *, path: str, offset: int = 0) -> m.Entry:
        """Upload a chunk of a file to a volume."""

    @operation("v1_volumes_files_folder_create", "POST", "/volumes/{volume_id}/files/folder/")
    def volumes_files_mkdir(self, volume_id: str, *, path: str, idempotency_key: str | None = None) -> None:
        """Make a folder (and its parents) on a volume."""

    @operation("v1_volumes_files_stat_retrieve", "GET", "/volumes/{volume_id}/files/stat/")
    def volumes_files_stat_get(self, volume_id: str, *, path: str) -> m.Entry:
        """A file's size on a volume (where to resume)."""
