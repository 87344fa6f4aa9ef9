"""Settings, all from the environment (pypto_web.env), with defaults that need no service installed:
SQLite and a filesystem Celery broker. Point DATABASE_URL / CELERY_BROKER_URL at PostgreSQL and Redis
for a team deployment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from pypto_web.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PYPTO_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
# No built-in key outside DEBUG: a key everyone can read signs nothing (sessions, password resets, CSRF).
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set (a long random string) unless DEBUG=1")
    SECRET_KEY = "dev-only-secret-key-for-DEBUG-runs-never-deployed-0123456789abcdef"
if DEBUG and env_bool("PYPTO_PRODUCTION", False):
    raise ImproperlyConfigured("DEBUG must be off in production (PYPTO_PRODUCTION=1)")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "profiles",
    "analysis",
    "frontend",
    "captures",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "pypto_web.errors.ServiceUnavailableMiddleware",  # database down: 503 with a reason, not a 500 page
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "frontend.middleware.SessionLanguageMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "pypto_web.csp.ContentSecurityPolicyMiddleware",
]
# Pages run only the app's own scripts and styles (no inline script or style; data blocks are json_script).
# img-src data: for the charts' "save as image"; a response that sets its own policy keeps it (downloads).
PYPTO_CSP = env_str("PYPTO_CSP", "default-src 'self'; script-src 'self'; style-src 'self'; "
                                 "img-src 'self' data:; object-src 'none'; base-uri 'self'; "
                                 "form-action 'self'; frame-ancestors 'none'")

ROOT_URLCONF = "pypto_web.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
            ],
        },
    },
]

WSGI_APPLICATION = "pypto_web.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "/media-not-served/"  # uploads are never served directly; downloads go through views

# Storage: local disk by default; any S3-compatible store when PYPTO_S3_BUCKET is set (django-storages).
_S3_BUCKET = env_str("PYPTO_S3_BUCKET", "")
STORAGES = {
    "default": (
        {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": _S3_BUCKET,
                "endpoint_url": env_str("PYPTO_S3_ENDPOINT_URL", "") or None,
                "access_key": env_str("PYPTO_S3_ACCESS_KEY", "") or None,
                "secret_key": env_str("PYPTO_S3_SECRET_KEY", "") or None,
                "region_name": env_str("PYPTO_S3_REGION", "") or None,
                "default_acl": None,
                "file_overwrite": False,
            },
        }
        if _S3_BUCKET
        else {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    ),
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not DEBUG and env_bool("PYPTO_MANIFEST_STATIC", True)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG

# Upload limits (bytes unless named otherwise).
PYPTO_MAX_UPLOAD_BYTES = env_int("PYPTO_MAX_UPLOAD_BYTES", 20 * 1024**3)
# Per project: bytes of kept archives (0 = no quota). Uploads in flight (open chunked uploads plus
# profiles not yet ready) per user and per project; over a limit the API answers 413 / 429 with the reason.
PYPTO_PROJECT_QUOTA_BYTES = env_int("PYPTO_PROJECT_QUOTA_BYTES", 0)
PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_USER = env_int("PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_USER", 20)
PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_PROJECT = env_int("PYPTO_MAX_UPLOADS_IN_FLIGHT_PER_PROJECT", 100)
PYPTO_CHUNK_BYTES = env_int("PYPTO_CHUNK_BYTES", 8 * 1024**2)
PYPTO_MAX_ARCHIVE_MEMBERS = env_int("PYPTO_MAX_ARCHIVE_MEMBERS", 100_000)
PYPTO_MAX_UNPACKED_BYTES = env_int("PYPTO_MAX_UNPACKED_BYTES", 64 * 1024**3)
PYPTO_MAX_COMPRESSION_RATIO = env_int("PYPTO_MAX_COMPRESSION_RATIO", 200)
# What one upload may make (pypto_core/limits.py): text cells (op names...) cut at this many characters, rows
# per table, and seconds of SQLite reading.
PYPTO_MAX_TEXT_CHARS = env_int("PYPTO_MAX_TEXT_CHARS", 4096)
PYPTO_MAX_TABLE_ROWS = env_int("PYPTO_MAX_TABLE_ROWS", 500_000_000)
PYPTO_SQLITE_SECONDS = env_int("PYPTO_SQLITE_SECONDS", 1800)
PYPTO_ALLOW_SIGNUP = env_bool("PYPTO_ALLOW_SIGNUP", False)
# Chunked uploads are appended here (local disk of the web process) until complete, then moved to storage.
PYPTO_UPLOAD_TMP_DIR = Path(env_str("PYPTO_UPLOAD_TMP_DIR", str(VAR_DIR / "uploads-partial")))
# Where workers unpack archives (deleted after each step; the archive in storage stays).
PYPTO_WORK_DIR = Path(env_str("PYPTO_WORK_DIR", str(VAR_DIR / "work")))
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 16 * 1024**2)
FILE_UPLOAD_MAX_MEMORY_SIZE = env_int("FILE_UPLOAD_MAX_MEMORY_SIZE", 4 * 1024**2)
FILE_UPLOAD_TEMP_DIR = None

# Celery: Redis in production; a filesystem broker needing no server by default.
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any]
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT = "pypto_web.fs_broker:Transport"  # kombu's, with messages written atomically
    for _sub in ("out", "processed", "control"):
        (_BROKER_DIR / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_BROKER_DIR / "out"),
        "data_folder_out": str(_BROKER_DIR / "out"),
        "data_folder_processed": str(_BROKER_DIR / "processed"),
        "control_folder": str(_BROKER_DIR / "control"),  # default is ./control in the working directory
    }
else:
    # visibility_timeout: how long an unacknowledged (late-ack) task waits before redelivery.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600),
        # How often a worker sweeps for unacknowledged messages of dead workers (seconds x throttle).
        "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_INTERVAL", 10),
        "unacked_restore_throttle": env_int("CELERY_UNACKED_RESTORE_THROTTLE", 10),
    }
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_RESULT_BACKEND = None  # job state lives in models, never in a result backend
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 1800)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 2000)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = env_int("CELERY_WORKER_MAX_MEMORY_PER_CHILD", 2 * 1024 * 1024)  # KiB
CELERY_TASK_DEFAULT_QUEUE = "light"
# A pipeline step holds its profile for this long, renewed at every progress write. It outlives the task's
# hard time limit, so only a dead worker's step can be taken over by a redelivered message.
PYPTO_TASK_LEASE_SECONDS = env_int("PYPTO_TASK_LEASE_SECONDS", CELERY_TASK_TIME_LIMIT + 60)
# Operations/test hook: while this file exists, pipelines pause right after claiming a profile
# (lets an operator or a test stop a worker mid-task). Empty: no pause.
PYPTO_PIPELINE_HOLD_FILE = env_str("PYPTO_PIPELINE_HOLD_FILE", "")
# The recovery sweep (analysis/recovery.py), run by Celery beat (`celery worker -B` in `make run`, the beat
# service in docker/compose.yaml): expired leases queued again, or failed after this many attempts (a profile
# that kills its worker each time); queued profiles no worker took for PYPTO_REQUEUE_AFTER_S queued again;
# partial uploads nobody resumed for PYPTO_PARTIAL_UPLOAD_DAYS removed.
PYPTO_SWEEP_INTERVAL_S = env_int("PYPTO_SWEEP_INTERVAL_S", 60)
PYPTO_MAX_STEP_ATTEMPTS = env_int("PYPTO_MAX_STEP_ATTEMPTS", 3)
PYPTO_REQUEUE_AFTER_S = env_int("PYPTO_REQUEUE_AFTER_S", 900)
PYPTO_PARTIAL_UPLOAD_DAYS = env_int("PYPTO_PARTIAL_UPLOAD_DAYS", 7)
CELERY_BEAT_SCHEDULE = {
    "recovery-sweep": {"task": "analysis.tasks.sweep", "schedule": float(PYPTO_SWEEP_INTERVAL_S),
                       "options": {"queue": "light", "expires": float(PYPTO_SWEEP_INTERVAL_S)}},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# A multi-rank archive with at least this many ranks is read as one ingest task per rank (fan-out).
PYPTO_FANOUT_MIN_RANKS = env_int("PYPTO_FANOUT_MIN_RANKS", 2)
# Capture jobs (captures/services.py jobs_expire): a claimed job must end within the workload's timeout as its
# agent reported it (else the default, agent_config's DEFAULT_TIMEOUT_S) plus the grace (the agent's own
# kill, pack and report); a job whose agent sent nothing for AGENT_STALE_S is failed (agents are told to
# heartbeat at a third of it, at most every 15 s). 300 s:
# 20 missed beats, longer than the agent's 30 s backoff.
PYPTO_CAPTURE_DEFAULT_TIMEOUT_S = env_int("PYPTO_CAPTURE_DEFAULT_TIMEOUT_S", 3600)
PYPTO_CAPTURE_GRACE_S = env_int("PYPTO_CAPTURE_GRACE_S", 600)
PYPTO_CAPTURE_AGENT_STALE_S = env_int("PYPTO_CAPTURE_AGENT_STALE_S", 300)
CELERY_TASK_ROUTES = {
    "analysis.tasks.ingest*": {"queue": "ingest"},
    "analysis.tasks.diagnose*": {"queue": "diagnose"},
    # page views and trace exports load a whole rank, as diagnose does (analysis/page_builds.py)
    "analysis.tasks.page_build": {"queue": "diagnose"},
}
# Every queue declared: a bare `celery -A pypto_web worker` (as every Celery guide starts one) consumes all
# three; the compose file keeps separate pools with -Q.
CELERY_TASK_QUEUES = [Queue("ingest"), Queue("diagnose"), Queue("light")]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "profiles.auth.ExpiringTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": None,
    "EXCEPTION_HANDLER": "pypto_web.errors.api_exception_handler",  # database down: 503 with a reason
    "DEFAULT_THROTTLE_RATES": {"auth": env_str("PYPTO_AUTH_RATE", "30/min")},  # token requests per address
}
# Password guessing (profiles/throttling.py): after this many failures in the window, for one user name or
# from one address, both the login page and /api/auth/token/ refuse (429) until the window has passed, even
# the right password. API tokens expire after PYPTO_TOKEN_TTL_S; asking again gives a fresh one.
PYPTO_LOGIN_FAILURES = env_int("PYPTO_LOGIN_FAILURES", 10)
PYPTO_LOGIN_WINDOW_S = env_int("PYPTO_LOGIN_WINDOW_S", 900)
PYPTO_TOKEN_TTL_S = env_int("PYPTO_TOKEN_TTL_S", 30 * 24 * 3600)
# The counters live in the cache: Redis when PYPTO_CACHE_URL is set (several web processes share them),
# else the process's memory.
_CACHE_URL = env_str("PYPTO_CACHE_URL", "")
CACHES = {"default": (
    {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _CACHE_URL, "KEY_PREFIX": "pypto"}
    if _CACHE_URL else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"})}
SPECTACULAR_SETTINGS = {
    "TITLE": "PyPTO API", "VERSION": "1", "SERVE_INCLUDE_SCHEMA": False,
    # each operation's summary and each tag's label, translated (pypto_web/api_docs.py)
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "pypto_web.api_docs.add_summaries"],
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# Security: strict by default when not DEBUG (manage.py check --deploy is clean with production env).
_SECURE = not DEBUG and env_bool("PYPTO_HTTPS", False)
SESSION_COOKIE_SECURE = _SECURE
CSRF_COOKIE_SECURE = _SECURE
SECURE_SSL_REDIRECT = _SECURE
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if _SECURE else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _SECURE
SECURE_HSTS_PRELOAD = _SECURE
SECURE_PROXY_SSL_HEADER = (("HTTP_X_FORWARDED_PROTO", "https") if env_bool("PYPTO_BEHIND_PROXY", False)
                           else None)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
