"""Settings for the GPU console.

Everything comes from the environment. The console runs on PostgreSQL (``DATABASE_URL``) and Redis
(``REDIS_URL``: Celery's broker, the cache and the Channels layer) in every configuration a user can
start: `make run` starts private servers under ``var/`` when the two are not given (``console.run``)
and records their URLs in ``var/run/services.env``, which is read here when the environment says
nothing, so ``manage.py`` commands typed by hand meanwhile reach the same servers. Only the test
suite (``CONSOLE_ENV=test``) swaps Redis for in-process stand-ins: eager tasks, a local-memory cache
and the in-memory channel layer. ``CONSOLE_ENV=production`` turns on the hardened settings that pass
``manage.py check --deploy`` and refuses to start without a real secret key and allowed hosts.

The framework's part (Django, database, Redis, sign-in, the API, languages, static files, security) is
``console/settings/base.py``, imported whole below; this module adds each app's block.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from console.settings.base import *  # noqa: F403 (the framework's settings, then each app's below)

# What the apps' blocks below read or extend of the framework's part, named.
from console.settings.base import (
    ALLOWED_HOSTS,
    BASE_DIR,
    CELERY_BEAT_SCHEDULE,
    CONSOLE_COOKIE_HOST_PREFIX,
    DEBUG,
    DEVELOPMENT_CONTENT_HOST,
    LOGGING,
    PRODUCTION,
    SECRET_KEY,
    SPECTACULAR_SETTINGS,
    TEMPLATES,
    TESTING,
    VAR_DIR,
    _recorded_services,
    content_host_refusal,
    env_bool,
    env_list,
)

# --- The console's own settings -------------------------------------------------------------------
# Seconds a client is told to wait (Retry-After) when the database or Redis is down (core/unavailable.py).
CONSOLE_UNAVAILABLE_RETRY_AFTER_S = 5
CONSOLE_SITE_NAME = os.environ.get("CONSOLE_SITE_NAME", "GPU Console")

# --- Demo parts: the simulated cloud and the simulated payment gateway (console/demo.py) -----------
# Both are on by default (PROVISIONING_BACKENDS["default"], BILLING_PAYMENT_GATEWAY below), so that a
# console runs with no provider and no merchant account. Production refuses them (`check --deploy`
# fails, console.checks) unless this says the console is a demo; any console running one shows a
# banner naming it on every page.
CONSOLE_DEMO_MODE = env_bool("CONSOLE_DEMO_MODE", default=not PRODUCTION)
# API tokens: how long an unused token's last-used time may lag (one write per interval, not per call).
API_TOKEN_LAST_USED_RESOLUTION = timedelta(seconds=60)

# --- Billing ---------------------------------------------------------------------------------------
BILLING_TRIAL_CREDIT_FEN = int(os.environ.get("BILLING_TRIAL_CREDIT_FEN", "1000"))  # ¥10.00
BILLING_TRIAL_CREDIT_TTL_DAYS = int(os.environ.get("BILLING_TRIAL_CREDIT_TTL_DAYS", "0")) or None  # None: never expires
BILLING_MIN_RUNWAY_S = int(os.environ.get("BILLING_MIN_RUNWAY_S", str(10 * 60)))  # a launch must be paid this long

# --- Billing: settlement, checks, running out of money (billing-meter) --------------------------------
BILLING_SETTLE_INTERVAL_S = int(os.environ.get("BILLING_SETTLE_INTERVAL_S", "60"))  # the settlement tick
BILLING_SETTLE_BATCH_SIZE = int(os.environ.get("BILLING_SETTLE_BATCH_SIZE", "25000"))  # meters per transaction
BILLING_LOW_BALANCE_WARNING_S = int(os.environ.get("BILLING_LOW_BALANCE_WARNING_S", "3600"))  # warn below this runway
BILLING_OUT_OF_FUNDS_GRACE_S = int(os.environ.get("BILLING_OUT_OF_FUNDS_GRACE_S", "300"))  # then apply the policy
# What running out of money does, once per episode (billing/alerts.py, the one reader): "stop" what
# runs (billing.hooks.out_of_funds: instances stops the machines, keeping their disks), or "notify"
# only (nothing stops; the usage becomes debt, for consoles whose users are billed afterwards).
BILLING_OUT_OF_FUNDS_POLICY = os.environ.get("BILLING_OUT_OF_FUNDS_POLICY", "stop")
if BILLING_OUT_OF_FUNDS_POLICY not in ("stop", "notify"):
    raise ImproperlyConfigured(
        f"BILLING_OUT_OF_FUNDS_POLICY is 'stop' or 'notify', not {BILLING_OUT_OF_FUNDS_POLICY!r}."
    )
BILLING_LEDGER_CHECK_INTERVAL_S = int(os.environ.get("BILLING_LEDGER_CHECK_INTERVAL_S", "3600"))
# The hour (UTC, as Celery beat keeps time) the daily reconciliation compares yesterday's gateway bills
# with the ledger: 03:30 UTC is 11:30 in Beijing, when Alipay's and WeChat Pay's bills are ready.
BILLING_RECONCILIATION_HOUR = int(os.environ.get("BILLING_RECONCILIATION_HOUR", "3"))
CELERY_BEAT_SCHEDULE.update(
    {
        # A tick that could not start within its interval is dropped: the next one covers it.
        "billing-settle-meters": {
            "task": "billing.tasks.meters_settle_task",
            "schedule": BILLING_SETTLE_INTERVAL_S,
            "options": {"expires": BILLING_SETTLE_INTERVAL_S},
        },
        "billing-balance-alerts": {
            "task": "billing.tasks.balance_alerts_task",
            "schedule": BILLING_SETTLE_INTERVAL_S,
            "options": {"expires": BILLING_SETTLE_INTERVAL_S},
        },
        "billing-ledger-check": {
            "task": "billing.tasks.ledger_check_task",
            "schedule": BILLING_LEDGER_CHECK_INTERVAL_S,
        },
        "billing-trial-expiry": {"task": "billing.tasks.trial_expire_task", "schedule": 3600},
        "billing-topup-orders-expiry": {"task": "billing.tasks.topup_orders_expire_task", "schedule": 3600},
        "billing-refunds-confirm": {"task": "billing.tasks.refunds_confirm_task", "schedule": 600},
        # Gateways' platform certificates (WeChat Pay's): fetched on a schedule, never because a
        # notification named one (billing.gateways.wechatpay).
        "billing-gateway-certificates": {
            "task": "billing.tasks.gateway_certificates_refresh_task",
            "schedule": 6 * 3600,
        },
        # Yesterday's bills: Alipay's are ready after 09:00 and WeChat Pay's after 10:00 (Beijing time).
        "billing-reconciliation": {
            "task": "billing.tasks.reconciliation_task",
            "schedule": crontab(hour=BILLING_RECONCILIATION_HOUR, minute=30),
        },
    }
)

# --- Billing: top-ups, the payment gateway, the low-balance banner ---------------------------------
# The payment gateway, a dotted path like Django's e-mail backends; the simulated one is embedded.
BILLING_PAYMENT_GATEWAY = os.environ.get("BILLING_PAYMENT_GATEWAY", "billing.gateways.simulated.SimulatedGateway")
# The shared secret of the gateway's webhook signatures (HMAC-SHA256). A real gateway's secret comes
# from its dashboard and must be set in production; the simulated gateway signs its own webhooks, so
# when unset there it uses a secret derived from SECRET_KEY (see billing.gateways.base.webhook_secret).
BILLING_GATEWAY_WEBHOOK_SECRET = os.environ.get(
    "BILLING_GATEWAY_WEBHOOK_SECRET", "" if PRODUCTION else "dev-webhook-secret"
)
# More gateways offered beside that one (comma-separated dotted paths): the top-up page lets the payer
# choose. The real adapters: billing.gateways.alipay.AlipayGateway (page pay),
# billing.gateways.alipay.AlipayQRGateway (scan to pay), billing.gateways.wechatpay.WeChatPayGateway
# (Native QR), billing.gateways.stripe_checkout.StripeGateway (cards). Each reads its keys below;
# `check --deploy` warns about an enabled one that lacks them (billing.checks).
BILLING_EXTRA_PAYMENT_GATEWAYS = env_list("BILLING_EXTRA_PAYMENT_GATEWAYS", "")
# The console's public https origin: gateways post their notifications to <this>/billing/webhooks/<name>/.
BILLING_NOTIFY_BASE_URL = os.environ.get("BILLING_NOTIFY_BASE_URL", "")
# Alipay (开放平台 app, RSA2 keys): key files in PEM, never in the repository.
ALIPAY_APP_ID = os.environ.get("ALIPAY_APP_ID", "")
ALIPAY_APP_PRIVATE_KEY_FILE = os.environ.get("ALIPAY_APP_PRIVATE_KEY_FILE", "")
ALIPAY_PUBLIC_KEY_FILE = os.environ.get("ALIPAY_PUBLIC_KEY_FILE", "")
ALIPAY_SANDBOX = env_bool("ALIPAY_SANDBOX", default=False)
# WeChat Pay API v3 (merchant certificate's private key and serial, APIv3 key, platform certificates).
WECHATPAY_MCH_ID = os.environ.get("WECHATPAY_MCH_ID", "")
WECHATPAY_APP_ID = os.environ.get("WECHATPAY_APP_ID", "")
WECHATPAY_PRIVATE_KEY_FILE = os.environ.get("WECHATPAY_PRIVATE_KEY_FILE", "")
WECHATPAY_CERT_SERIAL_NO = os.environ.get("WECHATPAY_CERT_SERIAL_NO", "")
WECHATPAY_APIV3_KEY = os.environ.get("WECHATPAY_APIV3_KEY", "")
WECHATPAY_PLATFORM_CERT_DIR = os.environ.get("WECHATPAY_PLATFORM_CERT_DIR", "")
# Or public-key mode (WeChat Pay's newer scheme): its public key's PEM file and id (PUB_KEY_ID_…).
WECHATPAY_PUBLIC_KEY_FILE = os.environ.get("WECHATPAY_PUBLIC_KEY_FILE", "")
WECHATPAY_PUBLIC_KEY_ID = os.environ.get("WECHATPAY_PUBLIC_KEY_ID", "")
# Stripe: the secret API key and the webhook endpoint's signing secret (whsec_…).
STRIPE_SECRET_KEY = os.environ.get("STRIPE_SECRET_KEY", "")
STRIPE_WEBHOOK_SECRET = os.environ.get("STRIPE_WEBHOOK_SECRET", "")
# The built-in adapters verify notifications with their own keys; only a gateway using the console's
# shared HMAC scheme needs BILLING_GATEWAY_WEBHOOK_SECRET.
if PRODUCTION and not BILLING_GATEWAY_WEBHOOK_SECRET and not BILLING_PAYMENT_GATEWAY.startswith("billing.gateways."):
    raise ImproperlyConfigured("BILLING_GATEWAY_WEBHOOK_SECRET must be set when CONSOLE_ENV=production.")
BILLING_GATEWAY_WEBHOOK_TOLERANCE_S = 300  # a signed webhook older or newer than this is refused
BILLING_TOPUP_MIN_FEN = int(os.environ.get("BILLING_TOPUP_MIN_FEN", "100"))  # ¥1
BILLING_TOPUP_MAX_FEN = int(os.environ.get("BILLING_TOPUP_MAX_FEN", "5000000"))  # ¥50,000
BILLING_TOPUP_PRESETS_FEN = [1000, 5000, 10000, 50000]  # ¥10, ¥50, ¥100, ¥500
BILLING_TOPUP_ORDER_TTL_S = 24 * 3600  # a pending order expires after a day (a late payment still credits)
TEMPLATES[0]["OPTIONS"]["context_processors"].append("billing.context_processors.low_balance")
# The staff menu's badge: quota requests waiting for a decision (one COUNT, only for staff, only when shown).
TEMPLATES[0]["OPTIONS"]["context_processors"].append("instances.context_processors.quota_waiting")
# The header's bell: the unread notifications (one COUNT, only when a full page's header shows it).
TEMPLATES[0]["OPTIONS"]["context_processors"].append("notifications.context_processors.unread")

# --- Notifications (notifications/): the inbox, e-mail in the user's language, signed webhooks ------
# Webhooks to private, loopback, link-local or reserved addresses (SSRF): refused unless this is on.
NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE = env_bool("NOTIFICATIONS_WEBHOOK_ALLOW_PRIVATE", default=DEBUG)
# http:// (not https) accepted for localhost endpoints outside production: development and tests.
NOTIFICATIONS_WEBHOOK_ALLOW_HTTP_LOCALHOST = not PRODUCTION
NOTIFICATIONS_WEBHOOK_CONNECT_TIMEOUT_S = 3.0
NOTIFICATIONS_WEBHOOK_READ_TIMEOUT_S = 5.0
# The whole POST, answer included: the timeouts above bound one read each, this bounds them all, so a
# receiver dripping a byte every few seconds holds a worker this long at most.
NOTIFICATIONS_WEBHOOK_DEADLINE_S = float(os.environ.get("NOTIFICATIONS_WEBHOOK_DEADLINE_S", "10"))
NOTIFICATIONS_WEBHOOK_MAX_ATTEMPTS = 8  # then the delivery is marked failed
NOTIFICATIONS_WEBHOOK_BACKOFF_S = 30  # 30 s, 1 min, 2 min… between attempts, at most an hour
NOTIFICATIONS_WEBHOOKS_PER_USER = 5
NOTIFICATIONS_KEEP_DAYS = 180  # inbox lines older than this are pruned (read or not), once a day
NOTIFICATIONS_WEBHOOK_DELIVERIES_KEEP_DAYS = 30  # finished deliveries and their attempts
NOTIFICATIONS_EMAIL_MAX_ATTEMPTS = 8  # e-mails refused or unsent, on the same backoff; then marked failed
# A pending e-mail or webhook delivery due longer ago than this lost its task: the sweep enqueues it again.
NOTIFICATIONS_SWEEP_AFTER_S = 300
CELERY_BEAT_SCHEDULE["notifications-prune"] = {
    "task": "notifications.tasks.notifications_prune_task",
    "schedule": 86400.0,
}
CELERY_BEAT_SCHEDULE["notifications-sweep"] = {
    "task": "notifications.tasks.notifications_sweep_task",
    "schedule": 120.0,
}

# --- Instance proxy and the local runtime (console/reverse_proxy.py, providers/local/runtime/) ------------
# The proxy serves /i/<instance-id>/lab/ and /i/<instance-id>/code/ to the instance's owner only.
CONSOLE_PROXY_PREFIX = "/i/"
# resolve(*, instance_id, service, user) -> core.user_content.ProxyTarget | None (None: a 404); the
# resolver is set with the instances settings below (instances.proxy_targets.instance_proxy_target).
# Origins other than the console's own that may open WebSockets / POST through the proxy.
CONSOLE_PROXY_TRUSTED_ORIGINS = env_list("CONSOLE_PROXY_TRUSTED_ORIGINS")
# The host of user content (see console/reverse_proxy.py): each instance's servers at <label>.<it>, never on the
# console's own origin, where an author's script could read the console's pages and call its API with
# the visitor's session. Development defaults to a subdomain of localhost (browsers resolve *.localhost
# to the loopback address, no DNS needed; `make run` passes its port); production must name one; only
# the test suite serves user content on the console's host unless a test sets it.
CONSOLE_PROXY_HOST = os.environ.get(
    "CONSOLE_PROXY_HOST", "" if TESTING or PRODUCTION else DEVELOPMENT_CONTENT_HOST.format(port=8000)
)
if PRODUCTION:
    _content_host_refusal = content_host_refusal(
        CONSOLE_PROXY_HOST, console_hosts=ALLOWED_HOSTS, host_prefixed_cookies=CONSOLE_COOKIE_HOST_PREFIX
    )
    if _content_host_refusal:
        raise ImproperlyConfigured(_content_host_refusal)
# Signing in there (console/proxy_handoff.py): the console's page that hands off, the one-time token's
# life, and the user host's own cookie (its name and how long it lasts).
CONSOLE_PROXY_HANDOFF_PATH = "/open/"
CONSOLE_PROXY_HANDOFF_TTL_S = 60
CONSOLE_PROXY_COOKIE_NAME = "console_content"
CONSOLE_PROXY_COOKIE_AGE_S = int(os.environ.get("CONSOLE_PROXY_COOKIE_AGE_S", str(12 * 3600)))
LOCAL_RUNTIME = {
    "ROOT": Path(os.environ.get("LOCAL_RUNTIME_ROOT", BASE_DIR / "var/instances")),
    "PORT_LOW": int(os.environ.get("LOCAL_RUNTIME_PORT_LOW", "20000")),
    "PORT_HIGH": int(os.environ.get("LOCAL_RUNTIME_PORT_HIGH", "29999")),
    # Cards offered when the host has no NVIDIA GPU (nvidia-smi missing or finds none).
    "SIMULATED_GPUS": int(os.environ.get("LOCAL_RUNTIME_SIMULATED_GPUS", "8")),
    # The public models and datasets (the catalogues' mount paths: /models/<org>/<name>), read-only in
    # every local instance: put weights and data here once, and every instance and app reads them.
    "PUBLIC_MOUNTS": {
        "/models": Path(os.environ.get("LOCAL_PUBLIC_MODELS_DIR", BASE_DIR / "var/public/models")),
        "/datasets": Path(os.environ.get("LOCAL_PUBLIC_DATASETS_DIR", BASE_DIR / "var/public/datasets")),
    },
}
# The proxy's upstream client would log every proxied request at INFO.
LOGGING["loggers"]["httpx"] = {"level": "WARNING"}
LOGGING["loggers"]["httpcore"] = {"level": "WARNING"}

# --- Instances -------------------------------------------------------------------------------------
# The simulated cloud's demo fleet: 8-card nodes of every seeded model in both regions (560 cards).
SIMULATED_FLEET = [
    {"region": region, "gpu": gpu, "nodes": nodes, "cards": 8}
    for region in ("cn-north-1", "cn-east-1")
    for gpu, nodes in (
        ("h200", 3),
        ("h800", 4),
        ("a800-80g", 8),
        ("a100-40g", 4),
        ("l40s", 5),
        ("rtx-4090", 8),
        ("rtx-3090", 3),
    )
]
# Regions and backends. Each alias is one provider (a backend class and its OPTIONS); each region
# (instances.models.Region, edited in the admin) names the alias that serves it in ``backend_alias``.
# Several backends run at once: the reconciler, placement, the launch page, the staff fleet page and
# billing all work per region, and a region only ever uses its own backend's nodes. A backend that
# serves one region of its own declares it in OPTIONS as REGION (its slug) and REGION_NAME;
# ``manage.py seed_demo`` (instances.catalogue.catalogue_seed) then creates that region, mapped to the
# alias. The simulated cloud ("default") serves the demo regions cn-north-1 and cn-east-1. Nodes
# report a GPU model by its catalogue slug (h200, a800-80g, ...). For example:
#
#     PROVISIONING_BACKENDS = {
#         # The simulated cloud: nodes in its own tables, machines that boot in BOOT_DELAY_S.
#         "default": {"BACKEND": "providers.simulated.backend.SimulatedBackend", "OPTIONS": {"FLEET": SIMULATED_FLEET}},
#         # This host: JupyterLab, VS Code and sshd processes on its GPUs (CONSOLE_LOCAL_BACKEND=1 below).
#         "local": {
#             "BACKEND": "providers.local.backend.LocalBackend",
#             "OPTIONS": {"REGION": "local", "REGION_NAME": "This host"},
#         },
#         # A Slurm cluster through slurmrestd: each instance is a job holding its GPUs.
#         "hpc": {
#             "BACKEND": "providers.slurm.backend.SlurmBackend",
#             "OPTIONS": {"REGION": "cn-north-hpc", "REGION_NAME": "Beijing HPC (Slurm)",
#                         "ROOT": "/shared/console/instances", "PARTITION": "gpu",
#                         "REST_URL": "http://slurm-ctl:6820", "REST_USER": "console",
#                         "JWT_KEY_FILE": "/etc/console/slurm-jwt.key", "TENANT_USERS": "site"},
#         },
#         # A Kubernetes cluster: each instance is a pod with nvidia.com/gpu limits.
#         "k8s": {
#             "BACKEND": "providers.kubernetes.backend.KubernetesBackend",
#             "OPTIONS": {"REGION": "cn-east-k8s", "REGION_NAME": "Shanghai (Kubernetes)",
#                         "KUBECONFIG": "/etc/console/kubeconfig", "NAMESPACE": "gpu-instances"},
#         },
#     }
#
# (Each backend's module docstring lists its own OPTIONS.) Deployments that cannot edit this file
# set CONSOLE_PROVISIONING_BACKENDS to a JSON object of the same shape: its aliases are added to (or
# replace) the ones here, and an alias set to null removes one (``{"default": null}``: no simulated cloud).
PROVISIONING_BACKENDS = {
    "default": {
        "BACKEND": "providers.simulated.backend.SimulatedBackend",
        "OPTIONS": {
            "FLEET": SIMULATED_FLEET,
            "BOOT_DELAY_S": float(os.environ.get("SIMULATED_BOOT_DELAY_S", "0" if TESTING else "15")),
            # Instances survive a node failure: restarted elsewhere with their disks (instances.services).
            "DISK_FOLLOWS": True,
            # Volumes' files, for the file browser (the simulated machines never see them).
            "VOLUMES_DIR": str(VAR_DIR / "simulated-volumes"),
            # Images a node has not cached are pulled at 400 MB/s (an 8.9 GB PyTorch image: 22 s, shown
            # as progress on the instance page); every node starts with the first catalogue image.
            "PULL_BYTES_PER_S": 0 if TESTING else 400_000_000,
            "PRECACHED": [] if TESTING else ["pytorch-2.5-cu124"],
            # A demo's outage switch: the cloud does not answer while this file exists (make soak).
            "UNREACHABLE_FILE": str(VAR_DIR / "faults" / "simulated-unreachable"),
        },
    },
}
INSTANCES_DEFAULT_GPU_QUOTA = int(os.environ.get("INSTANCES_DEFAULT_GPU_QUOTA", "8"))  # cards per model
INSTANCES_DISK_DEFAULT_GB = 50
# The OCI registry the catalogue's images are published to (``images_publish``) and machines pull from:
# ``host:port`` with an optional path prefix (``registry.example.com/console``). `make run` starts a
# private one on 127.0.0.1 and records it in var/run/services.env; production names its own (README).
CONSOLE_REGISTRY = os.environ.get("CONSOLE_REGISTRY") or (
    "" if TESTING else _recorded_services.get("CONSOLE_REGISTRY", "")
)
CONSOLE_REGISTRY_USERNAME = os.environ.get("CONSOLE_REGISTRY_USERNAME", "")
CONSOLE_REGISTRY_PASSWORD = os.environ.get("CONSOLE_REGISTRY_PASSWORD", "")
# Off only for a registry on plain HTTP (make run's, on the loopback address): every other one has TLS.
_registry_recorded = not os.environ.get("CONSOLE_REGISTRY") and not TESTING  # make run's own, from services.env
CONSOLE_REGISTRY_TLS_VERIFY = env_bool(
    "CONSOLE_REGISTRY_TLS_VERIFY",
    default=not (_registry_recorded and _recorded_services.get("CONSOLE_REGISTRY_TLS_VERIFY") == "0"),
)
# Tenants' own Unix uids and host uid ranges (instances.tenancy): above the host's people (useradd's
# 1000-59999) and above the subordinate ranges useradd hands out (100000 onwards, 65536 each).
INSTANCES_TENANT_USER_PREFIX = "gpuc-t"
INSTANCES_TENANT_UID_START = 70000
INSTANCES_TENANT_SUBUID_START = 1 << 24
INSTANCES_TENANT_SUBUID_COUNT = 65536
# Seconds each process keeps the active regions, GPU models and images (instances/catalogue_cache.py).
INSTANCES_CATALOGUE_CACHE_S = float(os.environ.get("INSTANCES_CATALOGUE_CACHE_S", "5"))
# The most nodes one instance (a multi-node cluster) may span; the choices are powers of two up to it.
INSTANCES_MAX_NODES = int(os.environ.get("INSTANCES_MAX_NODES", "8"))
INSTANCES_DISK_MIN_GB = 20
INSTANCES_DISK_MAX_GB = 2048
INSTANCES_DISK_PRICE_FEN_PER_GB_DAY = int(os.environ.get("INSTANCES_DISK_PRICE_FEN_PER_GB_DAY", "1"))  # ¥0.01
# A saved image (Save as image), per GB-day (GiB, rounded up) while it exists: a disk's price by default.
# A save as image whose task vanished is enqueued again after this long, and fails after the deadline.
INSTANCES_IMAGE_SAVE_REDRIVE_S = int(os.environ.get("INSTANCES_IMAGE_SAVE_REDRIVE_S", "600"))
INSTANCES_IMAGE_SAVE_DEADLINE_S = int(os.environ.get("INSTANCES_IMAGE_SAVE_DEADLINE_S", "3600"))
# The console's image builder (Images → Build, instances/services/image_build.py): what one build may use,
# the network its steps get ("none", or "tenant": the owner's instance network behind its firewall), the
# provider that builds (empty: the first that can), the largest recipe, and the log's tail kept.
INSTANCES_IMAGE_BUILD_CPUS = float(os.environ.get("INSTANCES_IMAGE_BUILD_CPUS", "2"))
INSTANCES_IMAGE_BUILD_MEMORY_GB = float(os.environ.get("INSTANCES_IMAGE_BUILD_MEMORY_GB", "4"))
INSTANCES_IMAGE_BUILD_PIDS = int(os.environ.get("INSTANCES_IMAGE_BUILD_PIDS", "1024"))
INSTANCES_IMAGE_BUILD_TIMEOUT_S = int(os.environ.get("INSTANCES_IMAGE_BUILD_TIMEOUT_S", "1800"))
INSTANCES_IMAGE_BUILD_GRACE_S = int(os.environ.get("INSTANCES_IMAGE_BUILD_GRACE_S", "600"))
INSTANCES_IMAGE_BUILD_NETWORK = os.environ.get("INSTANCES_IMAGE_BUILD_NETWORK", "none")
INSTANCES_IMAGE_BUILD_BACKEND = os.environ.get("INSTANCES_IMAGE_BUILD_BACKEND", "")
INSTANCES_IMAGE_BUILD_RECIPE_MAX_BYTES = int(os.environ.get("INSTANCES_IMAGE_BUILD_RECIPE_MAX_BYTES", str(1 << 20)))
INSTANCES_IMAGE_BUILD_LOG_BYTES = int(os.environ.get("INSTANCES_IMAGE_BUILD_LOG_BYTES", str(64 << 10)))
INSTANCES_IMAGE_PRICE_FEN_PER_GB_DAY = int(
    os.environ.get("INSTANCES_IMAGE_PRICE_FEN_PER_GB_DAY", str(INSTANCES_DISK_PRICE_FEN_PER_GB_DAY))
)
# A snapshot of an instance's disk, per GB-day (GiB, rounded up) while it exists: a disk's price by default.
INSTANCES_SNAPSHOT_PRICE_FEN_PER_GB_DAY = int(
    os.environ.get("INSTANCES_SNAPSHOT_PRICE_FEN_PER_GB_DAY", str(INSTANCES_DISK_PRICE_FEN_PER_GB_DAY))
)
# A snapshot or restore whose task vanished fails after this long (the owner takes or restores it again).
INSTANCES_SNAPSHOT_DEADLINE_S = int(os.environ.get("INSTANCES_SNAPSHOT_DEADLINE_S", "3600"))
# The most snapshots one instance keeps (manual and scheduled together).
INSTANCES_SNAPSHOTS_MAX = int(os.environ.get("INSTANCES_SNAPSHOTS_MAX", "20"))
# Bring your own image: the registries (hosts, with their port) an account may import images from, and
# pull them from at launch; empty: the console's own registry alone. Those on plain HTTP (no TLS): the
# console's own when CONSOLE_REGISTRY_TLS_VERIFY is off, and these. An import reads the image's manifest
# and config only, each answer within IMAGES_IMPORT_TIMEOUT_S; an image for another platform than the
# hosts' (os/architecture, as OCI names it) is refused.
IMAGES_ALLOWED_REGISTRIES = env_list("IMAGES_ALLOWED_REGISTRIES", "")
IMAGES_INSECURE_REGISTRIES = env_list("IMAGES_INSECURE_REGISTRIES", "")
IMAGES_IMPORT_TIMEOUT_S = float(os.environ.get("IMAGES_IMPORT_TIMEOUT_S", "10"))
IMAGES_PLATFORM = os.environ.get("IMAGES_PLATFORM", "linux/amd64")
# No-GPU mode (a stopped instance started without cards, to install packages or move data): its price
# per hour and the CPU/RAM allowance its machine gets instead of the cards' share.
INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR = int(os.environ.get("INSTANCES_NO_GPU_PRICE_FEN_PER_HOUR", "10"))  # ¥0.10
INSTANCES_NO_GPU_CPUS = float(os.environ.get("INSTANCES_NO_GPU_CPUS", "0.5"))
INSTANCES_NO_GPU_MEMORY_GB = int(os.environ.get("INSTANCES_NO_GPU_MEMORY_GB", "2"))
INSTANCES_POLL_INTERVAL_S = 2  # how soon a worker looks again at a booting machine
INSTANCES_PROVISION_TIMEOUT_S = 15 * 60  # a boot that takes longer has failed
INSTANCES_OPERATION_TIMEOUT_S = 10 * 60  # stop/start/restart/release: re-driven, then given up
# The reconciler's period (beat): it reads node health from the providers on each pass, so a node's
# failure is seen, and its instances restarted elsewhere, within about this long after the provider
# marks the node down (a Slurm node failure to Running elsewhere: under 60 s, README "Node failure").
INSTANCES_RECONCILE_INTERVAL_S = 10
# Seconds an interruptible instance gets between its preemption and power-off: its checkpoint's time.
INSTANCES_PREEMPTION_GRACE_S = int(os.environ.get("INSTANCES_PREEMPTION_GRACE_S", "30"))
# A service credit per interruption: when a running instance's node fails and the console restarts it
# elsewhere (or queues it for room), its owner is credited this many fen, once per incident. 0: off.
INSTANCES_INCIDENT_CREDIT_FEN = int(os.environ.get("INSTANCES_INCIDENT_CREDIT_FEN", "0"))
# How old a running instance's saved entry points (JupyterLab, VS Code, SSH) may grow before the
# reconciler asks its provider again; pages never ask (instances.entry_points).
INSTANCES_ENTRY_POINTS_REFRESH_S = 600
INSTANCES_QUOTA_MAX_DAYS = 365
# The promise to users: a quota request is decided within this many minutes. Staff are e-mailed at once,
# the staff menu counts what waits, and the review page sorts by this deadline (overdue first).
INSTANCES_QUOTA_REVIEW_SLA_MIN = int(os.environ.get("INSTANCES_QUOTA_REVIEW_SLA_MIN", "30"))
# How long before an idle auto-stop its owner is warned (e-mail and a console notice, with "Keep running").
INSTANCES_AUTO_STOP_WARNING_S = int(os.environ.get("INSTANCES_AUTO_STOP_WARNING_S", "600"))
CELERY_BEAT_SCHEDULE.update(
    {
        # Scheduled snapshots that are due, and retention (idempotent: a schedule's next time moves by CAS).
        "instances-snapshots-scheduled": {
            "task": "instances.tasks.snapshots_scheduled_task",
            "schedule": 300.0,
        },
        "instances-reconcile": {
            "task": "instances.tasks.instances_reconcile_task",
            "schedule": float(INSTANCES_RECONCILE_INTERVAL_S),
        },
        "instances-auto-stop": {"task": "instances.tasks.instances_auto_stop_task", "schedule": 30.0},
        # The W&B runs a running instance's programs started, read off its disk for its page.
        "instances-experiment-runs": {"task": "instances.tasks.instances_experiment_runs_task", "schedule": 60.0},
        "instances-quota-expire": {"task": "instances.tasks.quota_grants_expire_task", "schedule": 300.0},
        # Reserved capacity whose window ended (placement already ignores it): marked expired.
        "instances-reservations-expire": {"task": "instances.tasks.reservations_expire_task", "schedule": 60.0},
        # A request past INSTANCES_QUOTA_REVIEW_SLA_MIN: staff are e-mailed once more (once per request).
        "instances-quota-overdue": {"task": "instances.tasks.quota_requests_overdue_task", "schedule": 60.0},
    }
)
INSTANCES_REDRIVE_AFTER_S = 60  # a busy instance whose task vanished is re-driven after this long
# Benchmarks and multi-tenant brokers can give the console's tasks a queue of their own.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
# Webhook deliveries and e-mail go to queues of their own, served by a worker of their own (`make run`,
# deploy/): a user whose receivers are slow (or who presses "Send test" in a loop) fills those queues,
# never the one that launches, stops and bills machines.
CELERY_WEBHOOKS_QUEUE = os.environ.get("CELERY_WEBHOOKS_QUEUE", "webhooks")
CELERY_MAIL_QUEUE = os.environ.get("CELERY_MAIL_QUEUE", "mail")
# Saving, building and snapshotting images and disks copy gigabytes for minutes (a build up to
# INSTANCES_IMAGE_BUILD_TIMEOUT_S): a queue and a worker of their own, so a user's builds never hold the
# worker that launches, stops and bills machines, and time limits that fit the copy.
CELERY_IMAGES_QUEUE = os.environ.get("CELERY_IMAGES_QUEUE", "images")
INSTANCES_DISK_COPY_TIME_LIMIT_S = int(os.environ.get("INSTANCES_DISK_COPY_TIME_LIMIT_S", "3600"))
_IMAGE_TASKS = (
    "instances.tasks.image_save_task",
    "instances.tasks.image_build_task",
    "instances.tasks.snapshot_create_task",
    "instances.tasks.snapshot_restore_task",
)
CELERY_TASK_ROUTES = {
    "notifications.tasks.webhook_deliver_task": {"queue": CELERY_WEBHOOKS_QUEUE},
    "notifications.tasks.email_send_task": {"queue": CELERY_MAIL_QUEUE},
    **{name: {"queue": CELERY_IMAGES_QUEUE} for name in _IMAGE_TASKS},
}
# Every task has a time limit: the soft one raises SoftTimeLimitExceeded in the task (it may clean up),
# the hard one kills the worker process running it, so nothing holds a worker forever. Tasks that
# legitimately run longer (the sweeps over every account) get their own below; the deliveries' hard
# limits stay under their row's lease (notifications.services.ATTEMPT_LEASE_S, 120 s), so the sweep
# never enqueues an attempt again while the first may still be running.
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("CELERY_TASK_SOFT_TIME_LIMIT", "240"))
CELERY_TASK_TIME_LIMIT = int(os.environ.get("CELERY_TASK_TIME_LIMIT", "300"))
_LONG_SWEEP = {"soft_time_limit": 900, "time_limit": 960}
CELERY_TASK_ANNOTATIONS = {
    "notifications.tasks.webhook_deliver_task": {
        "soft_time_limit": int(NOTIFICATIONS_WEBHOOK_DEADLINE_S) + 30,
        "time_limit": int(NOTIFICATIONS_WEBHOOK_DEADLINE_S) + 60,
    },
    "notifications.tasks.email_send_task": {"soft_time_limit": 60, "time_limit": 90},
    "billing.tasks.meters_settle_task": _LONG_SWEEP,
    "billing.tasks.reconciliation_task": _LONG_SWEEP,
    "billing.tasks.ledger_check_task": _LONG_SWEEP,
    "instances.tasks.instances_reconcile_task": _LONG_SWEEP,
    "metrics.tasks.metrics_maintain_task": _LONG_SWEEP,
    "storage.tasks.volumes_refresh_task": _LONG_SWEEP,
    # The builder stops its own build at the timeout; the grace covers the push after it.
    "instances.tasks.image_build_task": {
        "soft_time_limit": INSTANCES_IMAGE_BUILD_TIMEOUT_S + INSTANCES_IMAGE_BUILD_GRACE_S,
        "time_limit": INSTANCES_IMAGE_BUILD_TIMEOUT_S + INSTANCES_IMAGE_BUILD_GRACE_S + 60,
    },
    **{
        name: {"soft_time_limit": INSTANCES_DISK_COPY_TIME_LIMIT_S, "time_limit": INSTANCES_DISK_COPY_TIME_LIMIT_S + 60}
        for name in _IMAGE_TASKS
        if name != "instances.tasks.image_build_task"
    },
}
# Name the "status" enums in the API schema: with instances and quota requests beside top-up orders,
# one field name has several choice sets, which drf-spectacular would otherwise name by hash.
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {}).update(
    {
        "InstanceStatusEnum": "instances.models.Instance.Status",
        "QuotaRequestStatusEnum": "instances.models.QuotaRequest.Status",
        "ReservationStatusEnum": "instances.models.Reservation.Status",
        "TopUpOrderStatusEnum": "billing.models.TopUpOrder.Status",
    }
)

# --- The local backend: this host as a provider (providers/local/backend.py) ----------------------
# CONSOLE_LOCAL_BACKEND=1 adds the region "local" ("This host"), whose one node is this host's GPUs
# (or LOCAL_BACKEND_SIMULATED_GPUS simulated LOCAL_BACKEND_GPU_NAME cards when it has none), and whose
# instances are real JupyterLab, VS Code (code-server) and sshd processes (install them: make local-deps).
if env_bool("CONSOLE_LOCAL_BACKEND", False):
    PROVISIONING_BACKENDS["local"] = {
        "BACKEND": "providers.local.backend.LocalBackend",
        "OPTIONS": {
            "REGION": "local",
            "REGION_NAME": "This host",
            "NODE": os.environ.get("LOCAL_BACKEND_NODE", ""),
            "SIMULATED_GPUS": int(os.environ.get("LOCAL_BACKEND_SIMULATED_GPUS", LOCAL_RUNTIME["SIMULATED_GPUS"])),
            "SIMULATED_GPU_NAME": os.environ.get("LOCAL_BACKEND_GPU_NAME", "NVIDIA H200"),
        },
    }

# --- The Slurm backend: a Slurm cluster as a provider (providers/slurm/backend.py) ----------------
# An instance is a Slurm job asking for gpu:TYPE:N through GRES; the job runs providers.slurm.job on
# its node(s), which starts JupyterLab / code-server / sshd there. Pointing it at a real cluster:
#
#   PROVISIONING_BACKENDS["slurm"] = {
#       "BACKEND": "providers.slurm.backend.SlurmBackend",
#       "OPTIONS": {
#           "REGION": "hpc-1", "REGION_NAME": "HPC cluster",
#           "ROOT": "/shared/console/instances",       # on a filesystem the console and all nodes share
#           "GPU_TYPES": {"h200": "h200", "a100": "a100-40g"},  # Slurm GRES type -> GPU model slug
#           "PARTITION": "gpu", "SBATCH_ARGS": ["--account=console"],
#           "REST_URL": "http://slurm-head:6820", "REST_USER": "console",  # slurmrestd with JWT (never root) ...
#           "JWT_KEY_FILE": "/etc/console/slurm-jwt.key",  # ... mints each tenant's token (jobs run as tenants)
#           "TENANT_USERS": "site",                     # LDAP/SSSD provides gpuc-t<N>; "create": useradd here
#           # without REST_URL: sbatch/squeue/scancel/sinfo, reading SLURM_CONF
#           "PYTHON": "/shared/console/.venv/bin/python", "CONSOLE_DIR": "/shared/console",
#       },
#   }
#
# CONSOLE_SLURM_BACKEND=1 (with `make run`, which then starts it) adds the region "slurm-local": the
# 3-node cluster scripts/slurm-cluster.sh runs on this host, through slurmrestd (JWT).
if env_bool("CONSOLE_SLURM_BACKEND", False):
    _slurm_dir = BASE_DIR / "var/slurm"
    PROVISIONING_BACKENDS["slurm"] = {
        "BACKEND": "providers.slurm.backend.SlurmBackend",
        "OPTIONS": {
            "REGION": "slurm-local",
            "REGION_NAME": "Slurm cluster (this host)",
            "ROOT": Path(os.environ.get("SLURM_BACKEND_ROOT", BASE_DIR / "var/slurm-instances")),
            "SLURM_CONF": os.environ.get("SLURM_CONF", str(_slurm_dir / "etc/slurm.conf")),
            "REST_URL": os.environ.get("SLURM_REST_URL", "http://127.0.0.1:6820"),
            # Reads as an unprivileged user; each job as its tenant, with a token minted from the
            # cluster's JWT key. The console creates the tenants' users on this host.
            "REST_USER": "nobody",
            "JWT_KEY_FILE": str(_slurm_dir / "etc/jwt.key"),
            "TENANT_USERS": "create",
            "TENANT_HOME_ROOT": str(_slurm_dir / "tenants"),
            # The console's Python as the tenants reach it (scripts/slurm-cluster.sh env).
            **(
                {"PYTHON": str(_slurm_dir / "venvs/console/bin/python3")}
                if (_slurm_dir / "venvs/console/bin/python3").exists()
                else {}
            ),
            **(
                {"JUPYTER_BIN": str(_slurm_dir / "venvs/jupyter/bin/jupyter")}
                if (_slurm_dir / "venvs/jupyter/bin/jupyter").exists()
                else {}
            ),
        },
    }


# --- A Kubernetes cluster as a provider (providers/kubernetes/) -----------------------------------
# KUBERNETES_BACKEND_OPTIONS, a JSON object of the backend's OPTIONS, adds the backend "kubernetes" and
# its region (OPTIONS["REGION"], default "k8s"), e.g. '{"KUBECONFIG": "/etc/console/kubeconfig",
# "NAMESPACE": "gpu-console", "REGION": "k8s-1", "REGION_NAME": "GPU cluster"}'. See the README.
if os.environ.get("KUBERNETES_BACKEND_OPTIONS"):
    try:
        _kubernetes_options = json.loads(os.environ["KUBERNETES_BACKEND_OPTIONS"])
    except ValueError as exc:
        raise ImproperlyConfigured(f"KUBERNETES_BACKEND_OPTIONS is not JSON: {exc}") from exc
    if not isinstance(_kubernetes_options, dict):
        raise ImproperlyConfigured("KUBERNETES_BACKEND_OPTIONS must be a JSON object.")
    PROVISIONING_BACKENDS["kubernetes"] = {
        "BACKEND": "providers.kubernetes.backend.KubernetesBackend",
        "OPTIONS": {"REGION": "k8s", "REGION_NAME": "Kubernetes", **_kubernetes_options},
    }


def _backends_from_env(raw: str) -> dict:
    """CONSOLE_PROVISIONING_BACKENDS: ``{alias: {"BACKEND": dotted path, "OPTIONS": {...}} | null}``."""
    try:
        extra = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"CONSOLE_PROVISIONING_BACKENDS is not valid JSON: {exc}") from exc
    if not isinstance(extra, dict):
        raise ImproperlyConfigured("CONSOLE_PROVISIONING_BACKENDS must be a JSON object of aliases.")
    for alias, config in extra.items():
        if config is not None and not (
            isinstance(config, dict)
            and isinstance(config.get("BACKEND"), str)
            and isinstance(config.get("OPTIONS", {}), dict)
        ):
            raise ImproperlyConfigured(
                f"CONSOLE_PROVISIONING_BACKENDS[{alias!r}] needs a BACKEND (a dotted path) and optional OPTIONS."
            )
    return extra


for _alias, _config in _backends_from_env(os.environ.get("CONSOLE_PROVISIONING_BACKENDS", "") or "{}").items():
    if _config is None:
        PROVISIONING_BACKENDS.pop(_alias, None)
    else:
        PROVISIONING_BACKENDS[_alias] = {"BACKEND": _config["BACKEND"], "OPTIONS": _config.get("OPTIONS", {})}
# The host name in the SSH command the instance page shows; empty: the host the browser used.
INSTANCES_SSH_HOST = os.environ.get("INSTANCES_SSH_HOST", "")
# --- The SSH gateway (gateway/): `ssh -p 2222 <instance>@host` reaches any instance on any backend ----------
# Its own process (`python -m gateway`, started by `make run`). Off: no gateway key is installed on new
# instances and pages show no gateway command (the process refuses to start). Off in the test suite unless
# a test turns it on (gateway/tests), so other apps' tests see only their providers' entry points.
GATEWAY_ENABLED = env_bool("GATEWAY_ENABLED", not TESTING)
GATEWAY_BIND = os.environ.get("GATEWAY_BIND", "0.0.0.0")  # noqa: S104 (a public endpoint by design)
GATEWAY_PORT = int(os.environ.get("GATEWAY_PORT", "2222"))
# The host name in the gateway command pages show; empty: the host the browser used.
GATEWAY_HOST = os.environ.get("GATEWAY_HOST", "")
# Derives each instance's gateway key and the gateway's host key (so every replica answers with the same
# host key and no key is stored). Changing it locks the gateway out of instances launched before.
GATEWAY_KEY_SECRET = os.environ.get("GATEWAY_KEY_SECRET", "") or SECRET_KEY
# A host key file of its own instead of the derived one (an existing OpenSSH private key).
GATEWAY_HOST_KEY_FILE = os.environ.get("GATEWAY_HOST_KEY_FILE", "")
# How long the gateway waits for an instance's sshd to accept its key.
GATEWAY_CONNECT_TIMEOUT_S = float(os.environ.get("GATEWAY_CONNECT_TIMEOUT_S", "15"))
# The file browser's and the files API's SFTP work for one request, login included: an instance that
# stops answering mid-transfer (or a file that never ends) frees the request's lane after this long.
GATEWAY_FILES_DEADLINE_S = int(os.environ.get("GATEWAY_FILES_DEADLINE_S", "120"))
# A machine whose user server crashes is restarted; this many crashes within the window fail it.
INSTANCES_CRASH_LIMIT = int(os.environ.get("INSTANCES_CRASH_LIMIT", "3"))
INSTANCES_CRASH_WINDOW_S = int(os.environ.get("INSTANCES_CRASH_WINDOW_S", "600"))

# --- Storage: shared volumes (storage/) ------------------------------------------------------------
# Billed per GB-day through a billing meter (SKU "volume-gb-day", storage: it keeps running when the
# money runs out); a resize closes the meter and opens one at the new size.
STORAGE_VOLUME_PRICE_FEN_PER_GB_DAY = int(os.environ.get("STORAGE_VOLUME_PRICE_FEN_PER_GB_DAY", "2"))  # ¥0.02
STORAGE_VOLUME_MIN_GB = 1
STORAGE_VOLUME_MAX_GB = int(os.environ.get("STORAGE_VOLUME_MAX_GB", "16384"))
STORAGE_VOLUME_QUOTA_GB = int(os.environ.get("STORAGE_VOLUME_QUOTA_GB", "4096"))  # per user, all volumes together
# Where volumes may be mounted in an instance: at one of these directories or below it.
STORAGE_MOUNT_ROOTS = ("/mnt", "/data", "/datasets", "/models", "/workspace")
STORAGE_USAGE_REFRESH_S = int(os.environ.get("STORAGE_USAGE_REFRESH_S", "300"))
# A volume file browser's call that walks folders (a listing, the size check before a chunk) gives up
# with a 504 after this long, so a volume of millions of files cannot hold a web request's lane.
STORAGE_FILES_DEADLINE_S = int(os.environ.get("STORAGE_FILES_DEADLINE_S", "30"))
CELERY_BEAT_SCHEDULE.update(
    {
        "storage-volumes-refresh": {
            "task": "storage.tasks.volumes_refresh_task",
            "schedule": float(STORAGE_USAGE_REFRESH_S),
            "options": {"expires": STORAGE_USAGE_REFRESH_S},
        },
    }
)
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"].update(
    {
        "VolumeStatusEnum": "storage.models.Volume.Status",
        "VolumeAttachmentModeEnum": "storage.models.VolumeAttachment.Mode",
        "NotificationKindEnum": "notifications.models.Kind",
        "WebhookDeliveryStatusEnum": "notifications.models.WebhookDelivery.Status",
    }
)

# --- One-click deploy (apps_marketplace.services) ---------------------------------------------------
# The instances image a deployment's instance boots; the app's container image runs on it.
APPS_DEPLOY_BASE_IMAGE = os.environ.get("APPS_DEPLOY_BASE_IMAGE", "cuda-12.4-ubuntu22.04")

# --- Idempotency keys (idempotency/) -----------------------------------------------------------------
# A POST that creates or spends may carry an Idempotency-Key; keys are kept this long, then pruned.
IDEMPOTENCY_KEY_TTL_S = 24 * 3600
CELERY_BEAT_SCHEDULE.update(
    {"idempotency-keys-prune": {"task": "idempotency.tasks.idempotency_keys_prune_task", "schedule": 3600.0}}
)

# --- GPU metrics (metrics/): per-card samples of running instances, rollups, charts ------------------
# Every METRICS_SAMPLE_INTERVAL_S the worker asks each provider for its running machines' cards
# (providers.base.GpuMetricsCapability) and stores one row per card; every METRICS_ROLLUP_S the raw rows
# of the last METRICS_ROLLUP_LOOKBACK_S are folded into 5-minute buckets. Raw rows are kept
# METRICS_RAW_RETENTION_S (charts up to 6 hours read them), rollups METRICS_ROLLUP_RETENTION_DAYS (the
# day and week charts). bench/metrics.py measures what that holds for 10,000 instances.
METRICS_SAMPLE_INTERVAL_S = int(os.environ.get("METRICS_SAMPLE_INTERVAL_S", "15"))
METRICS_ROLLUP_S = 300
METRICS_ROLLUP_LOOKBACK_S = 1800
METRICS_RAW_RETENTION_S = int(os.environ.get("METRICS_RAW_RETENTION_S", str(7 * 3600)))
METRICS_ROLLUP_RETENTION_DAYS = int(os.environ.get("METRICS_ROLLUP_RETENTION_DAYS", "8"))
# Auto-stop's idle judgement from the samples (every engine): a card below this utilisation is idle (the
# local backend's own check uses the same 5 %), and an instance with no sample for METRICS_IDLE_STALE_S
# is not judged at all (its provider is silent: unknown is not idle).
METRICS_IDLE_BELOW_PCT = int(os.environ.get("METRICS_IDLE_BELOW_PCT", "5"))
METRICS_IDLE_STALE_S = 120
# The statement's idle-waste line counts idle stretches (every card below METRICS_IDLE_BELOW_PCT) of
# at least this many minutes, recorded per instance and day (metrics.models.IdleDay) every hour.
METRICS_IDLE_WASTE_MIN_MINUTES = int(os.environ.get("METRICS_IDLE_WASTE_MIN_MINUTES", "15"))
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"].update({"GpuMetricsRangeEnum": "metrics.selectors.RANGE_CHOICES"})
CELERY_BEAT_SCHEDULE.update(
    {
        # A tick that could not start within its interval is dropped: the next one samples afresh.
        "metrics-collect": {
            "task": "metrics.tasks.metrics_collect_task",
            "schedule": float(METRICS_SAMPLE_INTERVAL_S),
            "options": {"expires": METRICS_SAMPLE_INTERVAL_S},
        },
        "metrics-maintain": {
            "task": "metrics.tasks.metrics_maintain_task",
            "schedule": float(METRICS_ROLLUP_S),
            "options": {"expires": METRICS_ROLLUP_S},
        },
        "metrics-idle-days": {
            "task": "metrics.tasks.metrics_idle_days_task",
            "schedule": 3600.0,
            "options": {"expires": 3600},
        },
    }
)

# --- Budgets (budgets/): a monthly limit per user, alerts at 50/80/100 %, an optional hard cap -------
CELERY_BEAT_SCHEDULE.update(
    {
        "budgets-check": {
            "task": "budgets.tasks.budgets_check_task",
            "schedule": float(BILLING_SETTLE_INTERVAL_S),
            "options": {"expires": BILLING_SETTLE_INTERVAL_S},
        },
    }
)

# --- The console's own metrics (console/prometheus.py): GET /metrics for Prometheus --------------------
# With a token, a scrape sends "Authorization: Bearer <token>"; without one, only these networks may scrape.
CONSOLE_METRICS_TOKEN = os.environ.get("CONSOLE_METRICS_TOKEN", "")
CONSOLE_METRICS_ALLOWED_IPS = env_list("CONSOLE_METRICS_ALLOWED_IPS", "127.0.0.1/32,::1/128")

# --- Teams (teams/): a team is an account that its members act on, with roles and an audit log --------
# Hours an invitation link works; the periodic task marks the older ones expired.
TEAMS_INVITATION_TTL_H = int(os.environ.get("TEAMS_INVITATION_TTL_H", "168"))
TEMPLATES[0]["OPTIONS"]["context_processors"].append("teams.context_processors.acting_context")
CELERY_BEAT_SCHEDULE.update(
    {
        "teams-invitations-expire": {
            "task": "teams.tasks.invitations_expire_task",
            "schedule": 600.0,
            "options": {"expires": 600},
        },
    }
)

# --- Secrets (vault/): a user's or a team's named values, encrypted, given to chosen instances at boot ----
# Fernet keys (comma-separated, newest first) for the values at rest; empty: derived from SECRET_KEY
# and SECRET_KEY_FALLBACKS (vault/crypto.py says why). Changing them without keeping the old one
# among them makes the stored values unreadable (instances then boot without them).
VAULT_KEYS = env_list("VAULT_KEYS", "")
# A value's size: tokens and small key files, not datasets (each is a file in a 64 MiB tmpfs folder).
VAULT_VALUE_MAX_BYTES = int(os.environ.get("VAULT_VALUE_MAX_BYTES", "65536"))
VAULT_MAX_SECRETS = int(os.environ.get("VAULT_MAX_SECRETS", "100"))  # per account (a person or a team)

# --- Identity: mobile numbers, real names, one trial per person (identity/; README "Identity") ---------
# Texts go through IDENTITY_SMS_BACKEND: identity.sms.aliyun.AliyunSender or identity.sms.tencent.TencentSender
# with IDENTITY_SMS_OPTIONS (JSON: keys, sign name, template), or, outside production by default, the
# development texts inbox (/dev/texts/). With no sender at all, log-in by mobile number is not offered.
IDENTITY_SMS_SENDER = {
    "BACKEND": os.environ.get("IDENTITY_SMS_BACKEND", "" if PRODUCTION else "identity.sms.dev.DevTextsSender"),
    "OPTIONS": json.loads(os.environ.get("IDENTITY_SMS_OPTIONS", "{}")),
}
IDENTITY_PHONE_LOGIN = bool(IDENTITY_SMS_SENDER["BACKEND"])
IDENTITY_DEV_TEXTS_DIR = Path(os.environ.get("IDENTITY_DEV_TEXTS_DIR", VAR_DIR / "texts"))
IDENTITY_SMS_CODE_TTL_S = 300  # a code is good for five minutes, once
IDENTITY_SMS_MAX_ATTEMPTS = 5  # wrong tries that kill a code (a million codes, five guesses)
IDENTITY_SMS_RESEND_S = 60  # one text per number a minute
# Texts per (count, window in seconds): per number, per client address, per device (a cookie).
IDENTITY_SMS_LIMITS = {"number": (5, 3600), "ip": (20, 3600), "device": (10, 3600)}
# The key of the HMACs that make numbers and ID numbers comparable without keeping them (one trial per
# person). Never change it once trials are claimed; derived from SECRET_KEY unless set.
IDENTITY_HASH_KEY = os.environ.get("IDENTITY_HASH_KEY", "") or f"identity:{SECRET_KEY}"
# Real-name verification: the provider of individuals' checks (identity.realname.tencent.TencentIdCardProvider
# with IDENTITY_REAL_NAME_OPTIONS, JSON). Outside production the offline test provider, which says yes to
# any valid number; in production none unless set (individuals' checks are then not offered).
IDENTITY_REAL_NAME_PROVIDER = {
    "BACKEND": os.environ.get(
        "IDENTITY_REAL_NAME_BACKEND", "" if PRODUCTION else "identity.realname.test.TestRealNameProvider"
    ),
    "OPTIONS": json.loads(os.environ.get("IDENTITY_REAL_NAME_OPTIONS", "{}")),
}
IDENTITY_REAL_NAME_DAILY_TRIES = 5  # refused checks per account a day (each costs money at the provider)
# On (a China deployment): paid top-ups and launches need a verified real name. Off: they do not.
IDENTITY_REAL_NAME_REQUIRED = env_bool("IDENTITY_REAL_NAME_REQUIRED", default=False)
# What the trial credit needs: "email" (a verified address), "phone", "real_name" or "phone_or_real_name".
IDENTITY_TRIAL_REQUIRES = os.environ.get("IDENTITY_TRIAL_REQUIRES", "email")
if IDENTITY_TRIAL_REQUIRES not in {"email", "phone", "real_name", "phone_or_real_name"}:
    raise ImproperlyConfigured("IDENTITY_TRIAL_REQUIRES is one of email, phone, real_name, phone_or_real_name.")
if IDENTITY_TRIAL_REQUIRES == "phone" and not IDENTITY_PHONE_LOGIN:
    raise ImproperlyConfigured(
        "IDENTITY_TRIAL_REQUIRES=phone needs an SMS sender (IDENTITY_SMS_BACKEND): no number could be verified."
    )
IDENTITY_DOCUMENTS_DIR = Path(os.environ.get("IDENTITY_DOCUMENTS_DIR", VAR_DIR / "identity-documents"))
IDENTITY_DOCUMENT_MAX_BYTES = 5 * 2**20
CELERY_BEAT_SCHEDULE["identity-codes-prune"] = {
    "task": "identity.tasks.phone_codes_prune_task",
    "schedule": 3600.0,
    "options": {"expires": 3600},
}
# --- Privacy: legal texts, the data export, account deletion (privacy/) ---------------------------------
# Days between a deletion request and the release of the account's resources; the user may cancel until then.
PRIVACY_DELETION_GRACE_DAYS = int(os.environ.get("PRIVACY_DELETION_GRACE_DAYS", "7"))
# How long a finished export can be downloaded before its ZIP is deleted.
PRIVACY_EXPORT_TTL_HOURS = int(os.environ.get("PRIVACY_EXPORT_TTL_HOURS", "72"))
# Exports one person may ask for in 24 hours (one at a time in any case), and the largest ZIP one may make.
PRIVACY_EXPORTS_PER_DAY = int(os.environ.get("PRIVACY_EXPORTS_PER_DAY", "3"))
PRIVACY_EXPORT_MAX_BYTES = int(os.environ.get("PRIVACY_EXPORT_MAX_BYTES", str(200 * 1024 * 1024)))
# A build "building" for longer than this was lost with its worker: a repeat of its task may claim it.
PRIVACY_EXPORT_STALE_S = 1800
# The key of the address hash a completed deletion keeps (HMAC-SHA256): rotating it orphans old hashes.
PRIVACY_HASH_KEY = os.environ.get("PRIVACY_HASH_KEY", SECRET_KEY)
# How long a process trusts its copy of which legal texts are in force (each signed-in request asks).
PRIVACY_TERMS_CACHE_S = int(os.environ.get("PRIVACY_TERMS_CACHE_S", "30"))
CELERY_BEAT_SCHEDULE["privacy-deletions"] = {
    "task": "privacy.tasks.deletions_due_task",
    "schedule": 300.0,
    "options": {"expires": 300},
}
CELERY_BEAT_SCHEDULE["privacy-exports-expire"] = {
    "task": "privacy.tasks.data_exports_expire_task",
    "schedule": 3600.0,
    "options": {"expires": 3600},
}
