"""Switchyard settings, read from environment variables.

With no environment at all the service starts locally on a SQLite file and in-process caches.
Production sets DEBUG=false, SECRET_KEY, ALLOWED_HOSTS, DATABASE_URL and REDIS_URL; see
docs/operations.md.
"""

import base64
import ipaddress
import logging
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean environment variable; anything but a clear yes/no is refused."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use true or false.")


def env_int(name: str, default: int) -> int:
    """Read a whole number (zero or more) from the environment; anything else is refused."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number of zero or more.")
    return value


def env_list(name: str, default: str) -> list[str]:
    """Read a comma-separated environment variable."""
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_fernet_keys(name: str) -> list[str]:
    """Read comma-separated Fernet keys; a value that is not one is refused."""
    keys = env_list(name, "")
    for number, key in enumerate(keys, start=1):
        try:
            valid = len(base64.urlsafe_b64decode(key.encode())) == 32
        except ValueError:
            valid = False
        if not valid:
            raise ImproperlyConfigured(
                f"{name}: key {number} is not a Fernet key (32 url-safe base64 bytes). Generate "
                'one with: python -c "from cryptography.fernet import Fernet; '
                'print(Fernet.generate_key().decode())"'
            )
    return keys


# Local starts get debugging and a throwaway key; a production start (DEBUG=false) must bring
# its own key, so a deployment can never run signed with the key published in this file.
DEBUG = env_bool("DEBUG", default=True)
INSECURE_DEFAULT_SECRET_KEY = "django-insecure-switchyard-local-development-only"
SECRET_KEY = os.environ.get("SECRET_KEY", INSECURE_DEFAULT_SECRET_KEY)
if not DEBUG and SECRET_KEY == INSECURE_DEFAULT_SECRET_KEY:
    raise ImproperlyConfigured(
        "DEBUG is false but SECRET_KEY is not set: set SECRET_KEY to a long random value, e.g. "
        "SECRET_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(50))')."
    )

# Provider secrets (headers, env) are encrypted at rest with these Fernet keys: the first
# encrypts, all decrypt, so a new key goes first and `manage.py rotate_secrets` re-encrypts.
# Unset, a key derived from SECRET_KEY is used and `check` warns (`check --deploy` fails).
SWITCHYARD_SECRETS_KEYS = env_fernet_keys("SWITCHYARD_SECRETS_KEY")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # django-ninja as an app: /api/v1/docs then renders its own template with the Swagger UI
    # files the package ships (served by WhiteNoise), not the CDN one that is blank offline.
    "ninja",
    "nodespecs",
    "graphs",
    "mcp_endpoint",
    # The spec admin's structured editor (nodespecs/admin/forms.py): its template and its React
    # bundle, served from the package's static files.
    "django_jsonform",
    # OAuth 2.1 beside API keys: the authorization server's models, admin and views
    # (mcp_endpoint/oauth).
    "oauth2_provider",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Times and records each REST request (/api/...); other paths pass through untouched.
    "mcp_endpoint.observability.rest_middleware.RestTelemetryMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}"
# Connections are kept for a minute on either database, each checked before its first query
# after a request: opening PostgreSQL's costs milliseconds, reopening the SQLite file 0.7 ms of
# CPU, either more than a short stdio call's own work (docs/benchmarks.md, issue 31).
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the history writer and page readers work at once on the embedded database.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    # Django's backend, with this process's writers served in turn (config/sqlite/base.py).
    DATABASES["default"]["ENGINE"] = "config.sqlite"
    # Tests run on an in-memory database, Django's default for SQLite, said here because
    # pytest-xdist's workers (`pytest -n 2`) otherwise get a file name made from NAME's path:
    # pytest-django knows SQLite only by Django's own engine name, not by this subclass.
    DATABASES["default"]["TEST"] = {"NAME": ":memory:"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")
# How long a Redis command may take before it fails (answered 503). Its commands take well
# under a millisecond; one that hangs must not hold the event loop, where most requests
# count their rate limit (redis-py before 8 waited for ever).
REDIS_SOCKET_TIMEOUT = float(os.environ.get("REDIS_SOCKET_TIMEOUT", "2"))
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "socket_timeout": REDIS_SOCKET_TIMEOUT,
                "socket_connect_timeout": REDIS_SOCKET_TIMEOUT,
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
# Serve assets straight from the apps in development, so no collectstatic step is needed.
WHITENOISE_USE_FINDERS = DEBUG

# Django's defaults, stated because `check --deploy` and docs/security.md rely on them: pages
# cannot be framed (clickjacking), and browsers must not guess content types from the body.
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True

# Production (DEBUG=false) is HTTPS only; each control can be turned off by env for the one
# case that needs it: a plain-HTTP start on loopback (tests/e2e, bench) sets
# SECURE_COOKIES=false and SECURE_SSL_REDIRECT=false.
if not DEBUG:
    # TLS ends at the proxy, which must send X-Forwarded-Proto (docs/operations.md).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=True)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
    # A proxy that already redirects to HTTPS may set it false; the redirect is harmless there.
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=True)
    # Load balancers probe the backend over plain HTTP, where a redirect reads as "down";
    # Prometheus may scrape an instance on the private network by its address
    # (METRICS_ALLOWED_ADDRESSES), where a redirect would send it through the proxy.
    SECURE_REDIRECT_EXEMPT = [r"^api/v1/public/health$", r"^metrics$"]
    # One year, the minimum the browsers' preload lists accept; start lower (e.g. 3600) on a
    # first HTTPS rollout, since browsers remember it for this long. 0 turns HSTS off.
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    # Only announces consent; the domain joins the lists when submitted to hstspreload.org.
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=True)

# Logs: `plain` lines for people (the default), or `json`, one object a line for a collector,
# which adds an `event` line per MCP or REST request, run end and downstream failure
# (nodespecs/telemetry.py, docs/operations.md). LOG_LEVEL applies to both.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain").strip().lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT={LOG_FORMAT!r} is not a format: use plain or json.")
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").strip().upper()
if not isinstance(logging.getLevelName(LOG_LEVEL), int):
    raise ImproperlyConfigured(
        f"LOG_LEVEL={LOG_LEVEL!r} is not a level: use DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )
# Libraries that log what passes through them below WARNING: the MCP SDK each message it
# sends or receives (a downstream call's arguments, secrets the history masks; its client
# session logs as "client"), sse-starlette each chunk it streams, httpx2, httpcore2 and urllib3
# each URL and connection. They never write below WARNING, nor below LOG_LEVEL.
PAYLOAD_LOGGERS = ("mcp", "client", "sse_starlette", "httpx2", "httpcore2", "urllib3")
PAYLOAD_LOGGERS_LEVEL = logging.getLevelName(max(logging.WARNING, logging.getLevelName(LOG_LEVEL)))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {
            "()": "pythonjsonlogger.orjson.OrjsonFormatter",
            "fmt": "%(levelname)s %(name)s %(message)s",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # Whatever LOG_LEVEL says, these write warnings and errors only (issue 25, item 17).
    "loggers": {name: {"level": PAYLOAD_LOGGERS_LEVEL} for name in PAYLOAD_LOGGERS},
}

# Prometheus metrics (docs/operations.md, "Metrics"): recorded unless METRICS_ENABLED=false;
# `/metrics` answers keys with the scope metrics:read and clients whose address is in
# METRICS_ALLOWED_ADDRESSES (addresses or CIDR networks, comma separated; empty by default: a
# proxy in front would make every client look like it). A process without a web server (a
# Celery worker) serves its host's metrics on METRICS_PORT, at METRICS_ADDRESS, when set.
METRICS_ENABLED = env_bool("METRICS_ENABLED", default=True)
METRICS_ALLOWED_ADDRESSES = env_list("METRICS_ALLOWED_ADDRESSES", "")
for _network in METRICS_ALLOWED_ADDRESSES:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"METRICS_ALLOWED_ADDRESSES: {_network!r} is not an address or a CIDR network "
            "(e.g. 10.0.0.5 or 10.0.0.0/24)."
        ) from None
METRICS_PORT = env_int("METRICS_PORT", 0)
METRICS_ADDRESS = os.environ.get("METRICS_ADDRESS", "0.0.0.0")

# MCP endpoint and REST API (docs/operations.md).
MCP_ANONYMOUS_SCOPES = env_list("MCP_ANONYMOUS_SCOPES", "")
MCP_RATE_LIMIT_PER_MINUTE = int(os.environ.get("MCP_RATE_LIMIT_PER_MINUTE", "1200"))
MCP_MAX_BODY_BYTES = int(os.environ.get("MCP_MAX_BODY_BYTES", str(1024 * 1024)))
MCP_ALLOWED_ORIGINS = env_list("MCP_ALLOWED_ORIGINS", "")
MCP_SESSION_TTL_SECONDS = int(os.environ.get("MCP_SESSION_TTL_SECONDS", "86400"))
MCP_LISTEN_SECONDS = int(os.environ.get("MCP_LISTEN_SECONDS", "300"))
# Notification streams (subscriptions/listen, a 2025 session's GET) one caller may hold open
# at once in each process: each holds a connection for MCP_LISTEN_SECONDS.
MCP_STREAMS_PER_CALLER = int(os.environ.get("MCP_STREAMS_PER_CALLER", "16"))
# Dotted paths of modules, comma-separated, whose `install()` adds tools, resources or prompts
# at start-up (mcp_endpoint/apps.py); empty in production. The conformance suite's fixtures
# are one: MCP_EXTENSION_MODULES=tests.conformance_fixtures (docs/conformance.md).
MCP_EXTENSION_MODULES = env_list("MCP_EXTENSION_MODULES", "")
# The boolean it replaced; a server started with it on would silently lack the fixtures.
if env_bool("MCP_CONFORMANCE_FIXTURES", default=False):
    raise ImproperlyConfigured(
        "MCP_CONFORMANCE_FIXTURES is gone: the fixtures live in tests/ now; set "
        "MCP_EXTENSION_MODULES=tests.conformance_fixtures instead (docs/conformance.md)."
    )
MCP_INTERNAL_TOKEN = os.environ.get("MCP_INTERNAL_TOKEN", "")
# Empty by default: behind a local reverse proxy every client would look like 127.0.0.1.
MCP_INTERNAL_NETWORKS = env_list("MCP_INTERNAL_NETWORKS", "")
# Let the endpoint refuse oversized bodies itself, with a JSON-RPC error.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(MCP_MAX_BODY_BYTES, 2621440)
# Under uvicorn, a request to Django (admin, pages, REST) sending more than this is answered
# 413 before the rest is read: Django itself would read any chunked body to its end.
MAX_REQUEST_BODY_BYTES = int(os.environ.get("MAX_REQUEST_BODY_BYTES", str(8 * 1024 * 1024)))
if MCP_ANONYMOUS_SCOPES and not DEBUG:
    import logging

    logging.getLogger("config").warning(
        "MCP_ANONYMOUS_SCOPES=%s lets callers without an API key use the endpoint.",
        ",".join(MCP_ANONYMOUS_SCOPES),
    )

# Issue 25, items 10, 11 and 13: bounds at admission (docs/operations.md, "Bounds at admission").
# Every request's params nest at most this many levels of arrays and objects (a -32602 error,
# or a 422 over REST, names it); answers and the history keep at most 100
# (graphs/engine/nesting.py).
MCP_MAX_JSON_DEPTH = env_int("MCP_MAX_JSON_DEPTH", 64)
if not 8 <= MCP_MAX_JSON_DEPTH <= 100:
    raise ImproperlyConfigured(
        f"MCP_MAX_JSON_DEPTH={MCP_MAX_JSON_DEPTH} must be between 8 (a tool call's own levels) "
        "and 100 (the deepest value answered or kept in the history)."
    )
# Calls of the tools that read whole definitions (validate_workflow, create_workflow,
# update_workflow, publish_workflow, test_workflow), and any /mcp body over 64 KB, run on
# MCP_DOCUMENT_THREADS threads of their own, at most MCP_DOCUMENT_CALLS_PER_CALLER of one key's
# at once (the rest wait their turn, holding no thread): knowledge calls never wait for them.
MCP_DOCUMENT_THREADS = env_int("MCP_DOCUMENT_THREADS", 2)
MCP_DOCUMENT_CALLS_PER_CALLER = env_int("MCP_DOCUMENT_CALLS_PER_CALLER", 1)
if MCP_DOCUMENT_THREADS < 1 or MCP_DOCUMENT_CALLS_PER_CALLER < 1:
    raise ImproperlyConfigured(
        "MCP_DOCUMENT_THREADS and MCP_DOCUMENT_CALLS_PER_CALLER must be 1 or more: with 0, no "
        "definition could be validated or saved."
    )
# The 2025 sessions (and legacy SSE streams) live in a cache of their own, which other
# traffic (rate windows, task records, kept results) never evicts them from; one key has at
# most MCP_SESSIONS_PER_CALLER live sessions, and opening one more ends its oldest.
MCP_SESSIONS_PER_CALLER = env_int("MCP_SESSIONS_PER_CALLER", 100)
if MCP_SESSIONS_PER_CALLER < 1:
    raise ImproperlyConfigured("MCP_SESSIONS_PER_CALLER must be 1 or more: 0 refuses every client.")
CACHES["sessions"] = (
    # Redis evicts nothing unless its operator says so (docs/operations.md); the keys are
    # those sessions had before, so live sessions outlive an upgrade.
    {**CACHES["default"]}
    if REDIS_URL
    # Culled only past a million entries: the per-key cap bounds what one caller holds.
    else {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "mcp-sessions",
        "OPTIONS": {"MAX_ENTRIES": 1_000_000},
    }
)

# A downstream MCP tool's result larger than this (JSON bytes) fails the call, with a message
# naming this setting, rather than being copied into the run (docs/providers.md, "Faults").
MCP_CLIENT_MAX_RESULT_BYTES = int(os.environ.get("MCP_CLIENT_MAX_RESULT_BYTES", str(10 * 10**6)))

# The only commands a stdio MCP server (a provider, a graph file's mcpServers entry) may run,
# comma-separated, compared exactly as written (`npx`, `/opt/mcp/bin/files`); empty: any
# command a superuser registers. Applies to superusers too, and to providers saved before it
# was set, which then refuse to start (nodespecs/downstream/process_rights.py, docs/providers.md).
PROVIDER_ALLOWED_COMMANDS = env_list("PROVIDER_ALLOWED_COMMANDS", "")

# Issue 24, parts 1-2 (nodespecs/providers/builder_access.py): the registered providers any
# builder's key may call in its drafts, by name, besides those opened in the admin (default: none,
# so a new provider is the operators' alone); and how many servers of its own one key may declare.
PROVIDERS_OPEN_TO_BUILDERS = env_list("PROVIDERS_OPEN_TO_BUILDERS", "")
BUILDER_MAX_DECLARED_SERVERS = int(os.environ.get("BUILDER_MAX_DECLARED_SERVERS", "20"))

# Issue 24, part 3 (egress policy, nodespecs/downstream/egress.py): a server an agent names in a
# workflow is reached only at public addresses, judged after DNS on every connection. An operator
# may exempt networks (comma-separated CIDRs, e.g. 10.20.0.0/16,fd12::/64), and refuse plain http.
EGRESS_ALLOWED_NETWORKS = env_list("EGRESS_ALLOWED_NETWORKS", "")
for _network in EGRESS_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"EGRESS_ALLOWED_NETWORKS: {_network!r} is not a network; write CIDRs separated by "
            "commas, e.g. 10.20.0.0/16,fd12::/64."
        ) from None
EGRESS_REQUIRE_HTTPS = env_bool("EGRESS_REQUIRE_HTTPS", default=False)

# Node knowledge (issue 13): the longest search_nodes query answered. A search stems every
# word of its query (tens of microseconds each); what a node should do fits in a few
# sentences, and a 120,000-word query once held a process for 20 s. Over either limit, the
# caller gets a tool error naming it.
KNOWLEDGE_MAX_QUERY_CHARACTERS = env_int("KNOWLEDGE_MAX_QUERY_CHARACTERS", 1000)
KNOWLEDGE_MAX_QUERY_TERMS = env_int("KNOWLEDGE_MAX_QUERY_TERMS", 100)

# Graph workflows (docs/graphs.md).
# A node's input, output or a run's result larger than this (JSON bytes) is stored as a marked
# preview in the history, never silently dropped.
GRAPHS_MAX_PAYLOAD_BYTES = int(os.environ.get("GRAPHS_MAX_PAYLOAD_BYTES", str(256 * 1024)))
# The highest executionLimits any workflow may set (graphs/execution/limits.py): a save or import
# above either is refused naming it, and a workflow stored above one runs capped at it. A run writes
# a history row per node execution and the engine keeps each output for the history functions, so
# 10,000 (ten times the default maxNodeExecutions of 1,000) bounds both a run's rows and its memory;
# 10 minutes (twice the default maxExecutionTimeMs) bounds how long one run holds a direct-run
# thread or a worker.
GRAPHS_MAX_NODE_EXECUTIONS_CEILING = env_int("GRAPHS_MAX_NODE_EXECUTIONS_CEILING", 10_000)
GRAPHS_MAX_EXECUTION_TIME_MS_CEILING = env_int("GRAPHS_MAX_EXECUTION_TIME_MS_CEILING", 600_000)
if not GRAPHS_MAX_NODE_EXECUTIONS_CEILING or not GRAPHS_MAX_EXECUTION_TIME_MS_CEILING:
    raise ImproperlyConfigured(
        "GRAPHS_MAX_NODE_EXECUTIONS_CEILING and GRAPHS_MAX_EXECUTION_TIME_MS_CEILING must be 1 "
        "or more: no workflow could run under a ceiling of 0."
    )
# The longest an approval node may wait for its decision (its `timeoutMs`): a save or import above
# it is refused naming it. Waiting holds no thread or worker, only a row, so the default is long:
# 30 days.
GRAPHS_MAX_APPROVAL_TIMEOUT_MS = env_int("GRAPHS_MAX_APPROVAL_TIMEOUT_MS", 30 * 24 * 3600 * 1000)
if not GRAPHS_MAX_APPROVAL_TIMEOUT_MS:
    raise ImproperlyConfigured(
        "GRAPHS_MAX_APPROVAL_TIMEOUT_MS must be 1 or more: no approval node could time out."
    )


def env_seconds(name: str, default: float) -> float:
    """Read a positive number of seconds from the environment."""
    raw = os.environ.get(name, str(default))
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a positive number of seconds.")
    return value


# Execution modes (docs/graphs.md, "Execution modes"): `direct` runs a workflow in the web
# process that received the call; `queued` creates the run as queued and a Celery worker
# (`celery -A config worker`) executes it while the web side waits up to GRAPHS_RUN_WAIT_SECONDS.
EXECUTION_MODE = os.environ.get("EXECUTION_MODE", "direct").strip().lower()
if EXECUTION_MODE not in ("direct", "queued"):
    raise ImproperlyConfigured(
        f"EXECUTION_MODE={EXECUTION_MODE!r} is not a mode: use direct (the default) or queued."
    )
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
if EXECUTION_MODE == "queued" and not CELERY_BROKER_URL:
    raise ImproperlyConfigured(
        "EXECUTION_MODE=queued needs a broker: set CELERY_BROKER_URL, e.g. "
        "redis://127.0.0.1:6379/1 or amqp://guest:guest@127.0.0.1:5672//."
    )
# The exit value travels back to the waiting web process through the result backend (the
# history keeps only a masked, size-capped copy): the Redis broker itself, else RabbitMQ's
# reply queues.
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "rpc://"
)
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SERIALIZER = "json"
# A task is acknowledged when it ends, so a worker lost mid-run leaves its message to the
# broker; the run itself is settled by the reaper (a redelivered task finds it not queued).
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_TIMEOUT = 5
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# How long a tools/call waits for its run (either mode) before answering that it is still
# going, with its id; the run goes on.
GRAPHS_RUN_WAIT_SECONDS = env_seconds("GRAPHS_RUN_WAIT_SECONDS", 120)
# Direct mode under uvicorn: how many runs one web process executes at once (each holds a
# thread while its nodes call out); calls beyond it wait for a thread.
GRAPHS_DIRECT_RUN_THREADS = int(os.environ.get("GRAPHS_DIRECT_RUN_THREADS", "16"))

# Issue 24, part 4 (no recursion; graphs/execution/lineage.py, graphs/execution/direct_turns.py): a
# workflow call that comes back through other workflows' calls is refused when the chain of runs,
# the called one included, would be deeper than GRAPHS_MAX_CALL_DEPTH (a cycle always is); and one
# caller has at most GRAPHS_RUN_THREADS_PER_CALLER of the direct-run threads at once (default half
# of them), its further calls waiting their turn while other callers' start.
GRAPHS_MAX_CALL_DEPTH = env_int("GRAPHS_MAX_CALL_DEPTH", 3)
if GRAPHS_MAX_CALL_DEPTH < 1 or GRAPHS_MAX_CALL_DEPTH > 32:
    raise ImproperlyConfigured(
        f"GRAPHS_MAX_CALL_DEPTH={GRAPHS_MAX_CALL_DEPTH} must be between 1 (no workflow may call "
        "another through this server) and 32."
    )
GRAPHS_RUN_THREADS_PER_CALLER = env_int(
    "GRAPHS_RUN_THREADS_PER_CALLER", max(GRAPHS_DIRECT_RUN_THREADS // 2, 1)
)
if GRAPHS_RUN_THREADS_PER_CALLER < 1:
    raise ImproperlyConfigured(
        f"GRAPHS_RUN_THREADS_PER_CALLER={GRAPHS_RUN_THREADS_PER_CALLER} must be at least 1 "
        f"(GRAPHS_DIRECT_RUN_THREADS, {GRAPHS_DIRECT_RUN_THREADS}, lets one caller use them all)."
    )
# How long a run's whole result stays readable for a client that comes back for it (a task's
# tasks/get); the history keeps its masked, size-capped copy for good.
GRAPHS_RESULT_KEEP_SECONDS = env_seconds("GRAPHS_RESULT_KEEP_SECONDS", CELERY_RESULT_EXPIRES)
# A 2026-07-28 client that declares the tasks extension gets a task handle instead of the
# result when its workflow run is still going after this long (docs/mcp.md, "Long calls").
MCP_TASK_AFTER_SECONDS = env_seconds("MCP_TASK_AFTER_SECONDS", 1.0)
# Every process stamps the runs it executes this often, and reads their cancel requests.
GRAPHS_HEARTBEAT_SECONDS = env_seconds("GRAPHS_HEARTBEAT_SECONDS", 5)
# A running run without a heartbeat for this long has lost its process: the reaper fails it.
GRAPHS_RUN_STALE_SECONDS = env_seconds("GRAPHS_RUN_STALE_SECONDS", 60)
if GRAPHS_RUN_STALE_SECONDS < 3 * GRAPHS_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        f"GRAPHS_RUN_STALE_SECONDS ({GRAPHS_RUN_STALE_SECONDS:g}) must be at least three "
        f"heartbeats (3 x GRAPHS_HEARTBEAT_SECONDS = {3 * GRAPHS_HEARTBEAT_SECONDS:g}), or live "
        "runs would be reaped: raise it or lower GRAPHS_HEARTBEAT_SECONDS."
    )
# How often `celery -A config beat` has a worker reap stale runs.
GRAPHS_REAP_INTERVAL_SECONDS = env_seconds("GRAPHS_REAP_INTERVAL_SECONDS", 30)


def env_count(name: str, default: int) -> int:
    """Read a whole number, 0 or more, from the environment."""
    raw = os.environ.get(name, str(default))
    if not raw.strip().isdigit():
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number (0, 1, 2, ...).")
    return int(raw)


# A queued run that no worker started for this long has lost its message (a broker restarted
# without persistence, a purged queue): the reaper sends it again, GRAPHS_QUEUED_RESENDS times
# at most, then fails it. Keep it above the longest wait a run may have behind busy workers:
# a run still waiting in the queue is failed all the same after (resends + 1) x this.
GRAPHS_QUEUED_STALE_SECONDS = env_seconds("GRAPHS_QUEUED_STALE_SECONDS", 300)
GRAPHS_QUEUED_RESENDS = env_count("GRAPHS_QUEUED_RESENDS", 2)
# A run of a workflow marked "retry when its worker is lost" whose worker died is queued again
# at most this many times (queued mode), then failed as any other: a run lost twice in a row
# may itself be what kills its worker.
GRAPHS_RUN_RETRIES = env_count("GRAPHS_RUN_RETRIES", 1)
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {
        "task": "graphs.tasks.runs_reap_task",
        "schedule": GRAPHS_REAP_INTERVAL_SECONDS,
        # A reap queued while no worker was up is worthless once the next one is due.
        "options": {"expires": GRAPHS_REAP_INTERVAL_SECONDS},
    }
}

# Traces (docs/operations.md, "Traces") are configured by the standard OTEL_* variables
# (graphs/execution/tracing.py). The run page links a run's trace id to the operator's trace viewer
# through this URL, e.g. http://jaeger.internal:16686/trace/{trace_id}; empty: no link.
TRACE_URL_TEMPLATE = os.environ.get("TRACE_URL_TEMPLATE", "").strip()
if TRACE_URL_TEMPLATE and "{trace_id}" not in TRACE_URL_TEMPLATE:
    raise ImproperlyConfigured(
        f"TRACE_URL_TEMPLATE={TRACE_URL_TEMPLATE!r} has no {{trace_id}}: write where the "
        "trace id goes, e.g. http://jaeger.internal:16686/trace/{trace_id}."
    )

# Issue 25, items 12, 15 and 16: what callers may store and label, and whose address counts.
# The proxies trusted to write X-Forwarded-For: the variable uvicorn reads for
# --forwarded-allow-ips, read here too. Empty (the default): no proxy, and a request carrying
# the header matches no address allow-list (mcp_endpoint/access/client_addresses.py).
FORWARDED_ALLOW_IPS = os.environ.get("FORWARDED_ALLOW_IPS", "").strip()
# Metric labels bounded by construction: of the published workflows, the METRICS_WORKFLOW_LABELS
# oldest are labelled by name in /metrics, the others as "other" (graphs/execution/telemetry.py);
# the servers agents declare are one provider label, "declared".
METRICS_WORKFLOW_LABELS = env_count("METRICS_WORKFLOW_LABELS", 100)
# Version history (graphs/authoring/version_storage.py): a workflow keeps at most this many
# versions, its oldest drafts pruned past it (never a published one, nor one a run points at), and
# an API key stores at most this many bytes of versions a day (UTC; 0: no bound).
GRAPHS_MAX_VERSIONS_PER_WORKFLOW = env_count("GRAPHS_MAX_VERSIONS_PER_WORKFLOW", 50)
if GRAPHS_MAX_VERSIONS_PER_WORKFLOW < 2:
    raise ImproperlyConfigured(
        f"GRAPHS_MAX_VERSIONS_PER_WORKFLOW={GRAPHS_MAX_VERSIONS_PER_WORKFLOW} must be 2 or more: "
        "a workflow needs room for its published version and a draft."
    )
GRAPHS_STORED_BYTES_PER_KEY_PER_DAY = env_count("GRAPHS_STORED_BYTES_PER_KEY_PER_DAY", 50_000_000)

# Issue 27 (approval nodes; docs/graphs.md, "approval"): where a JSON POST goes when a run
# starts waiting for reviewers (a Slack incoming webhook takes it as is; empty: none), whether
# the key or user that started a run may decide it too (separation of duties: not by default),
# and how often each process's timer looks for approvals whose timeout is due (it sleeps until
# the earliest one it knows of, and no longer than this, so one created elsewhere fires late
# by no more than this).
APPROVAL_NOTIFY_URL = os.environ.get("APPROVAL_NOTIFY_URL", "").strip()
APPROVAL_ALLOW_SELF_DECISION = env_bool("APPROVAL_ALLOW_SELF_DECISION", False)
APPROVAL_TIMER_POLL_SECONDS = env_seconds("APPROVAL_TIMER_POLL_SECONDS", 1.0)
# The most a waiting run may keep until its decision (its arguments and every output so far,
# as JSON): a run whose state is larger fails at its approval node, naming this.
GRAPHS_MAX_WAIT_STATE_BYTES = env_count("GRAPHS_MAX_WAIT_STATE_BYTES", 32 * 1024 * 1024)
# The service's address as people reach it, for links sent outside (APPROVAL_NOTIFY_URL's).
PUBLIC_URL = os.environ.get("PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# How long a test run may stay paused at a breakpoint (graphs/execution/resuming/breakpoints.py):
# then it ends cancelled, saying it expired, so a forgotten debugging session keeps nothing.
GRAPHS_BREAKPOINT_EXPIRY_SECONDS = env_seconds("GRAPHS_BREAKPOINT_EXPIRY_SECONDS", 3600.0)

# OAuth 2.1 beside API keys (docs/mcp.md, "Connecting with OAuth"). On, this service is the
# authorization server MCP clients that follow the MCP authorization spec discover and sign in
# through; off, its discovery URLs answer a JSON 404 that says how to send an API key.
OAUTH_ENABLED = env_bool("OAUTH_ENABLED", default=True)
# RFC 7591 Dynamic Client Registration (POST /register), which older clients need: anyone may
# register a client (it gets nothing until a person consents), so an operator may turn it off.
OAUTH_DYNAMIC_REGISTRATION = env_bool("OAUTH_DYNAMIC_REGISTRATION", default=True)
# Client ID Metadata Documents: a client_id that is an HTTPS URL whose JSON this server fetches
# (public addresses only, bounded in size and time, cached).
OAUTH_CLIENT_METADATA_DOCUMENTS = env_bool("OAUTH_CLIENT_METADATA_DOCUMENTS", default=True)
# An external authorization server (single sign-on) instead of this one: its issuer URL. Set,
# this service takes the JWT access tokens (RFC 9068) that issuer signs, for its own resources
# only (the audience), and offers no authorization server of its own.
OAUTH_EXTERNAL_ISSUER = os.environ.get("OAUTH_EXTERNAL_ISSUER", "").strip().rstrip("/")
# Where that issuer publishes its signing keys (a JWKS); empty: the `jwks_uri` of its RFC 8414
# or OpenID Connect discovery document (mcp_endpoint/access/external_tokens.py).
OAUTH_EXTERNAL_JWKS_URL = os.environ.get("OAUTH_EXTERNAL_JWKS_URL", "").strip()
# The `aud` a token must carry; empty: the URL of the MCP endpoint called, so that a token for
# /mcp/a is refused at /mcp/b. Set it for an issuer that cannot put a URL in `aud` (it then
# holds for every endpoint alike).
OAUTH_EXTERNAL_AUDIENCE = os.environ.get("OAUTH_EXTERNAL_AUDIENCE", "").strip()
# The claim whose value is the username of the local user a token acts for (rights stay
# here): `sub` unless told; choose one the issuer lets no user change (not a display name).
OAUTH_EXTERNAL_USERNAME_CLAIM = os.environ.get("OAUTH_EXTERNAL_USERNAME_CLAIM", "sub").strip()
# The JWT `typ` headers taken: RFC 9068's at+jwt. Issuers that stamp their access tokens
# plain JWT (Keycloak, Entra ID) need `at+jwt,JWT`; the audience still keeps their ID tokens out.
OAUTH_EXTERNAL_TOKEN_TYPES = env_list("OAUTH_EXTERNAL_TOKEN_TYPES", "at+jwt")
# The issuer's keys are fetched again after this long, and when a token names a key not yet
# seen, at most once per OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS (a spray of made-up key ids
# must not make this service hammer the issuer).
OAUTH_EXTERNAL_JWKS_MAX_AGE_SECONDS = env_seconds("OAUTH_EXTERNAL_JWKS_MAX_AGE_SECONDS", 3600)
OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS = env_seconds("OAUTH_EXTERNAL_JWKS_REFETCH_SECONDS", 60)
if OAUTH_EXTERNAL_ISSUER and not OAUTH_EXTERNAL_ISSUER.startswith(("https://", "http://")):
    raise ImproperlyConfigured(
        f"OAUTH_EXTERNAL_ISSUER={OAUTH_EXTERNAL_ISSUER!r} is not a URL: write the issuer as its "
        "tokens' iss claim names it, e.g. https://login.example.com/realms/main."
    )
if not OAUTH_EXTERNAL_ISSUER and (OAUTH_EXTERNAL_JWKS_URL or OAUTH_EXTERNAL_AUDIENCE):
    raise ImproperlyConfigured(
        "OAUTH_EXTERNAL_JWKS_URL or OAUTH_EXTERNAL_AUDIENCE is set without OAUTH_EXTERNAL_ISSUER: "
        "set OAUTH_EXTERNAL_ISSUER to the issuer URL of your authorization server, or unset them."
    )
if not OAUTH_EXTERNAL_USERNAME_CLAIM:
    raise ImproperlyConfigured(
        "OAUTH_EXTERNAL_USERNAME_CLAIM is empty: name the claim holding local usernames (sub)."
    )
OAUTH_ACCESS_TOKEN_SECONDS = env_count("OAUTH_ACCESS_TOKEN_SECONDS", 3600)
# A refresh token unused this long expires (the user signs in again); each use rotates it.
OAUTH_REFRESH_TOKEN_SECONDS = env_count("OAUTH_REFRESH_TOKEN_SECONDS", 30 * 24 * 3600)
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
# Where the consent page sends a person who is not signed in.
LOGIN_URL = "oauth-sign-in"
OAUTH2_PROVIDER = {
    "SCOPES_BACKEND_CLASS": "mcp_endpoint.oauth.scopes_backend.ScopesBackend",
    "OAUTH2_VALIDATOR_CLASS": "mcp_endpoint.oauth.validator.Validator",
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": OAUTH_REFRESH_TOKEN_SECONDS,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    # A refresh token used twice revokes every token of its family (RFC 9700, 4.14.2).
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # OAuth 2.1: the authorization code with PKCE S256 and refresh tokens, nothing else.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    # 'http' stays allowed for native clients' loopback callbacks (RFC 8252, 7.3), which the
    # toolkit's check cannot tell from any plain-http redirect: our validator refuses every
    # other http redirect (mcp_endpoint/oauth/validator.py, redirect_uri_problem), so the
    # check's warning (W008) is silenced below rather than loopback clients refused.
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_SCHEME": False,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    # Public clients (desktop apps, the Inspector, mcp-remote) authenticate with PKCE alone.
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_post",
        "client_secret_basic",
    ],
    # Native clients listen on a loopback port of their choosing (RFC 8252, 7.3).
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],
    "REQUEST_APPROVAL_PROMPT": "force",
    "DCR_ENABLED": OAUTH_DYNAMIC_REGISTRATION,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": OAUTH_CLIENT_METADATA_DOCUMENTS,
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
    "CIMD_MAX_DOCUMENT_SIZE": 16 * 1024,
    # Fetched under the egress rule (public addresses, or EGRESS_ALLOWED_NETWORKS), with one
    # deadline for the whole fetch (mcp_endpoint/oauth/client_documents.py).
    "CIMD_METADATA_FETCHER": "mcp_endpoint.oauth.client_documents.ClientDocumentFetcher",
    "OAUTH2_PROTECTED_RESOURCE_NAME": "Switchyard",
}
