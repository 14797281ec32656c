"""The framework part of the console's settings: Django, the database and Redis, sign-in, the REST API,
languages, static files and security headers. ``console.settings`` (the package) imports all of it,
then adds each app's block; ``DJANGO_SETTINGS_MODULE`` stays ``console.settings``.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parents[2]  # console/settings/base.py: the repository
VAR_DIR = Path(os.environ.get("CONSOLE_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# `make run` serves user content here (console.run passes its port): see CONSOLE_PROXY_HOST.
DEVELOPMENT_CONTENT_HOST = "apps.localhost:{port}"


def content_host_refusal(content_host: str, *, console_hosts: list[str], host_prefixed_cookies: bool) -> str:
    """Why production must not start with this user-content host ("" when it may).

    Without one, every author's script runs on the console's origin. The console's own name (or an
    instance's host under it being the console's) would be the same origin again; a subdomain of the
    console's name may set cookies for the console's domain, which only ``__Host-`` cookies are immune to.
    """
    name = content_host.rsplit(":", 1)[0].strip().lower().rstrip(".")
    if not name:
        return "CONSOLE_PROXY_HOST must name a domain of its own for user content when CONSOLE_ENV=production."
    for host in console_hosts:
        console = host.strip().lower().lstrip(".").rstrip(".")
        if not console or console == "*":
            continue
        if name == console:
            return f"CONSOLE_PROXY_HOST ({name}) must not be the console's own host."
        if name.endswith(f".{console}") and not host_prefixed_cookies:
            return (
                f"CONSOLE_PROXY_HOST ({name}) is under the console's host ({console}): "
                "set CONSOLE_COOKIE_HOST_PREFIX=1 (the console's cookies as __Host- cookies) or use another domain."
            )
    return ""


CONSOLE_ENV = os.environ.get("CONSOLE_ENV", "test" if "pytest" in sys.modules else "development")
PRODUCTION = CONSOLE_ENV == "production"
TESTING = CONSOLE_ENV == "test"

if PRODUCTION:
    try:
        SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
    except KeyError as exc:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when CONSOLE_ENV=production.") from exc
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be at least 50 random characters.")
    DEBUG = False
    ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS")
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must list the console's host names in production.")
else:
    # Development only: a fixed key so sessions survive restarts of `make run`.
    SECRET_KEY = os.environ.get(
        "DJANGO_SECRET_KEY", "dev-insecure-6f1c2b0e-only-for-local-development-never-production"
    )
    DEBUG = env_bool("DJANGO_DEBUG", default=not TESTING)
    ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")

CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    # PostgreSQL's own fields and indexes (metrics' BRIN indexes; its system checks want the app).
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "django_htmx",
    "allauth",
    "allauth.account",
    "allauth.mfa",  # second factors: TOTP, recovery codes, passkeys (accounts/two_factor.py)
    "channels",
    "console",
    "accounts",
    "identity",
    "billing",
    "invoices",
    "providers.simulated",
    "instances",
    "apps_marketplace",
    "storage",
    "idempotency",
    "devicelogin",
    "gateway",
    "ports",
    "metrics",
    "budgets",
    "teams",
    "vault",
    "notifications",
    "privacy",
]

MIDDLEWARE = [
    # Outermost: a request that failed because the database or Redis is down answers 503 with
    # Retry-After, not 500 (core/unavailable.py).
    "core.unavailable.DependencyUnavailableMiddleware",
    # Before anything reads the client's address: REMOTE_ADDR as trusted proxies say (core/proxies.py).
    "core.proxies.TrustedProxyMiddleware",
    "console.prometheus.RequestMetricsMiddleware",  # times the whole chain
    "console.logs.RequestIdMiddleware",  # every request's id, carried into its logs and tasks
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",  # SECURE_CSP on every page
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "teams.middleware.ActingContextMiddleware",  # request.principal: the account acted on (teams/context.py)
    "accounts.language.LanguageCookieMiddleware",  # the user's language into the cookie at log-in
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    # After authentication and allauth's: staff without a second factor reach only its enrolment.
    "accounts.two_factor.StaffSecondFactorMiddleware",
    # After it: a person with new terms or a new privacy policy to accept is asked first (privacy/middleware.py).
    "privacy.middleware.TermsAcceptanceMiddleware",
    "core.middleware.SynchronousChain",  # last: see its docstring
]

# The proxies in front of the console (addresses or networks): only they may say, in X-Forwarded-For,
# whom they serve; from anyone else the header is ignored and the connection's address is the client's.
# Loopback by default (a proxy on the same machine); behind nginx in compose or an Ingress, their
# network. The ASGI server runs with --no-proxy-headers: core.proxies decides alone.
CONSOLE_TRUSTED_PROXIES = env_list("CONSOLE_TRUSTED_PROXIES", "127.0.0.1/32,::1/128")
for _proxy in CONSOLE_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"CONSOLE_TRUSTED_PROXIES: {_proxy!r} is not an address or a network.") from None

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.console",
            ],
        },
    },
]

# --- Database and Redis ---------------------------------------------------------------------------
VAR_DIR.mkdir(parents=True, exist_ok=True)


def services_from_run_dir(path: Path) -> dict[str, str]:
    """The URLs `make run` recorded for its private servers (``KEY=value`` lines), if it ever started them."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line)


_recorded_services = services_from_run_dir(VAR_DIR / "run" / "services.env")
DATABASE_URL = os.environ.get("DATABASE_URL") or ("" if TESTING else _recorded_services.get("DATABASE_URL", ""))
if not DATABASE_URL:
    raise ImproperlyConfigured(
        "DATABASE_URL is not set: the console runs on PostgreSQL. `make run` starts a private server under "
        "var/ by itself; otherwise set DATABASE_URL=postgres://user:password@host:5432/dbname."
    )
# A pool of connections per process (psycopg_pool, through Django): under ASGI every request runs in a
# thread of its own, so without it each request connected anew (and PostgreSQL forked a process for
# it), and Celery workers did the same per task. Requests and tasks borrow a connection and give it
# back when they end. The test suite runs without one: its tests hold one connection in a transaction.
DATABASE_POOL = env_bool("DATABASE_POOL", default=not TESTING)
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        # With the pool, connections go back to it after each request (Django refuses both at once).
        conn_max_age=0 if DATABASE_POOL else int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
        # Checked when borrowed: a connection PostgreSQL dropped (a restart) is replaced, not handed out.
        conn_health_checks=True,
    )
}
if DATABASE_POOL:
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        # Few kept open while idle; up to max_size while busy (ASGI requests, a worker's tasks).
        "min_size": int(os.environ.get("DATABASE_POOL_MIN_SIZE", "1")),
        "max_size": int(os.environ.get("DATABASE_POOL_MAX_SIZE", "20")),
        # A request that cannot get a connection in this long fails rather than queueing for ever.
        "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT_S", "10")),
        # Connections older than this are replaced (PgBouncer or a failover may have moved on).
        "max_lifetime": 600,
    }
# Every connection starts in UTC, as Django wants it: otherwise (a server whose zone is "Etc/UTC", or
# anything but "UTC") Django sends SET TIME ZONE after connecting, a round trip more for every ASGI
# request and every task. (Behind PgBouncer, list "options" in its ignore_startup_parameters.)
_db_options = DATABASES["default"].setdefault("OPTIONS", {})
# Values travel apart from the SQL (server-side binding), and a statement run twice on a connection
# is prepared there: PostgreSQL parses and plans the statements of every launch once per connection,
# and psycopg no longer quotes each value into the text. Behind PgBouncer in transaction mode before
# 1.21, set DATABASE_PREPARE_THRESHOLD=off (prepared statements would land on another connection).
_db_options["server_side_binding"] = env_bool("DATABASE_SERVER_SIDE_BINDING", default=True)
_prepare = os.environ.get("DATABASE_PREPARE_THRESHOLD", "2").strip().lower()
if _db_options["server_side_binding"] and _prepare not in {"off", "none", ""}:
    _db_options["prepare_threshold"] = int(_prepare)
_db_options["options"] = " ".join(filter(None, [_db_options.get("options", ""), "-c TimeZone=UTC"]))
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured(
        f"DATABASE_URL must point at PostgreSQL (postgres://...), not {DATABASES['default']['ENGINE']}: billing "
        "and placement rely on its row locks, and the console is tested on nothing else."
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Request threads per web process (console.handlers): a request's middleware and view run on one of
# them; when all are busy, further requests wait for one (in the event loop, holding no thread).
# A lane is held only while a request's synchronous work runs (console.handlers): not while its body
# arrives, nor while its answer (a file download included) goes out. That work needs one core at most
# (one GIL), and the fewer requests share it at once, the sooner each finishes: bench/launch.py on two
# cores, medians of three, request → running p50 397 ms with 8 lanes, 248 ms with 4, at the same
# throughput. Raise it where views wait on slow services (an SMTP server, a payment gateway).
WEB_THREADS = int(os.environ.get("WEB_THREADS", "4"))

# The speed-ups built on other projects' internals (core/speedups.py): the web process's request
# handler (console.handlers, on Django's), Celery's Redis client per channel (console.broker, on
# kombu's) and the launch path's fixed statements (core.sql, on the ORM's). Each falls back to the
# stock behaviour when its variable is 0 (CONSOLE_SPEEDUP_HANDLERS=0 …), and by itself, logging why,
# on a Django or kombu outside the versions it was checked on.
CONSOLE_SPEEDUPS = {
    "handlers": env_bool("CONSOLE_SPEEDUP_HANDLERS", default=True),
    "broker": env_bool("CONSOLE_SPEEDUP_BROKER", default=True),
    "sql": env_bool("CONSOLE_SPEEDUP_SQL", default=True),
}

# --- Redis: cache, Celery broker, channel layer ------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL") or ("" if TESTING else _recorded_services.get("REDIS_URL", ""))


def redis_channel_layer(url: str) -> dict:
    """The Channels layer on Redis at ``url``.

    channels_redis waits for a consumer's next message with a blocking pop of 5 s, and redis-py's
    asyncio client times reads out after 5 s by default: on a quiet connection the read lost that race
    and the consumer died, dropping every live-status WebSocket after a few seconds of silence. A
    socket timeout well above the pop's keeps them open (a dead Redis is still noticed).
    """
    return {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": url, "socket_timeout": 30, "socket_connect_timeout": 5}]},
    }


# A page whose live socket is down (the channel layer unreachable, a proxy that drops WebSockets) polls
# its busy instances this often instead (console_tags.live_fallback_poll); with the socket open it never does.
CONSOLE_LIVE_FALLBACK_POLL_S = int(os.environ.get("CONSOLE_LIVE_FALLBACK_POLL_S", "4"))

if REDIS_URL:
    # One pool and one client per process (core.cache): Django's own opened a connection per request.
    CACHES = {"default": {"BACKEND": "core.cache.RedisCache", "LOCATION": REDIS_URL}}
    CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
    CELERY_BROKER_URL = REDIS_URL
    # kombu's Redis transport, one client per channel (or kombu's own: CONSOLE_SPEEDUPS["broker"])
    CELERY_BROKER_TRANSPORT = "console.broker:Transport"
elif TESTING:
    # The suite runs tasks eagerly in-process; the tests that cross processes set up Redis themselves.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
else:
    raise ImproperlyConfigured(
        "REDIS_URL is not set: the console's Celery broker, cache and live updates run on Redis. `make run` "
        "starts a private server under var/ by itself; otherwise set REDIS_URL=redis://host:6379/0."
    )

CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
# Tests run tasks in-process; a few start a real worker where crossing processes is the point.
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", default=TESTING)
CELERY_TASK_EAGER_PROPAGATES = True
# Celery's Django fix-up closes the database connections before and after every task, whatever
# CONN_MAX_AGE says; console.celery closes them as Django does after a request instead (too old, or
# broken), so a worker with DATABASE_CONN_MAX_AGE > 0 keeps its connection between tasks. This turns
# the fix-up's closing off (it would close once in this many tasks).
CELERY_DB_REUSE_MAX = 2**31
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Apps add their periodic tasks to this dict in their own blocks at the end of this file.
CELERY_BEAT_SCHEDULE: dict = {}

# --- Auth and accounts ----------------------------------------------------------------------------
AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
PASSWORD_HASHERS = (
    ["django.contrib.auth.hashers.MD5PasswordHasher"]  # tests only: hashing speed, not safety
    if TESTING
    else [
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.ScryptPasswordHasher",
    ]
)
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "account_login"

ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
# The sign-up form's required "I accept the terms and the privacy policy" box (privacy records it).
ACCOUNT_SIGNUP_FORM_CLASS = "accounts.forms.SignupTermsForm"
ACCOUNT_USER_MODEL_USERNAME_FIELD = None
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_CONFIRM_EMAIL_ON_GET = False
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_UNIQUE_EMAIL = True
ACCOUNT_LOGOUT_ON_PASSWORD_CHANGE = False
ACCOUNT_PRESERVE_USERNAME_CASING = False
ACCOUNT_EMAIL_SUBJECT_PREFIX = "[GPU Console] "
ACCOUNT_DEFAULT_HTTP_PROTOCOL = "https" if PRODUCTION else "http"
# allauth's messages name the person by e-mail; an account made by mobile number by its masked number.
ACCOUNT_USER_DISPLAY = "identity.display.user_display"
# allauth reads REMOTE_ADDR, which core.proxies has already set to the client as trusted proxies
# report it: counting proxies again here would take a client's own X-Forwarded-For for the truth.
ALLAUTH_TRUSTED_PROXY_COUNT = 0
# Abuse limits (allauth's format: count/period/scope). Exceeding one answers 429 with our page.
ACCOUNT_RATE_LIMITS = {
    "login": "30/m/ip",
    "login_failed": "10/m/ip,5/300s/key",
    "signup": "10/h/ip",
    "reset_password": "10/h/ip,3/h/key",
    "reset_password_from_key": "20/m/ip",
    "change_password": "5/m/user",
    "confirm_email": "1/180s/key",
    "manage_email": "10/m/user",
}
# Second factors (allauth.mfa, under /accounts/2fa/): an authenticator app (TOTP) with recovery codes, and
# passkeys (WebAuthn), which also sign in on their own from the log-in page. Optional for users, required for
# staff (accounts.two_factor). A wrong code counts against ACCOUNT_RATE_LIMITS["login_failed"] per person
# (allauth keys it "mfa-auth-user-<id>") and per address: the sixth in five minutes answers 429.
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes", "webauthn"]
MFA_ADAPTER = "accounts.two_factor.MFAAdapter"
MFA_FORMS = {
    "authenticate": "accounts.two_factor.AuthenticateForm",
    "reauthenticate": "accounts.two_factor.ReauthenticateForm",
    "activate_totp": "accounts.two_factor.ActivateTOTPForm",
}
MFA_PASSKEY_LOGIN_ENABLED = True
MFA_TOTP_ISSUER = ""  # the app lists the account under CONSOLE_SITE_NAME (accounts.two_factor.MFAAdapter)
# One period either side: a phone's clock a few seconds off still signs in; a code is good for 90 s at most.
MFA_TOTP_TOLERANCE = 1
# Passwordless passkey log-ins per address (allauth's default, written out: it has no secret to guess).
MFA_RATE_LIMITS = {"webauthn_login": "10/m/ip"}
# The most active (neither revoked nor expired) API tokens, and SSH keys, one person may hold: a cap a
# script gone wrong (or a stolen session) cannot grow past, each row being checked on sign-ins.
ACCOUNTS_MAX_API_TOKENS = int(os.environ.get("ACCOUNTS_MAX_API_TOKENS", "50"))
ACCOUNTS_MAX_SSH_KEYS = int(os.environ.get("ACCOUNTS_MAX_SSH_KEYS", "50"))
# Device log-ins (devicelogin/) are started by anyone, signed in or not: the expired ones are deleted
# by the beat (devicelogin.services.device_logins_prune), so the table holds minutes of them at most.
CELERY_BEAT_SCHEDULE["devicelogin-prune"] = {
    "task": "devicelogin.tasks.device_logins_prune_task",
    "schedule": 600.0,
    "options": {"expires": 600},
}

DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "GPU Console <noreply@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
if os.environ.get("EMAIL_HOST"):
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_HOST = os.environ["EMAIL_HOST"]
    EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "587"))
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
else:
    # Development without SMTP: the local mailbox (console/mail.py), one .eml file per message under
    # CONSOLE_DEV_MAILBOX_DIR that web and worker share, read at /dev/mail/ with links whole and
    # clickable, and a one-line notice per message in the log. Elsewhere the console backend.
    _default_email_backend = (
        "console.mail.DevMailboxBackend"
        if CONSOLE_ENV == "development"
        else "django.core.mail.backends.console.EmailBackend"
    )
    EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", _default_email_backend)
CONSOLE_DEV_MAILBOX_DIR = Path(os.environ.get("CONSOLE_DEV_MAILBOX_DIR", VAR_DIR / "mail"))

# --- REST API -------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # accounts' token checks (digest, expiry, read-only scope) plus the token's team (teams/authentication.py),
        # and 403 terms_not_accepted while the person has a new legal text to accept (privacy/authentication.py)
        "privacy.authentication.TermsTokenAuthentication",
        # DRF's, refusing a staff session without a second factor (accounts/two_factor.py), and as above
        "privacy.authentication.TermsSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "core.drf.Pagination",
    "PAGE_SIZE": 20,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.drf.exception_handler",
    # REMOTE_ADDR is already the client (core.proxies), and X-Forwarded-For is gone: DRF must not read
    # the header itself (its default, NUM_PROXIES None, would key the anonymous throttle on it).
    "NUM_PROXIES": 0,
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        # Per account (API_RATE_PER_MIN, or the account's own, set by staff) and per token where the
        # token has a limit of its own (accounts/throttles.py).
        "accounts.throttles.AccountRateThrottle",
        "accounts.throttles.TokenRateThrottle",
    ],
    # webhook_test: "Send test event" per user (notifications.throttles), on top of the account's.
    "DEFAULT_THROTTLE_RATES": {"anon": "60/min", "webhook_test": "5/min"},
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
# The API's requests a minute per account, for all its sessions and tokens together, where staff set no
# limit of the account's own (User.api_rate_per_min); a token may have a lower one (accounts/throttles.py).
API_RATE_PER_MIN = int(os.environ.get("API_RATE_PER_MIN", "1200"))
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Console API",
    "DESCRIPTION": "Launch and manage GPU instances, apps, storage and billing. "
    "Authenticate with `Authorization: Bearer <token>` (create tokens under Account → API tokens).\n\n"
    f"**Rate limits.** {API_RATE_PER_MIN} requests a minute per account, for all its sessions and tokens "
    "together (staff can set an account's own limit); a token created with `rate_per_min` is held to that "
    "too, within its account's. Without credentials: 60 a minute per address. Over a limit, every "
    "operation answers 429 with `Retry-After`, the seconds to wait; `GET /api/v1/account/rate-limit/` "
    "tells a credential its limits.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Served from our own static files: nothing loads from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Clients send JSON; the form parsers stay for the browsable API but are not documented
    # (a form field cannot say null).
    "PARSER_WHITELIST": ["rest_framework.parsers.JSONParser"],
    # Every 4xx in the one error format (core/drf.py), documented on every operation.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.drf.schema_error_responses",
        # OpenAPI links from each create to the operations on what it created (stateful clients follow them).
        "core.drf.schema_create_links",
    ],
}

# --- Internationalisation --------------------------------------------------------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = os.environ.get("TIME_ZONE", "Asia/Shanghai")
USE_I18N = True
USE_TZ = True

# --- Static files ---------------------------------------------------------------------------------
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not PRODUCTION

# --- Security -------------------------------------------------------------------------------------
# The console's cookies as ``__Host-`` cookies (Secure, Path=/, no Domain): the browser then refuses any
# that a sibling or a subdomain (a user-content host under the console's name) tries to set over them,
# so user content can neither fix a session nor plant a CSRF token. On in production.
CONSOLE_COOKIE_HOST_PREFIX = env_bool("CONSOLE_COOKIE_HOST_PREFIX", default=PRODUCTION)
if CONSOLE_COOKIE_HOST_PREFIX:
    SESSION_COOKIE_NAME = "__Host-sessionid"
    CSRF_COOKIE_NAME = "__Host-csrftoken"
    LANGUAGE_COOKIE_NAME = "__Host-django_language"
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = LANGUAGE_COOKIE_SECURE = True
# The device cookie that counts a browser's SMS codes (identity.views): the same prefix, and Secure with it.
IDENTITY_DEVICE_COOKIE_NAME = "__Host-identity_device" if CONSOLE_COOKIE_HOST_PREFIX else "identity_device"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Every console page: scripts, styles, fonts and images from the console's own origin only; no inline
# script, no eval (htmx is told: templates/base.html), no plugin, no <base>, no framing. Script
# injected into a page by a bug runs nowhere. Pages set ``style=""`` attributes (a meter's width), so
# inline styles are allowed for attributes only (style-src-attr), never as <style> elements; a browser
# without CSP level 3 falls back to style-src and merely draws those meters empty. No form-action: a
# log-in that goes on to /open/ (the hand-off to an instance's host) and a payment gateway's checkout
# are redirects after a form, which form-action would refuse.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "style-src-elem": [CSP.SELF],
    "style-src-attr": [CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(60 * 60 * 24 * 365)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    # The proxy check for `SECURE_SSL_REDIRECT` exempts health checks from the load balancer:
    # liveness and readiness (console/health.py).
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]

# LOG_FORMAT=json: one JSON object a line, with the request id carried into the tasks it enqueued
# (console/logs.py); the default is a line for people.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "context": {"()": "console.logs.ContextFilter"},
        "redact": {"()": "console.logs.RedactFilter"},
        "outage": {"()": "core.unavailable.OutageLogFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "console.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The loggers that write request paths: hand-off tokens, share links and reset keys are taken
        # out first (console.logs.RedactFilter). uvicorn's access lines go through our handler, not
        # uvicorn's own, which would write them as they are.
        "uvicorn.access": {"handlers": ["console"], "filters": ["redact"], "level": "INFO", "propagate": False},
        # A request that failed because a dependency is down is logged once per outage, not with a
        # traceback each (core.unavailable.OutageLogFilter).
        "django.request": {"filters": ["redact", "outage"]},
    },
}
