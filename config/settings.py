"""Assay settings: one module, driven by the environment.

Environment variables:
    DATABASE_URL   database (default: SQLite file ``db.sqlite3`` in the project folder)
    REDIS_URL      Celery broker; when unset, the server-less ``filesystem://`` transport
                   under ``var/celery/`` (the embedded default; hardened copy in
                   core/filesystem_broker.py)
    SECRET_KEY     required when DEBUG is false
    DEBUG          "true"/"false" (default false)
    ALLOWED_HOSTS  comma-separated host names (default: localhost names when DEBUG; required
                   when DEBUG is false: the WSGI/ASGI entry points refuse to start, config.hosts)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypedDict

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from core.bounds import BODY_MAX_BYTES
from core.egress import HostEntry, host_entries_parse
from core.logs import logging_config
from core.metrics.access import DEFAULT_NETWORKS, IPNetwork, networks_parse

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("ASSAY_VAR_DIR", BASE_DIR / "var"))
# Prometheus counters: every process of this machine (web, workers, beat) writes its own
# files here and /metrics sums them (core.metrics.store). Set in the environment before
# prometheus_client is imported, which reads it once; child processes inherit it.
METRICS_DIR = Path(os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(VAR_DIR / "metrics")))
METRICS_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    """Read a boolean from the environment; only true/false/1/0/yes/no are accepted."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true or false)")


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    SECRET_KEY = "insecure-dev-key-only-for-debug-" + "x" * 32

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("ALLOWED_HOSTS", "").split(",") if h.strip()]
if DEBUG and not ALLOWED_HOSTS:
    ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI static files for /api/docs/ (no CDN)
    "core",
    "providers",
    "apitokens",
    "evals",
    "judges",
    "labeling",
    "interop",
    "demo",
]

MIDDLEWARE = [
    "config.middleware.ServerTimingMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # A JSON API body over its endpoint's limit: 413 before anything reads it.
    "core.api.limits.BodyLimitMiddleware",
    # A form post over its limit: the "Bad request" page, before CSRF reads the form.
    "config.middleware.FormLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.ContentSecurityPolicyMiddleware",
    "config.middleware.ViewerTimeZoneMiddleware",
    "config.middleware.LoginRequiredMiddleware",
    "config.middleware.UnstorableFormMiddleware",
    "config.middleware.BadRequestPageMiddleware",
]

if not DEBUG:
    # Production serves static files through WhiteNoise; DEBUG uses runserver's handler.
    MIDDLEWARE.insert(2, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "config.urls"

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
                "core.context_processors.worker_status",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DB_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and a busy timeout let the web process and the Celery worker share the file: reads
    # never wait, and a write waits its turn (BEGIN IMMEDIATE, so no upgrade deadlock) for up
    # to the timeout. It outlasts the write lock of a large import (one transaction, all or
    # nothing: about 70-90 s for 200,000 CSV rows on 2 busy cores), so a login during it
    # is slow rather than "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": int(os.environ.get("ASSAY_SQLITE_TIMEOUT_SECONDS", "180")),
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

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
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

LOGIN_URL = "login"
# Django's ModelBackend, reading the session's user and their roles in one query. Sessions
# opened under another backend path are logged out once (Django's rule for a backend that
# is no longer listed).
AUTHENTICATION_BACKENDS = ["core.auth_backends.RolesModelBackend"]
LOGIN_REDIRECT_URL = "evals:run-list"
LOGOUT_REDIRECT_URL = "login"

# Files kept between a request and a task (an import's upload, interop.import_jobs). With
# workers on other hosts, point the default storage at storage they share.
MEDIA_ROOT = VAR_DIR / "media"

# Uploads: imports stream from a temporary file, never from memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
# A form post (urlencoded) is parsed whole, up to 75 bytes of memory a byte (percent
# escapes), so the limit is core.bounds.BODY_MAX_BYTES["form"] (1 MiB); JSON API bodies have
# theirs in the same table.
DATA_UPLOAD_MAX_MEMORY_SIZE = BODY_MAX_BYTES["form"]

# Security (pass `manage.py check --deploy` when DEBUG is false).
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Celery: REDIS_URL at scale, a server-less filesystem broker by default.
REDIS_URL = os.environ.get("REDIS_URL", "")
# The rate limiter's store (providers.limiter, docs/rate-limits.md): REDIS_URL unless a Redis
# of its own is named; neither set: a SQLite file under VAR_DIR.
LIMITER_REDIS_URL = os.environ.get("ASSAY_LIMITER_REDIS_URL", "") or REDIS_URL
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
else:
    _broker_dir = VAR_DIR / "celery" / "broker"
    _control_dir = VAR_DIR / "celery" / "control"
    # kombu's filesystem transport does not create its folders; the first enqueue would fail.
    # Private to this user (0700): whoever may write a message there makes the worker run it
    # (core.worker_privileges keeps Celery's superuser warning when they are not private).
    for _folder in (_broker_dir.parent, _broker_dir, _control_dir):
        _folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    # A host in the URL (the transport ignores it) keeps kombu from logging "No hostname was
    # supplied" on every command that queues a task.
    CELERY_BROKER_URL = "filesystem://localhost//"
    # kombu's own filesystem transport has a read-before-write race (kombu #1551) that
    # stops the worker; core.filesystem_broker writes whole files and renames them.
    CELERY_BROKER_TRANSPORT = "core.filesystem_broker:Transport"
    # No remote control (no pidbox fanout exchange files, nothing to inspect on a single
    # embedded worker) and no events: only the task queue's table lives in control/.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
    CELERY_WORKER_SEND_TASK_EVENTS = False
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir),
        "data_folder_out": str(_broker_dir),
        "control_folder": str(_control_dir),
        "processed_folder": str(VAR_DIR / "celery" / "processed"),
        "store_processed": False,
    }
# "progress": live progress of work whose rows are not yet committed (an import's bytes
# read, interop.import_jobs); shared by the web process and the workers.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "progress": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache" / "progress"),
        }
    ),
    # What a worker decides for the web to read (a run's verdict against its baseline, an
    # experiment's decision, both decided as a run closes): shared by every process, unlike
    # "default" (per process).
    "shared": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache" / "shared"),
        }
    ),
}
CELERY_TASK_IGNORE_RESULT = True  # progress lives in the database, not a result backend
CELERY_TASK_ACKS_LATE = False  # set per task, only on idempotent ones
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 30 * 60
CELERY_TASK_SOFT_TIME_LIMIT = 25 * 60
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker (and beat) never gives up on a lost broker: it tries again every 2 s, growing to
# 30 s, for as long as the outage lasts. Celery's default, 100 tries, ends a worker after
# about 46 minutes without Redis, and nothing restarts it. Publishing is not affected
# (CELERY_TASK_PUBLISH_RETRY_POLICY below; the outbox sends again).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Every task goes through the transactional outbox (core.outbox): a publish that fails is
# sent again by the sweeper, so publishing retries briefly instead of blocking a request.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
# The sweeper (evals.runner.sweeper) under Celery beat; `manage.py runs_sweep` does one pass too.
CELERY_BEAT_SCHEDULE = {
    "runs-sweep": {
        "task": "evals.tasks.runs_sweep",
        "schedule": float(os.environ.get("ASSAY_SWEEP_SECONDS", "30")),
    },
    # interop.import_jobs.import_jobs_sweep: an import whose lease ran out (a dead worker).
    "import-jobs-requeue": {
        "task": "interop.tasks.import_jobs_requeue",
        "schedule": float(os.environ.get("ASSAY_SWEEP_SECONDS", "30")),
    },
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apitokens.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Not a throttle: the hook DRF runs after authentication and permissions (its docstring).
    "DEFAULT_THROTTLE_CLASSES": [
        "core.api.checks.DeclaredBodyLengthCheck",
        "core.api.checks.UnstorableQueryCheck",
    ],
    "DEFAULT_RENDERER_CLASSES": ["core.api.renderers.StrictJSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.IdCursorPagination",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Hostile bodies are 4xx JSON, never a 500 or an HTML page (evals/api_errors.py).
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "Assay API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}
# Several models have a "status" choice set; name each enum after its model.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    "RunStatusEnum": "evals.models.Run.Status",
    # What a case editor write did (evals.api.cases): named, not the generic "ActionEnum".
    "CaseWriteActionEnum": "evals.case_changes.WRITE_ACTIONS",
    "TrialStatusEnum": "evals.models.Trial.Status",
    "GradeStatusEnum": "evals.models.Grade.Status",
    "SuiteKindEnum": "evals.models.Suite.Kind",  # Suite.kind and the imports' suite_kind
}
# The schema is served to the UI's roles only (drf-spectacular's default is AllowAny).
SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"] = ["core.api.permissions.IsViewer"]
# Request bodies get their own components (``...Request``): an upload is then a binary
# file, not a URI, and read-only fields leave the request shapes.
SPECTACULAR_SETTINGS["COMPONENT_SPLIT_REQUEST"] = True
# Labels and runs both have a "source" choice set; name each enum after its model.
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {}).update(
    {
        "LabelSourceEnum": "labeling.models.Label.Source",
        "RunSourceEnum": "evals.models.Run.Source",
    }
)


class TrustSettings(TypedDict):
    """``ASSAY["TRUST"]``: the calibration figures a trusted judge version needs."""

    MIN_N: int
    MIN_KAPPA: float
    MAX_FAR: float
    MIN_POSITION_CONSISTENCY: float


class AssaySettings(TypedDict):
    """``ASSAY``, key by key (commented where it is set below)."""

    TRIAL_LEASE_SECONDS: int
    SWEEP_SECONDS: int
    OUTBOX_GRACE_SECONDS: int
    TRIAL_CHUNK_SIZE: int
    WORKER_SILENT_SECONDS: int
    OUTPUT_PREVIEW_CHARS: int
    TRUST: TrustSettings
    INGEST_MAX_BYTES: int
    INGEST_MAX_RECORD_BYTES: int
    IMPORT_INLINE_BYTES: int
    IMPORT_MAX_BYTES: int
    REGISTRIES: tuple[str, ...]
    LIMITER_ON_STORE_LOSS: str
    # The environment's text, parsed into entries once checked (below).
    ENDPOINT_HOSTS: str | tuple[HostEntry, ...]
    HEARTBEAT_SECONDS: float
    READY_OUTBOX_SECONDS: int
    METRICS_TOKEN: str
    METRICS_ALLOWED_NETWORKS: tuple[IPNetwork, ...]


# Assay's own knobs.
ASSAY: AssaySettings = {
    # A trial whose worker died is taken over after this many seconds. A live worker renews
    # the lease of the trials it holds every third of it (evals.runner.execute), so a long
    # chunk is never taken over; recovery after kill -9 is within lease + sweep interval.
    "TRIAL_LEASE_SECONDS": int(os.environ.get("ASSAY_TRIAL_LEASE_SECONDS", "60")),
    # How often Celery beat runs the sweeper (evals.runner.sweeper: expired leases, stalled
    # judges, unsent outbox messages).
    "SWEEP_SECONDS": int(os.environ.get("ASSAY_SWEEP_SECONDS", "30")),
    # An outbox message (core.outbox) still unsent this long after its commit is sent again
    # by the sweeper.
    "OUTBOX_GRACE_SECONDS": int(os.environ.get("ASSAY_OUTBOX_GRACE_SECONDS", "10")),
    # Trials per Celery task, run concurrently inside it: small enough that a run of 1,000
    # trials is 10 tasks, so 2 and 4 workers make it faster (bench/README.md, workers).
    "TRIAL_CHUNK_SIZE": int(os.environ.get("ASSAY_TRIAL_CHUNK_SIZE", "100")),
    # The dashboard warns, and /readyz fails its "worker" check, when no Celery worker has
    # written a heartbeat for this long (core.heartbeat, core.health).
    "WORKER_SILENT_SECONDS": int(os.environ.get("ASSAY_WORKER_SILENT_SECONDS", "60")),
    # How often each worker writes its heartbeat, seconds; below WORKER_SILENT_SECONDS.
    "HEARTBEAT_SECONDS": float(os.environ.get("ASSAY_HEARTBEAT_SECONDS", "15")),
    # /readyz fails its "outbox" check when a task message has waited this long for the
    # broker, seconds (the sweeper sends it again every SWEEP_SECONDS; core.health).
    "READY_OUTBOX_SECONDS": int(os.environ.get("ASSAY_READY_OUTBOX_SECONDS", "300")),
    # /metrics (core.metrics.access, docs/operations.md): a bearer token that may read it
    # from anywhere (empty: none), and the networks that may read it without one.
    "METRICS_TOKEN": os.environ.get("ASSAY_METRICS_TOKEN", ""),
    "METRICS_ALLOWED_NETWORKS": (),
    # Outputs longer than this are shown truncated, with "show all".
    "OUTPUT_PREVIEW_CHARS": 2000,
    # A lead may mark a judge version trusted only when its calibration has n >= MIN_N,
    # Cohen's kappa >= MIN_KAPPA and a false-accept rate <= MAX_FAR (point estimate).
    "TRUST": {"MIN_N": 30, "MIN_KAPPA": 0.6, "MAX_FAR": 0.10, "MIN_POSITION_CONSISTENCY": 0.80},
    # POST /api/ingest (docs/ingest.md): the largest request body, and the largest trial
    # record (one NDJSON line, or one JSON record re-encoded compactly), in bytes: 413 above.
    "INGEST_MAX_BYTES": int(os.environ.get("ASSAY_INGEST_MAX_BYTES", str(256 * 1024 * 1024))),
    "INGEST_MAX_RECORD_BYTES": int(
        os.environ.get("ASSAY_INGEST_MAX_RECORD_BYTES", str(4 * 1024 * 1024))
    ),
    # The import page imports an upload up to this size in the request; a larger one in the
    # background (a Celery task, with a progress bar: interop.import_jobs).
    "IMPORT_INLINE_BYTES": int(os.environ.get("ASSAY_IMPORT_INLINE_BYTES", str(1024 * 1024))),
    # POST /api/imports (docs/interop.md): the largest uploaded results file, in bytes.
    "IMPORT_MAX_BYTES": int(os.environ.get("ASSAY_IMPORT_MAX_BYTES", str(64 * 1024 * 1024))),
    # The modules that register the functions a configuration may name (callable targets,
    # tools, environments, python graders, contract oracles): core.registry. Comma-separated
    # module names; none by default, so a fresh install runs no configured code. `manage.py
    # demo` adds demo.registry for itself and the worker it starts.
    "REGISTRIES": tuple(
        m.strip() for m in os.environ.get("ASSAY_REGISTRIES", "").split(",") if m.strip()
    ),
    # The hosts a model endpoint (a target's or a judge version's base_url) may name:
    # comma-separated host, host:port or *.domain (core.egress). Whoever configures a target
    # chooses the URL the worker calls and reads its answer in the trial, so without a list
    # an engineer can make the worker fetch from its own network (an internal service, the
    # loopback interface). Set it in production. Unset, every host is allowed except
    # link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254,
    # metadata.google.internal, ...), which are refused unless an entry names them exactly.
    "ENDPOINT_HOSTS": os.environ.get("ASSAY_ENDPOINT_HOSTS", ""),
    # While the rate limiter's store is unreachable (docs/rate-limits.md): "pause", no new
    # call to a model starts until it is back (calls in flight finish; a call that waits
    # longer than its timeout_s ends errored, kind limiter_unavailable), or "per-process",
    # each worker process limits on its own (N processes may reach N times the limits).
    "LIMITER_ON_STORE_LOSS": os.environ.get("ASSAY_LIMITER_ON_STORE_LOSS", "pause"),
}

for _knob in ("TRIAL_LEASE_SECONDS", "SWEEP_SECONDS", "TRIAL_CHUNK_SIZE", "OUTBOX_GRACE_SECONDS"):
    if ASSAY[_knob] < 1:
        raise ImproperlyConfigured(f"ASSAY_{_knob} must be a positive integer, got {ASSAY[_knob]}")

if not 0 < ASSAY["HEARTBEAT_SECONDS"] < ASSAY["WORKER_SILENT_SECONDS"]:
    raise ImproperlyConfigured(
        f"ASSAY_HEARTBEAT_SECONDS must be positive and below ASSAY_WORKER_SILENT_SECONDS "
        f"({ASSAY['WORKER_SILENT_SECONDS']}), got {ASSAY['HEARTBEAT_SECONDS']}"
    )

if ASSAY["LIMITER_ON_STORE_LOSS"] not in ("pause", "per-process"):
    raise ImproperlyConfigured(
        "ASSAY_LIMITER_ON_STORE_LOSS must be pause or per-process, got "
        f"{ASSAY['LIMITER_ON_STORE_LOSS']!r}"
    )

try:
    ASSAY["METRICS_ALLOWED_NETWORKS"] = networks_parse(
        os.environ.get("ASSAY_METRICS_ALLOWED_NETWORKS", DEFAULT_NETWORKS)
    )
    if isinstance(ASSAY["ENDPOINT_HOSTS"], str):  # the environment's text, set above
        ASSAY["ENDPOINT_HOSTS"] = host_entries_parse(ASSAY["ENDPOINT_HOSTS"])
except ValueError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None

# ASSAY_LOG_FORMAT: "text" (the default) or "json", one object a line with the run and trial
# ids where known (core.logs). Celery leaves the root logger to this configuration then.
LOG_FORMAT = os.environ.get("ASSAY_LOG_FORMAT", "text").strip().lower() or "text"
try:
    LOGGING = logging_config(log_format=LOG_FORMAT, level=os.environ.get("LOG_LEVEL", "INFO"))
except ValueError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
