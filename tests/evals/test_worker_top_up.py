"""Settling a suspect through a real Celery worker process (issue 11: the top-up flow tested
end to end through a real worker), with the fixtures of tests/evals/test_worker.py: the
worker listens on a queue of its own, on the same test database and broker (the filesystem
broker on SQLite, Redis on PostgreSQL).

The runs are the ones of tests/evals/test_top_up.py (simulated, seeded: c00 dropped from 1.0
to 0.3, 5/5 -> 3/5 at the first look), so the worker must reach the very decision and
trial counts the eager tests assert.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
from django.core.management import call_command
from django.urls import reverse

from config.celery import app
from evals.comparison.topup import top_up_start
from evals.models import Run, TopUp, Trial
from evals.runner.start import run_start
from evals.tasks import top_up_advance
from tests.conftest import PROJECT_DIR
from tests.core.test_api_core import client_for
from tests.evals.test_top_up import GRADERS, N, executed, make_suite, sim
from tests.evals.test_worker import (  # noqa: F401 - worker_queue is a pytest fixture
    _database_url,
    _worker_log,
    _worker_stop,
    worker_queue,
)

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


@pytest.fixture
def worker_factory(worker_queue, tmp_path):  # noqa: F811 - worker_queue is a fixture
    """As tests/evals/test_worker.py's, with ``tests.worker_app``: the tasks a worker sends
    go to the test's queue too."""
    started = []

    def start(
        *, pool: str = "solo", concurrency: int = 1, queues: str | None = None
    ) -> subprocess.Popen:
        env = os.environ.copy()
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            DATABASE_URL=_database_url(),
            CELERY_TASK_ALWAYS_EAGER="false",
            DEBUG="true",
            ASSAY_TEST_QUEUE=worker_queue,
        )
        log_path = tmp_path / f"worker-{len(started)}.log"
        log = log_path.open("wb")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "tests.worker_app",
                "worker",
                "--pool",
                pool,
                "--concurrency",
                str(concurrency),
                "--queues",
                worker_queue,
                "--loglevel",
                "INFO",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                "--hostname",
                f"{worker_queue}-{len(started)}@%h",
            ],  # fmt: skip
            cwd=PROJECT_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append((process, log))
        return process

    yield start
    for process, log in started:
        try:
            _worker_stop(process)
        finally:
            log.close()


def _pair() -> tuple[Run, Run]:
    """The two runs, executed eagerly in this process while the worker boots: only the
    top-up is the worker's."""
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        suite = make_suite()
        base = executed(suite, "base", sim(1))
        head = executed(suite, "head", sim(1003, c00=0.3))
    finally:
        app.conf.task_always_eager = saved
    assert base.status == head.status == Run.Status.SUCCEEDED
    return base, head


def _ready(tmp_path, index: int, seconds: float = 45) -> None:
    """Wait until worker ``index`` is consuming (its boot takes seconds on a busy machine)."""
    log = tmp_path / f"worker-{index}.log"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and " ready." in log.read_text(errors="replace"):
            return
        time.sleep(0.1)
    pytest.fail(f"worker {index} not ready after {seconds} s:\n{_worker_log(tmp_path)}")


def _top_up_wait(top_up: TopUp, tmp_path, seconds: float = 20) -> TopUp:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        top_up.refresh_from_db()
        if top_up.is_terminal:
            return top_up
        time.sleep(0.2)
    pytest.fail(f"top-up still {top_up.status} after {seconds} s:\n{_worker_log(tmp_path)}")


def _assert_settled_as_eager(top_up: TopUp, base: Run, head: Run) -> None:
    """The decision and trials the eager tests find for these seeds."""
    assert (top_up.status, top_up.rounds_done, top_up.trials_added) == ("settled", 2, 30)
    assert top_up.decision["decision"]["sentence"].startswith(
        "Blocked: case c00 dropped from 20/20 to 9/20"
    )
    for run in (base, head):
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED
        assert Trial.objects.filter(run=run).count() == 12 * N + 15 == run.trials_total
        assert sorted(
            Trial.objects.filter(run=run, top_up=top_up).values_list("top_up_round", "attempt")
        ) == [(1, a) for a in range(6, 11)] + [(2, a) for a in range(11, 21)]


def test_gate_top_up_settles_a_suspect_through_a_real_worker_despite_duplicates(
    worker_factory,
    tmp_path,
    capsys,
):
    """Three more copies of the top-up's task message, taken by two threads at once: the
    rounds are added once each, and ``gate --top-up`` joins the top-up and exits 1."""
    worker_factory(pool="threads", concurrency=2)
    base, head = _pair()

    top_up = top_up_start(base=base, head=head)
    for _ in range(3):
        top_up_advance.delay(top_up.id)
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "gate", "--base", str(base.uuid), "--head", str(head.uuid), "--top-up",
            "--timeout", "20", "--json",
        )  # fmt: skip

    out = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == 1, _worker_log(tmp_path)
    assert out["decision"]["verdict"] == "block"
    assert TopUp.objects.count() == 1
    top_up.refresh_from_db()
    _assert_settled_as_eager(top_up, base, head)


def test_a_top_up_goes_on_after_its_worker_is_restarted(
    worker_factory,
    worker_queue,  # noqa: F811 - pytest fixture
    tmp_path,
):
    """The worker stops (warm shutdown) once round 1 is under way; the next worker finishes
    the rounds from the broker's messages and the database's state. (The next one boots
    meanwhile on an idle queue and is told to take the test's queue once the first has
    stopped: two boots one after the other would not fit a test's time on a busy machine.)"""
    first = worker_factory(pool="solo")
    idle = f"{worker_queue}-idle"
    second = worker_factory(pool="solo", queues=idle)
    base, head = _pair()
    _ready(tmp_path, 0)
    top_up = top_up_start(base=base, head=head)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        top_up.refresh_from_db()
        if top_up.rounds_done >= 1:
            break
        time.sleep(0.05)
    assert top_up.rounds_done >= 1, _worker_log(tmp_path)
    _worker_stop(first)
    assert second.poll() is None
    _ready(tmp_path, 1)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        replies = app.control.add_consumer(
            worker_queue, destination=[f"{worker_queue}-1@{socket.gethostname()}"], reply=True,
            timeout=1.0,
        )  # fmt: skip
        if replies:
            break
    assert replies, _worker_log(tmp_path)
    top_up = _top_up_wait(top_up, tmp_path)
    _assert_settled_as_eager(top_up, base, head)


def test_the_api_and_the_page_follow_a_top_up_a_real_worker_settles(
    worker_factory, tmp_path, carol, client
):
    """POST /api/gate {"top_up": true} answers 202 at once (the worker has the rounds);
    polling its URL, then the page's live partial, reach the settled decision."""
    worker_factory(pool="solo")
    base, head = _pair()
    _ready(tmp_path, 0)
    api = client_for(carol)
    response = api.post(
        "/api/gate", {"head": str(head.uuid), "base": str(base.uuid), "top_up": True}, format="json"
    )
    assert response.status_code == 202, response.content
    assert response.json()["status"] in ("queued", "running") and response.json()["result"] is None
    url = response.json()["url"]

    deadline = time.monotonic() + 20
    while (body := api.get(url).json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        time.sleep(0.2)
    assert body["status"] == "settled" and body["result"]["decision"]["exit_code"] == 1
    _assert_settled_as_eager(TopUp.objects.get(), base, head)
    client.force_login(carol)
    live = client.get(reverse("evals:comparison-top-up", args=[head.uuid, base.uuid]))
    assert "Blocked: case c00 dropped from 20/20 to 9/20" in live.content.decode()


def test_an_adaptive_run_settles_its_uncertain_case_through_a_real_worker(worker_factory, tmp_path):
    """Four cases: the worker runs the first N trials per case, then only c00's more."""
    worker_factory(pool="solo")
    saved = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        suite = make_suite(4)
        base = executed(suite, "base", sim(1))
    finally:
        app.conf.task_always_eager = saved
    _ready(tmp_path, 0)
    run = run_start(
        suite=suite, name="adaptive", target=sim(1003, c00=0.3), graders=GRADERS,
        trials_per_case=N, against=base,
    )  # fmt: skip
    deadline = time.monotonic() + 25
    while not (top_up := TopUp.objects.filter(head=run).first()) or not top_up.is_terminal:
        assert time.monotonic() < deadline, _worker_log(tmp_path)
        time.sleep(0.2)
    assert (top_up.status, top_up.adaptive) == ("settled", True), top_up.error
    assert top_up.decision["decision"]["verdict"] == "block"
    extra = Trial.objects.filter(run=run, attempt__gt=N)
    assert set(extra.values_list("case__key", flat=True)) == {"c00"}
    assert extra.count() == top_up.trials_added // 2 > 0
    assert top_up.decision["design"]["spent_trials"] == 2 * 4 * N + top_up.trials_added
