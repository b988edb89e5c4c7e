"""Test settings: fast hashing and eager Celery by default; DATABASE_URL / REDIS_URL run the
suite on PostgreSQL and a real worker (.ci/run)."""

import os
import tempfile

os.environ.setdefault("DEBUG", "true")
os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production-" + "x" * 20)
os.environ.setdefault("ASSAY_VAR_DIR", tempfile.mkdtemp(prefix="assay-test-var-"))
# Each test process its own counters (core.metrics.store; its Celery workers inherit the
# folder): a test reads its own counts, not a parallel test process's.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="assay-test-metrics-")
# The registered functions the tests name: the demo's, the examples' and the tests' own
# (core.registry).
os.environ.setdefault("ASSAY_REGISTRIES", "demo.registry,examples.registry,tests.registry")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not memory: the worker tests' Celery subprocess opens the same test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
