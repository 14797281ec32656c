"""Typed models of the console's API: generated from its OpenAPI schema by ``tools/generate_models.py``.

Do not edit by hand: regenerate. Fields the schema does not require are ``NotRequired``; ``X | None``
where the schema says ``nullable``. Answers are plain dicts at run time (``TypedDict``), so a field the
console adds later reaches the caller untouched.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

AppParameterKindEnum = Literal["choice", "integer", "model_path", "path"]

CategoryEnum = Literal["chat", "image-generation", "code-assistant", "speech", "notebook-tools"]

DatasetEntryTaskEnum = Literal[
    "pretraining",
    "instruction-tuning",
    "preference",
    "question-answering",
    "math",
    "code",
    "evaluation",
    "text-classification",
    "token-classification",
    "summarization",
    "translation",
    "image-classification",
    "object-detection",
    "image-segmentation",
    "image-text",
    "speech-recognition",
    "audio",
    "video",
]

DirectionEnum = Literal["in", "out"]

EventKindEnum = Literal["status", "node"]

GatewayEnum = Literal["simulated"]

GpuCountEnum = Literal[1, 2, 4, 8]

GpuMetricsRangeEnum = Literal["15m", "1h", "6h", "1d", "7d"]

InstanceStatusEnum = Literal[
    "requested",
    "scheduling",
    "provisioning",
    "running",
    "restarting",
    "stopping",
    "stopped",
    "starting",
    "releasing",
    "released",
    "failed",
    "lost",
    "preempting",
    "preempted",
]

InstanceTierEnum = Literal["on-demand", "interruptible"]

InvitationStatusEnum = Literal["pending", "accepted", "declined", "revoked", "expired"]

KeyTypeEnum = Literal["ssh-ed25519", "ecdsa", "ssh-rsa"]

LanguageEnum = Literal["en", "zh-hans"]

LaunchTierEnum = Literal["on-demand", "interruptible"]

LaunchVolumeModeEnum = Literal["rw", "ro", "shared-rw"]

ModelEntryTaskEnum = Literal[
    "text-generation",
    "code-generation",
    "image-text-to-text",
    "text-to-image",
    "text-to-video",
    "automatic-speech-recognition",
    "text-to-speech",
    "text-to-audio",
    "feature-extraction",
    "text-ranking",
    "fill-mask",
    "text-classification",
    "token-classification",
    "translation",
    "text2text-generation",
    "summarization",
    "image-classification",
    "object-detection",
    "image-segmentation",
    "zero-shot-image-classification",
    "depth-estimation",
    "image-to-text",
    "audio-classification",
]

NodeCountEnum = Literal[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

NotificationKindEnum = Literal[
    "preempted",
    "recovered",
    "start_queue",
    "incident_credit",
    "idle_warning",
    "idle_stopped",
    "low_balance",
    "out_of_funds",
    "budget_threshold",
    "budget_reached",
    "instance_limit_reached",
    "quota_decided",
    "reservation",
    "invoice_decided",
    "deployment_ready",
    "deployment_failed",
]

QuotaRequestStatusEnum = Literal["pending", "approved", "denied", "expired", "cancelled"]

ReservationStatusEnum = Literal["active", "expired", "cancelled"]

RoleEnum = Literal["owner", "admin", "member", "billing"]

SavedImageStatusEnum = Literal["saving", "building", "ready", "failed", "deleted"]

ScopeEnum = Literal["full", "read"]

SecurityEventActionEnum = Literal[
    "login",
    "login_failed",
    "logout",
    "password_changed",
    "password_reset",
    "email_changed",
    "ssh_key_added",
    "ssh_key_removed",
    "token_created",
    "token_revoked",
    "device_login_approved",
    "second_factor_added",
    "second_factor_removed",
    "recovery_codes_generated",
    "second_factor_used",
    "recovery_code_used",
    "second_factor_failed",
]

SnapshotKindEnum = Literal["manual", "scheduled"]

SnapshotStatusEnum = Literal["creating", "ready", "restoring", "failed", "deleting", "deleted"]

SourceEnum = Literal["huggingface", "modelscope"]

StageEnum = Literal["queued", "placed", "pulling", "image_ready", "container_started", "servers_answering"]

StateEnum = Literal["done", "current", "todo"]

TeamEventActionEnum = Literal[
    "team_created",
    "team_renamed",
    "team_deleted",
    "member_invited",
    "invitation_revoked",
    "invitation_declined",
    "member_joined",
    "member_left",
    "member_removed",
    "role_changed",
    "limits_changed",
    "money_moved",
    "instance_launched",
    "instance_stopped",
    "instance_started",
    "instance_released",
    "instance_resized",
    "token_created",
    "token_revoked",
    "quota_requested",
    "budget_changed",
    "volume_created",
    "volume_deleted",
    "app_deployed",
    "app_removed",
    "secret_saved",
    "secret_deleted",
    "image_saved",
    "image_imported",
    "image_shared",
    "image_deleted",
    "snapshot_taken",
    "snapshot_restored",
    "snapshot_deleted",
]

TopUpOrderStatusEnum = Literal["pending", "paid", "failed", "expired", "refunded", "partially_refunded"]

TransactionKindEnum = Literal["trial_grant", "trial_expiry", "topup", "refund", "usage", "adjustment", "transfer"]

TypeEnum = Literal["file", "dir", "link", "other"]

VolumeAttachmentModeEnum = Literal["rw", "ro", "shared-rw"]

VolumeStatusEnum = Literal["creating", "available", "resizing", "deleting", "deleted", "failed"]

WebhookDeliveryStatusEnum = Literal["pending", "delivered", "failed"]


class APIToken(TypedDict):
    id: int
    name: str
    prefix: str
    scope: ScopeEnum
    team: str | None
    created_at: str
    expires_at: str | None
    last_used_at: str | None
    revoked_at: str | None
    status: str
    rate_per_min: int | None


class APITokenCreateRequest(TypedDict):
    name: str
    expires_in_days: NotRequired[int | None]
    scope: NotRequired[ScopeEnum]
    team: NotRequired[str | None]
    rate_per_min: NotRequired[int | None]


class APITokenCreated(TypedDict):
    id: int
    name: str
    prefix: str
    scope: ScopeEnum
    team: str | None
    created_at: str
    expires_at: str | None
    last_used_at: str | None
    revoked_at: str | None
    status: str
    rate_per_min: int | None
    token: str


class App(TypedDict):
    slug: str
    name: str
    tagline: str
    description: str
    category: CategoryEnum
    engine: str
    image: str
    image_size_bytes: int
    command_template: str
    port: int
    webui_image: NotRequired[str]
    webui_command_template: NotRequired[str]
    webui_port: int
    webui_path: NotRequired[str]
    openai_compatible: NotRequired[bool]
    api_path: NotRequired[str]
    gpu_required: NotRequired[bool]
    runs_on: str
    cpu_image: NotRequired[str]
    cpu_engine: NotRequired[str]
    cpu_model: NotRequired[str]
    supports_tensor_parallel: NotRequired[bool]
    precisions: list[str]
    default_model: str | None
    models: list[str]
    parameters: list[AppParameter]
    recommended_gpu_slug: NotRequired[str]
    recommended_gpu_count: NotRequired[int]
    model_recommendations: NotRequired[Any]
    docs_url: NotRequired[str]


class AppParameter(TypedDict):
    key: str
    label: str
    kind: AppParameterKindEnum
    default: NotRequired[str]
    choices: NotRequired[Any]
    min_value: NotRequired[int | None]
    max_value: NotRequired[int | None]
    help_text: NotRequired[str]


class AttachRequest(TypedDict):
    instance: str
    mount_path: str
    mode: NotRequired[VolumeAttachmentModeEnum]


class Attachment(TypedDict):
    id: int
    instance: str
    instance_name: str
    mount_path: str
    mode: VolumeAttachmentModeEnum
    created_at: str
    detach_pending: bool


class AutoStopRequest(TypedDict):
    at: NotRequired[str | None]
    idle_minutes: NotRequired[int | None]


class Balance(TypedDict):
    currency: str
    cash_fen: int
    trial_fen: int
    total_fen: int
    owed_fen: int
    burn_fen_per_hour: int
    runway_seconds: int | None


class Boot(TypedDict):
    stages: list[BootStage]
    pull: ImagePull | None
    total_seconds: float | None


class BootStage(TypedDict):
    stage: StageEnum
    started_at: str
    seconds: float | None
    failed: bool


class Breakdown(TypedDict):
    key: str | None
    label: str
    lines: int
    seconds: int
    amount_fen: int


class CardProcess(TypedDict):
    card: int
    pid: int
    name: str
    memory_used_mib: int | None


class CardSeries(TypedDict):
    card: int
    memory_total_mib: int | None
    utilization_pct: list[int | None]
    memory_used_mib: list[int | None]
    power_w: list[int | None]
    temperature_c: list[int | None]


class Catalogue(TypedDict):
    gpu_models: list[GpuModel]
    images: list[Image]
    regions: list[Region]


class CloneRequest(TypedDict):
    name: NotRequired[str]
    snapshot: NotRequired[str]


class CpuVariant(TypedDict):
    """The app's CPU variant: what runs on a host without GPUs, needing no card."""

    engine: str
    model: str
    image: str
    cards_needed: int


class DatasetEntry(TypedDict):
    id: int
    repo_id: str
    name: str
    organisation: str
    task: DatasetEntryTaskEnum
    num_rows: NotRequired[int | None]
    size_bytes: int
    licence: str
    source: NotRequired[SourceEnum]
    source_url: str
    revision: NotRequired[str]
    description: NotRequired[str]
    mount_path: str


class Delivery(TypedDict):
    event_id: str
    kind: str
    status: WebhookDeliveryStatusEnum
    attempts: int
    status_code: int | None
    error: str
    duration_ms: int | None
    created_at: str
    delivered_at: str | None


class DeployRequest(TypedDict):
    app: str
    model: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any]]
    region: str
    gpu_model: str
    gpu_count: GpuCountEnum
    volumes: NotRequired[list[LaunchVolumeRequest]]


class Deployment(TypedDict):
    id: str
    app: str
    model: str | None
    parameters: Any
    instance: str
    instance_status: str
    region: str
    gpu_model: str
    gpu_count: int
    hourly_price_fen: int
    status: str
    status_display: str
    status_reason: str
    steps: list[Step]
    serving: bool
    webui_url: str | None
    api_base_url: str | None
    api_key_prefix: str
    created_at: str
    updated_at: str


class DeploymentApiKey(TypedDict):
    api_key: str


class DeploymentCreated(TypedDict):
    id: str
    app: str
    model: str | None
    parameters: Any
    instance: str
    instance_status: str
    region: str
    gpu_model: str
    gpu_count: int
    hourly_price_fen: int
    status: str
    status_display: str
    status_reason: str
    steps: list[Step]
    serving: bool
    webui_url: str | None
    api_base_url: str | None
    api_key_prefix: str
    created_at: str
    updated_at: str
    api_key: str | None


class Entry(TypedDict):
    name: str
    type: TypeEnum
    size: int
    modified: int


class EntryPoints(TypedDict):
    jupyterlab_url: str | None
    vscode_url: str | None
    ssh_command: str | None
    gateway_command: str | None


class Error(TypedDict):
    """Every 4xx answer has this body."""

    error: dict[str, Any]


class Event(TypedDict):
    kind: NotRequired[EventKindEnum]
    old: NotRequired[str]
    new: str
    reason: str
    created_at: NotRequired[str]


class ExperimentRun(TypedDict):
    """A W&B run the instance started, as the console's hook in its image recorded it (an address on the"""

    url: str
    host: str
    name: str
    project: str
    entity: str
    id: str
    at: str | None


class Fit(TypedDict):
    app: str
    runs_on: str
    cpu_variant: CpuVariant | None
    model: NotRequired[str]
    precision: NotRequired[str]
    context_length: NotRequired[int]
    concurrency: NotRequired[int]
    gpu_required: bool
    estimate: FitEstimate | None
    rows: list[FitRow]
    assumptions: dict[str, int]


class FitEstimate(TypedDict):
    weights_bytes: int
    kv_cache_bytes: int
    activation_bytes: int
    runtime_bytes_per_card: int
    total_bytes: int


class FitRow(TypedDict):
    gpu: str
    gpu_name: str
    memory_gb: int
    cards: int
    fits: bool
    need_per_card_bytes: int
    usable_per_card_bytes: int
    price_per_hour_fen: int
    ready_seconds: int
    reason: str
    cheapest: bool
    recommended: bool


class GpuModel(TypedDict):
    slug: str
    name: str
    vendor: NotRequired[str]
    memory_gb: int
    price_per_card_hour_fen: int
    spot_price_per_card_hour_fen: int
    cpu_cores_per_card: NotRequired[int]
    ram_gb_per_card: NotRequired[int]
    free_cards: int
    free_cards_by_region: dict[str, dict[str, int]]


class Image(TypedDict):
    slug: str
    name: str
    framework: str
    framework_version: NotRequired[str]
    cuda_version: str
    python_version: NotRequired[str]
    os: NotRequired[str]
    repository: NotRequired[str]
    tag: NotRequired[str]
    digest: NotRequired[str]
    size_bytes: NotRequired[int]
    contents: NotRequired[Any]


class ImageBuildRequest(TypedDict):
    recipe: str
    name: str
    tag: NotRequired[str]
    note: NotRequired[str]


class ImageImportRequest(TypedDict):
    reference: str
    name: NotRequired[str]
    tag: NotRequired[str]
    note: NotRequired[str]


class ImagePull(TypedDict):
    bytes_done: int
    bytes_total: int
    bytes_per_second: float | None
    seconds_left: float | None


class ImageRenameRequest(TypedDict):
    name: NotRequired[str]
    note: NotRequired[str]


class ImageSaveRequest(TypedDict):
    name: str
    tag: NotRequired[str]
    note: NotRequired[str]


class ImageShareRequest(TypedDict):
    shared: bool


class Instance(TypedDict):
    id: str
    name: str
    status: InstanceStatusEnum
    status_display: str
    status_reason: str
    region: str
    gpu_model: str
    gpu_count: int
    node_count: int
    image: str
    disk_gb: int
    ssh_keys: list[int]
    hourly_price_fen: int
    tier: InstanceTierEnum
    auto_stop_at: str | None
    auto_stop_idle_minutes: int | None
    created_at: str
    status_changed_at: str
    running_since: str | None
    entry_points: EntryPoints
    image_ref: str
    boot: Boot | None
    start_queued_at: str | None
    queue_position: int | None
    no_gpu: bool
    billed_hourly_fen: int | None


class InstanceSecretChoice(TypedDict):
    name: str
    env: NotRequired[bool]


class InstanceSecretChoiceRequest(TypedDict):
    name: str
    env: NotRequired[bool]


class InstanceSecretsRequest(TypedDict):
    secrets: list[InstanceSecretChoiceRequest]


class InstanceStartRequest(TypedDict):
    wait: NotRequired[bool]
    no_gpu: NotRequired[bool]


class Invitation(TypedDict):
    id: int
    email: str
    role: RoleEnum
    status: InvitationStatusEnum
    invited_by: str | None
    created_at: str
    expires_at: str
    decided_at: str | None


class InvitationCreateRequest(TypedDict):
    email: str
    role: NotRequired[RoleEnum]


class LaunchRequest(TypedDict):
    name: NotRequired[str]
    region: str
    gpu_model: str
    gpu_count: GpuCountEnum
    node_count: NotRequired[NodeCountEnum]
    image: str
    disk_gb: NotRequired[int]
    ssh_keys: NotRequired[list[int]]
    volumes: NotRequired[list[LaunchVolumeRequest]]
    ports: NotRequired[list[int]]
    secrets: NotRequired[list[InstanceSecretChoiceRequest]]
    tier: NotRequired[LaunchTierEnum]
    checkpoint_command: NotRequired[str]


class LaunchVolumeRequest(TypedDict):
    volume: str
    mount_path: str
    mode: NotRequired[LaunchVolumeModeEnum]


class MarkReadRequest(TypedDict):
    ids: NotRequired[list[int]]
    all: NotRequired[bool]


class Member(TypedDict):
    id: int
    email: str
    display_name: str
    role: RoleEnum
    spend_limit_fen: int | None
    gpu_limit: int | None
    created_at: str


class ModelEntry(TypedDict):
    id: int
    repo_id: str
    name: str
    organisation: str
    task: ModelEntryTaskEnum
    parameter_count: NotRequired[int | None]
    size_bytes: int
    licence: str
    source: NotRequired[SourceEnum]
    source_url: str
    revision: NotRequired[str]
    description: NotRequired[str]
    mount_path: str
    num_layers: NotRequired[int | None]
    hidden_size: NotRequired[int | None]
    num_attention_heads: NotRequired[int | None]
    num_kv_heads: NotRequired[int | None]
    head_dim: NotRequired[int | None]
    max_context_length: NotRequired[int | None]


class MoneyMoveRequest(TypedDict):
    direction: DirectionEnum
    amount_fen: int


class MoneyMoved(TypedDict):
    transaction: int
    direction: str
    amount_fen: int
    team_cash_fen: int
    your_cash_fen: int


class MonthSummary(TypedDict):
    month: str
    opening_fen: int
    topups_fen: int
    refunds_fen: int
    adjustments_fen: int
    trial_fen: int
    usage_fen: int
    transfers_fen: int
    closing_fen: int


class Notification(TypedDict):
    id: int
    kind: NotificationKindEnum
    title: str
    body: str
    link: str
    created_at: str
    read_at: str | None


class NotificationsMarked(TypedDict):
    marked: int


class PaginatedAPITokenList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[APIToken]


class PaginatedAppList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[App]


class PaginatedAttachmentList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Attachment]


class PaginatedDatasetEntryList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[DatasetEntry]


class PaginatedDeliveryList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Delivery]


class PaginatedDeploymentList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Deployment]


class PaginatedEventList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Event]


class PaginatedInstanceList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Instance]


class PaginatedInvitationList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Invitation]


class PaginatedMemberList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Member]


class PaginatedModelEntryList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[ModelEntry]


class PaginatedNotificationList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Notification]


class PaginatedQuotaRequestList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[QuotaRequest]


class PaginatedRegistryCredentialList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[RegistryCredential]


class PaginatedReservationList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Reservation]


class PaginatedSSHKeyList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[SSHKey]


class PaginatedSavedImageList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[SavedImage]


class PaginatedSecretList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Secret]


class PaginatedSecurityEventList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[SecurityEvent]


class PaginatedStaffQuotaRequestList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[StaffQuotaRequest]


class PaginatedStaffReservationList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[StaffReservation]


class PaginatedTeamEventList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[TeamEvent]


class PaginatedTeamList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Team]


class PaginatedTopUpOrderList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[TopUpOrder]


class PaginatedTransactionList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Transaction]


class PaginatedVolumeList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[Volume]


class PaginatedWebhookEndpointList(TypedDict):
    count: int
    next: NotRequired[str | None]
    previous: NotRequired[str | None]
    results: list[WebhookEndpoint]


class PatchedMemberUpdateRequest(TypedDict):
    role: NotRequired[RoleEnum]
    spend_limit_fen: NotRequired[int | None]
    gpu_limit: NotRequired[int | None]


class PatchedProfileRequest(TypedDict):
    display_name: NotRequired[str]
    language: NotRequired[LanguageEnum]


class PatchedSSHKeyUpdateRequest(TypedDict):
    name: NotRequired[str]


class PatchedWebhookEndpointRequest(TypedDict):
    url: NotRequired[str]
    active: NotRequired[bool]


class Port(TypedDict):
    id: int
    port: int
    name: str
    url: str
    shares: list[Share]
    created_at: str


class PortCreateRequest(TypedDict):
    port: int
    name: NotRequired[str]


class Preference(TypedDict):
    kind: NotificationKindEnum
    label: str
    inbox: bool
    email: bool
    webhook: bool


class PreferenceRequest(TypedDict):
    kind: NotificationKindEnum
    email: bool
    webhook: bool


class Preferences(TypedDict):
    preferences: list[Preference]


class PreferencesRequest(TypedDict):
    preferences: list[PreferenceRequest]


class Profile(TypedDict):
    email: str
    display_name: NotRequired[str]
    language: NotRequired[LanguageEnum]
    date_joined: str


class QuotaRequest(TypedDict):
    id: int
    gpu_model: str
    cards: int
    duration_days: int
    reason: str
    status: QuotaRequestStatusEnum
    granted_cards: int | None
    message: str
    decided_at: str | None
    expires_at: str | None
    created_at: str


class QuotaRequestRequest(TypedDict):
    gpu_model: str
    cards: int
    duration_days: int
    reason: str


class QuotaRow(TypedDict):
    gpu_model: str
    limit: int
    base: int
    used: int
    grant_until: str | None
    pending_request: bool


class RateLimit(TypedDict):
    window_s: int
    account_per_min: int
    account_remaining: int
    token_per_min: int | None
    token_remaining: int | None


class RedeployRequest(TypedDict):
    model: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any]]


class Region(TypedDict):
    slug: str
    name: str


class RegistryCredential(TypedDict):
    """A registry credential as every answer shows it: host and user name, never the password."""

    id: str
    host: str
    username: str
    created_by: str | None
    created_at: str
    updated_at: str


class RegistryCredentialCreateRequest(TypedDict):
    host: str
    username: str
    password: str


class RegistryCredentialUpdateRequest(TypedDict):
    username: str
    password: str


class RenameRequest(TypedDict):
    name: str


class Reservation(TypedDict):
    """A reservation as its holder sees it: where, what, when, and how many of its cards are in use."""

    id: int
    region: str
    gpu_model: str
    cards: int
    starts_at: str
    ends_at: str
    status: ReservationStatusEnum
    current: bool
    in_use: int


class ResizeRequest(TypedDict):
    node_count: int


class SSHKey(TypedDict):
    id: int
    name: str
    key_type: KeyTypeEnum
    bits: int
    fingerprint: str
    public_key: str
    created_at: str


class SSHKeyCreateRequest(TypedDict):
    name: NotRequired[str]
    public_key: str


class SavedImage(TypedDict):
    """An image an account saved from an instance: what the Images page shows, and what a launch names"""

    id: str
    name: str
    tag: str
    note: str
    status: SavedImageStatusEnum
    status_reason: str
    size_bytes: int
    billed_gb: int
    digest: str
    reference: str
    shared: bool
    source_instance: str | None
    saved_by: str
    imported_from: str
    platform: str
    follows_contract: bool | None
    created_at: str


class Secret(TypedDict):
    """A secret as every answer shows it: its name, size and dates. The value is never sent back."""

    name: str
    size: int
    created_by: str | None
    created_at: str
    updated_at: str


class SecretCreateRequest(TypedDict):
    name: str
    value: str


class SecretValueRequest(TypedDict):
    value: str


class SecurityEvent(TypedDict):
    id: int
    action: SecurityEventActionEnum
    action_label: str
    created_at: str
    ip: str | None
    user_agent: str
    device: str
    details: Any


class Series(TypedDict):
    range: GpuMetricsRangeEnum
    step_s: int
    source: str
    start: str
    end: str
    t: list[int]
    cards: list[CardSeries]
    processes: list[CardProcess]


class Share(TypedDict):
    id: int
    label: str
    url: str | None
    status: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None


class ShareCreateRequest(TypedDict):
    label: NotRequired[str]
    expires_at: NotRequired[str | None]


class Snapshot(TypedDict):
    """A snapshot of an instance's disk: its state, how far the copy has got, what it takes and bills."""

    id: str
    name: str
    instance: str
    kind: SnapshotKindEnum
    status: SnapshotStatusEnum
    status_reason: str
    progress: int
    size_bytes: int
    billed_gb: int
    taken_by: str
    created_at: str
    ready_at: str | None
    restored_at: str | None


class SnapshotCreateRequest(TypedDict):
    name: NotRequired[str]


class SnapshotSchedule(TypedDict):
    every_hours: int | None
    keep: NotRequired[int]
    next_at: str | None


class SnapshotScheduleRequest(TypedDict):
    every_hours: int | None
    keep: NotRequired[int]


class StaffQuotaApproveRequest(TypedDict):
    cards: NotRequired[int]
    days: NotRequired[int]
    message: NotRequired[str]
    reserve_region: NotRequired[str | None]
    reserve_starts_at: NotRequired[str | None]
    reserve_ends_at: NotRequired[str | None]


class StaffQuotaDenyRequest(TypedDict):
    message: str


class StaffQuotaRequest(TypedDict):
    """A request as staff review it: who asked, and its age against the review SLA while it waits."""

    id: int
    user: str
    gpu_model: str
    cards: int
    duration_days: int
    reason: str
    status: QuotaRequestStatusEnum
    granted_cards: int | None
    message: str
    decided_by: str | None
    decided_at: str | None
    expires_at: str | None
    created_at: str
    age_min: int | None
    sla_min: int
    overdue: bool


class StaffReservation(TypedDict):
    """A reservation as its holder sees it: where, what, when, and how many of its cards are in use."""

    id: int
    region: str
    gpu_model: str
    cards: int
    starts_at: str
    ends_at: str
    status: ReservationStatusEnum
    current: bool
    in_use: int
    account: str
    note: str
    created_by: str | None
    quota_request: int
    created_at: str


class StaffReservationCreateRequest(TypedDict):
    account: str
    region: str
    gpu_model: str
    cards: int
    starts_at: NotRequired[str | None]
    ends_at: str
    note: NotRequired[str]


class StartRequest(TypedDict):
    client_name: NotRequired[str]
    scope: NotRequired[ScopeEnum]


class Started(TypedDict):
    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int


class Statement(TypedDict):
    summary: MonthSummary
    lines: list[UsageLine]
    lines_total_fen: int
    by_member: list[Breakdown]
    by_resource: list[Breakdown]


class StatementMonths(TypedDict):
    results: list[MonthSummary]


class Step(TypedDict):
    code: str
    label: str
    state: StateEnum


class Team(TypedDict):
    slug: str
    name: str
    created_at: str
    role: str


class TeamCreateRequest(TypedDict):
    name: str


class TeamEvent(TypedDict):
    id: int
    created_at: str
    actor: str | None
    action: TeamEventActionEnum
    target: str
    details: Any


class TeamWallet(TypedDict):
    cash_fen: int
    trial_fen: int
    total_fen: int
    owed_fen: int
    burn_fen_per_hour: int
    runway_seconds: int | None


class Token(TypedDict):
    token: str


class TokenRequestRequest(TypedDict):
    device_code: str


class TopUpCreateRequest(TypedDict):
    amount: NotRequired[str]
    amount_fen: NotRequired[int]
    gateway: NotRequired[GatewayEnum]


class TopUpOrder(TypedDict):
    id: int
    amount_fen: int
    currency: NotRequired[str]
    status: NotRequired[TopUpOrderStatusEnum]
    gateway: str
    gateway_reference: NotRequired[str]
    checkout_qr: NotRequired[str]
    refunded_fen: NotRequired[int]
    created_at: NotRequired[str]
    paid_at: NotRequired[str | None]


class TopUpOrderCreated(TypedDict):
    id: int
    amount_fen: int
    currency: NotRequired[str]
    status: NotRequired[TopUpOrderStatusEnum]
    gateway: str
    gateway_reference: NotRequired[str]
    checkout_qr: NotRequired[str]
    refunded_fen: NotRequired[int]
    created_at: NotRequired[str]
    paid_at: NotRequired[str | None]
    checkout_url: str


class Transaction(TypedDict):
    id: int
    kind: TransactionKindEnum
    description: NotRequired[str]
    created_at: NotRequired[str]
    amount_fen: int
    cash_fen: int
    trial_fen: int
    metadata: NotRequired[Any]


class UsageLine(TypedDict):
    meter: int | None
    resource: str
    description: str
    start: str | None
    end: str | None
    seconds: int
    quantity: int
    unit: str
    price_fen: int
    amount_fen: int
    resource_key: str
    resource_label: str
    member_id: int | None
    member_label: str


class Volume(TypedDict):
    id: str
    name: str
    region: str
    size_gb: int
    resize_to_gb: int | None
    status: VolumeStatusEnum
    status_display: str
    status_reason: str
    used_bytes: int | None
    usage_checked_at: str | None
    cost_per_day_fen: int
    cost_month_fen: int
    attachments: list[Attachment]
    created_at: str
    status_changed_at: str


class VolumeCreateRequest(TypedDict):
    name: str
    region: str
    size_gb: int


class VolumeResizeRequest(TypedDict):
    size_gb: int


class WebhookEndpoint(TypedDict):
    id: str
    url: str
    active: NotRequired[bool]
    created_at: str


class WebhookEndpointCreated(TypedDict):
    id: str
    url: str
    active: NotRequired[bool]
    created_at: str
    secret: str


class WebhookEndpointRequest(TypedDict):
    url: str
    active: NotRequired[bool]


__all__ = [
    "APIToken",
    "APITokenCreateRequest",
    "APITokenCreated",
    "App",
    "AppParameter",
    "AppParameterKindEnum",
    "AttachRequest",
    "Attachment",
    "AutoStopRequest",
    "Balance",
    "Boot",
    "BootStage",
    "Breakdown",
    "CardProcess",
    "CardSeries",
    "Catalogue",
    "CategoryEnum",
    "CloneRequest",
    "CpuVariant",
    "DatasetEntry",
    "DatasetEntryTaskEnum",
    "Delivery",
    "DeployRequest",
    "Deployment",
    "DeploymentApiKey",
    "DeploymentCreated",
    "DirectionEnum",
    "Entry",
    "EntryPoints",
    "Error",
    "Event",
    "EventKindEnum",
    "ExperimentRun",
    "Fit",
    "FitEstimate",
    "FitRow",
    "GatewayEnum",
    "GpuCountEnum",
    "GpuMetricsRangeEnum",
    "GpuModel",
    "Image",
    "ImageBuildRequest",
    "ImageImportRequest",
    "ImagePull",
    "ImageRenameRequest",
    "ImageSaveRequest",
    "ImageShareRequest",
    "Instance",
    "InstanceSecretChoice",
    "InstanceSecretChoiceRequest",
    "InstanceSecretsRequest",
    "InstanceStartRequest",
    "InstanceStatusEnum",
    "InstanceTierEnum",
    "Invitation",
    "InvitationCreateRequest",
    "InvitationStatusEnum",
    "KeyTypeEnum",
    "LanguageEnum",
    "LaunchRequest",
    "LaunchTierEnum",
    "LaunchVolumeModeEnum",
    "LaunchVolumeRequest",
    "MarkReadRequest",
    "Member",
    "ModelEntry",
    "ModelEntryTaskEnum",
    "MoneyMoveRequest",
    "MoneyMoved",
    "MonthSummary",
    "NodeCountEnum",
    "Notification",
    "NotificationKindEnum",
    "NotificationsMarked",
    "PaginatedAPITokenList",
    "PaginatedAppList",
    "PaginatedAttachmentList",
    "PaginatedDatasetEntryList",
    "PaginatedDeliveryList",
    "PaginatedDeploymentList",
    "PaginatedEventList",
    "PaginatedInstanceList",
    "PaginatedInvitationList",
    "PaginatedMemberList",
    "PaginatedModelEntryList",
    "PaginatedNotificationList",
    "PaginatedQuotaRequestList",
    "PaginatedRegistryCredentialList",
    "PaginatedReservationList",
    "PaginatedSSHKeyList",
    "PaginatedSavedImageList",
    "PaginatedSecretList",
    "PaginatedSecurityEventList",
    "PaginatedStaffQuotaRequestList",
    "PaginatedStaffReservationList",
    "PaginatedTeamEventList",
    "PaginatedTeamList",
    "PaginatedTopUpOrderList",
    "PaginatedTransactionList",
    "PaginatedVolumeList",
    "PaginatedWebhookEndpointList",
    "PatchedMemberUpdateRequest",
    "PatchedProfileRequest",
    "PatchedSSHKeyUpdateRequest",
    "PatchedWebhookEndpointRequest",
    "Port",
    "PortCreateRequest",
    "Preference",
    "PreferenceRequest",
    "Preferences",
    "PreferencesRequest",
    "Profile",
    "QuotaRequest",
    "QuotaRequestRequest",
    "QuotaRequestStatusEnum",
    "QuotaRow",
    "RateLimit",
    "RedeployRequest",
    "Region",
    "RegistryCredential",
    "RegistryCredentialCreateRequest",
    "RegistryCredentialUpdateRequest",
    "RenameRequest",
    "Reservation",
    "ReservationStatusEnum",
    "ResizeRequest",
    "RoleEnum",
    "SSHKey",
    "SSHKeyCreateRequest",
    "SavedImage",
    "SavedImageStatusEnum",
    "ScopeEnum",
    "Secret",
    "SecretCreateRequest",
    "SecretValueRequest",
    "SecurityEvent",
    "SecurityEventActionEnum",
    "Series",
    "Share",
    "ShareCreateRequest",
    "Snapshot",
    "SnapshotCreateRequest",
    "SnapshotKindEnum",
    "SnapshotSchedule",
    "SnapshotScheduleRequest",
    "SnapshotStatusEnum",
    "SourceEnum",
    "StaffQuotaApproveRequest",
    "StaffQuotaDenyRequest",
    "StaffQuotaRequest",
    "StaffReservation",
    "StaffReservationCreateRequest",
    "StageEnum",
    "StartRequest",
    "Started",
    "StateEnum",
    "Statement",
    "StatementMonths",
    "Step",
    "Team",
    "TeamCreateRequest",
    "TeamEvent",
    "TeamEventActionEnum",
    "TeamWallet",
    "Token",
    "TokenRequestRequest",
    "TopUpCreateRequest",
    "TopUpOrder",
    "TopUpOrderCreated",
    "TopUpOrderStatusEnum",
    "Transaction",
    "TransactionKindEnum",
    "TypeEnum",
    "UsageLine",
    "Volume",
    "VolumeAttachmentModeEnum",
    "VolumeCreateRequest",
    "VolumeResizeRequest",
    "VolumeStatusEnum",
    "WebhookDeliveryStatusEnum",
    "WebhookEndpoint",
    "WebhookEndpointCreated",
    "WebhookEndpointRequest",
]
