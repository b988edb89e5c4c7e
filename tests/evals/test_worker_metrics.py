"""Metrics, readiness and JSON logs with a real Celery worker process (tests/evals/test_worker.py
has the fixtures): the web's /metrics shows the worker's counters moving during a run, and
/readyz reports a stopped worker once its heartbeat is older than the threshold."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from evals.models import Run
from evals.runner.start import run_start
from tests.evals import test_worker
from tests.evals.test_worker import GRADERS, _run_wait, _suite, _worker_log, _worker_stop
from tests.fakellm import FakeLLM
from tests.metrics_scrape import scrape, value

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

# test_worker's fixtures: a real worker on a queue of the test's own.
worker_queue = test_worker.worker_queue
worker_factory = test_worker.worker_factory

HOST = {"provider": "openai", "host": "127.0.0.1"}


def test_a_scrape_during_a_run_sees_the_workers_trials_and_calls_move(
    worker_factory, tmp_path, settings
):
    settings.ASSAY = {**settings.ASSAY, "TRIAL_CHUNK_SIZE": 8}
    client = Client()
    with FakeLLM() as llm:
        worker_factory(env={"ASSAY_LOG_FORMAT": "json"})
        suite = _suite(12)
        target = {
            "kind": "openai",
            "base_url": llm.base_url,
            "model": "fake-model",
            "prompt_template": "[latency=250] $input",
            "concurrency": 2,
        }
        before = scrape(client)
        run = run_start(suite=suite, name="m1", target=target, graders=GRADERS, trials_per_case=2)
        mid_run = []  # (trials finished, calls answered, trials running) seen while running
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            samples = scrape(client)
            run.refresh_from_db()
            if run.is_terminal:
                break
            mid_run.append(
                (
                    value(samples, "assay_trials_finished_total", status="ok")
                    - value(before, "assay_trials_finished_total", status="ok"),
                    value(samples, "assay_provider_calls_total", **HOST, status="200")
                    - value(before, "assay_provider_calls_total", **HOST, status="200"),
                    value(samples, "assay_trials", status="running"),
                )
            )
            time.sleep(0.3)
        run = _run_wait(run, tmp_path)
        after = scrape(client)

    assert run.status == Run.Status.SUCCEEDED, _worker_log(tmp_path)
    moved = [m for m in mid_run if 0 < m[0] < 24]
    assert moved, mid_run  # counters moved while the run was still going
    assert any(m[1] > 0 and m[2] > 0 for m in mid_run), mid_run
    ok = value(after, "assay_trials_finished_total", status="ok") - value(
        before, "assay_trials_finished_total", status="ok"
    )
    calls = value(after, "assay_provider_calls_total", **HOST, status="200") - value(
        before, "assay_provider_calls_total", **HOST, status="200"
    )
    assert (ok, calls) == (24, 24)
    assert value(after, "assay_trials", status="running") == 0
    # The worker's logs are JSON lines; the chunk's carry the run's id.
    records = [
        json.loads(line)
        for path in tmp_path.glob("worker-*.log")
        for line in path.read_text().splitlines()
        if line.startswith("{")
    ]
    chunks = [r for r in records if "chunk of" in r["message"]]
    assert chunks and all(r["run_id"] == run.id for r in chunks), [r["message"] for r in records]


def test_readyz_reports_a_stopped_worker_once_its_heartbeat_is_too_old(
    worker_factory, tmp_path, settings
):
    settings.ASSAY = {**settings.ASSAY, "WORKER_SILENT_SECONDS": 3}
    client = Client()
    worker = worker_factory(env={"ASSAY_HEARTBEAT_SECONDS": "0.5"})
    deadline = time.monotonic() + 20
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, (client.get("/readyz").json(), _worker_log(tmp_path))
        time.sleep(0.2)
    time.sleep(2)  # beats keep it ready past its first heartbeat's threshold
    assert client.get("/readyz").status_code == 200

    _worker_stop(worker)
    stopped = time.monotonic()
    while (response := client.get("/readyz")).status_code == 200:
        assert time.monotonic() - stopped < 10, response.json()
        time.sleep(0.2)
    silent_s = time.monotonic() - stopped

    assert response.status_code == 503
    worker_check = {c["name"]: c for c in response.json()["checks"]}["worker"]
    assert worker_check["status"] == "failed"
    assert worker_check["reason"].endswith("(limit 3 s)")
    assert silent_s <= 3 + 1.5
