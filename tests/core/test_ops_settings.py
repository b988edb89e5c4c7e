"""The operations settings are checked when the settings load: a heartbeat not below the silence
threshold, a malformed metrics network, an unknown log format each stop the start, named."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_DIR


def _settings_load(**env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DEBUG": "true", **env}
    return subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=PROJECT_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"ASSAY_HEARTBEAT_SECONDS": "60"},
            "ASSAY_HEARTBEAT_SECONDS must be positive and below ASSAY_WORKER_SILENT_SECONDS (60)",
        ),
        (
            {"ASSAY_METRICS_ALLOWED_NETWORKS": "10.0.0.0/8,everywhere"},
            "ASSAY_METRICS_ALLOWED_NETWORKS: 'everywhere' is not a network",
        ),
        ({"ASSAY_LOG_FORMAT": "xml"}, "ASSAY_LOG_FORMAT='xml' is not one of text, json"),
    ],
)
def test_a_bad_operations_setting_stops_the_start_naming_it(env, message):
    loaded = _settings_load(**env)
    assert loaded.returncode != 0
    assert "ImproperlyConfigured" in loaded.stderr and message in loaded.stderr


def test_good_values_load_a_format_in_any_case_and_no_network():
    loaded = _settings_load(
        ASSAY_HEARTBEAT_SECONDS="15", ASSAY_METRICS_ALLOWED_NETWORKS="", ASSAY_LOG_FORMAT="JSON"
    )
    assert loaded.returncode == 0, loaded.stderr
