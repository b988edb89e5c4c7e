"""`python manage.py demo`: the main job on the embedded default, end to end.

Migrates, loads the demo suites and (when ../shared/data is present) real labeled data,
starts a real Celery worker on the configured broker (the server-less filesystem broker
by default), runs the demo suites through it against the simulated target, prints the
login, then serves the dashboard on 127.0.0.1:8000 with the worker alongside.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from demo.data import DEMO_GRADERS, PROMPT
from demo.load import demo_suites_load, demo_user_ensure
from evals.baselines import baseline_current, baseline_set
from evals.models import Run, Suite
from evals.runner.start import run_start
from interop.importers import results_import
from judges.models import JudgeVersion
from labeling.models import CalibrationSet
from labeling.services import calibration_set_build

REAL_DATA = ("llmbar_pointwise", "halueval_general")

# Per-case pass probabilities of the simulated assistant: it is weakest at the boundary.
PASS_PROBABILITY = {
    "at-boundary": 0.35,
    "above-boundary": 0.6,
    "below-boundary": 0.8,
    "no-receipt-boundary": 0.5,
    "no-receipt-large": 0.7,
    "split-bill": 0.4,
    "multi-currency": 0.5,
    "vague": 0.6,
}


def _reply(decision: str | None, policy: bool = True) -> str:
    body = {} if decision is None else {"decision": decision}
    if policy:
        body["policy_id"] = "EXP-7"
    return json.dumps(body)


# The simulated assistant's typical mistakes: off-by-one at the boundary, waving through a
# missing receipt, forgetting the policy id, answering in prose.
WRONG_OUTPUTS = {
    "at-boundary": [_reply("needs_approval"), _reply("needs_approval", policy=False)],
    "above-boundary": [_reply("approved")],
    "below-boundary": [_reply("needs_approval")],
    "no-receipt-boundary": [_reply("approved"), _reply("needs_approval")],
    "no-receipt-large": [_reply("needs_approval")],
    "split-bill": [_reply("approved"), "The claim looks fine to me."],
    "multi-currency": [_reply("needs_approval")],
    "vague": [_reply("approved"), _reply("approved", policy=False)],
}


# The "changed" assistant of the second run: a prompt edit that helps with vague claims and
# split bills but breaks the EUR 500.00 boundary, so the comparison has something to show.
CHANGED_PASS_PROBABILITY = {
    **PASS_PROBABILITY,
    "at-boundary": 0.1,
    "above-boundary": 0.3,
    "vague": 0.9,
    "split-bill": 0.7,
}


def demo_target(seed: int, *, changed: bool = False) -> dict:
    return {
        "kind": "simulated",
        "model": "simulated",
        "seed": seed,
        "prompt_template": PROMPT,
        "prompt_revision": "demo-2" if changed else "demo-1",
        "default_pass_probability": 0.95,
        "pass_probability": CHANGED_PASS_PROBABILITY if changed else PASS_PROBABILITY,
        "wrong_outputs": WRONG_OUTPUTS,
        "error_probability": 0.0,
        # Reported latency is drawn, not waited for (the run finishes in seconds).
        "latency_ms": [150, 900],
    }


class Command(BaseCommand):
    help = "Set up and serve the demo: migrate, load data, run the demo suites, serve."

    def add_arguments(self, parser):
        parser.add_argument("--addrport", default="127.0.0.1:8000")
        parser.add_argument("--no-serve", action="store_true", help="stop after the demo runs")
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--password", default=os.environ.get("ASSAY_DEMO_PASSWORD", "assay-demo")
        )
        parser.add_argument("--trials", type=int, default=5)
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")

    def handle(self, *args, **opts):
        call_command("migrate", interactive=False, verbosity=0)
        user = demo_user_ensure(username=opts["username"], password=opts["password"])
        suites = demo_suites_load()
        self.stdout.write(f"demo suites: {', '.join(s.name for s in suites)}")
        self._import_real_data()

        worker = self._start_worker()
        # The worker runs in its own session (Ctrl-C in the terminal must not reach it
        # before the server stops): on SIGTERM/SIGHUP exit through `finally`, which stops it.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda *_: sys.exit(0))
        try:
            for index, suite in enumerate(suites):
                self._demo_suite_runs(suite, index, user, opts)
            self._demo_calibration_set(user)
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nDashboard: http://{opts['addrport']}/  login: {opts['username']} / "
                    f"{opts['password']}\n"
                )
            )
            if not opts["no_serve"]:
                call_command("runserver", opts["addrport"], use_reloader=False)
        finally:
            self._stop_worker(worker)

    def _import_real_data(self) -> None:

        data_dir = Path(settings.BASE_DIR).parent / "shared" / "data"
        for folder in REAL_DATA:
            path = data_dir / folder / f"{folder}.shared.jsonl"
            if not path.exists() or Suite.objects.filter(name=folder).exists():
                continue
            with path.open("rb") as stream:
                summary = results_import(
                    stream=stream, filename=path.name, suite_name=folder, run_name="recorded"
                )
            self.stdout.write(
                f"imported {folder}: {summary.trials} trials, {summary.labels} labels"
            )

    def _start_worker(self) -> subprocess.Popen:
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "WARNING",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            # Embedded beat runs the sweeper (evals.runner.sweeper) every ASSAY["SWEEP_SECONDS"].
            "--beat",
            "--schedule",
            str(settings.VAR_DIR / "celery" / "beat-schedule"),
        ]
        self.stdout.write(f"starting a Celery worker on {settings.CELERY_BROKER_URL}")
        return subprocess.Popen(command, cwd=settings.BASE_DIR, start_new_session=True)

    @staticmethod
    def _stop_worker(worker: subprocess.Popen) -> None:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)

    def _demo_suite_runs(self, suite, index: int, user, opts) -> None:
        """The first time: a baseline run (set as the suite's baseline). Every time: a run
        of the changed assistant, and the link to its comparison with the baseline."""

        baseline = baseline_current(suite=suite)
        if baseline is None:
            base = self._run_demo_suite(suite, index, user, opts, changed=False)
            self._say_run(base)
            if base.status != Run.Status.SUCCEEDED:
                return
            baseline = baseline_set(suite=suite, run=base, by=user, note="demo baseline")
        head = self._run_demo_suite(suite, index, user, opts, changed=True)
        self._say_run(head)
        url = reverse(
            "evals:comparison", kwargs={"head_id": head.uuid, "base_id": baseline.run.uuid}
        )
        self.stdout.write(f"  compared with the baseline {baseline.run.name}: {url}")

    def _say_run(self, run: Run) -> None:
        self.stdout.write(
            f"run {run.suite.name} / {run.name}: {run.status} "
            f"({run.trials_finished} of {run.trials_total} trials, "
            f"{run.trials_errored} errored) -> /runs/{run.uuid}/"
        )

    def _demo_calibration_set(self, user) -> None:
        """A 30-trial calibration set on the imported LLMBar run with its first recorded
        judge, so the labeling queue and the calibration page have something to show."""

        run = Run.objects.filter(suite__name=REAL_DATA[0], name="recorded").first()
        if run is None or CalibrationSet.objects.filter(run=run).exists():
            return
        version = (
            JudgeVersion.objects.filter(grades__trial__run=run).distinct().order_by("id").first()
        )
        cset = calibration_set_build(
            run=run,
            name="demo: label 30 LLMBar outputs",
            by=user,
            judge_version=version,
            size=30,
            seed=1,
        )
        self.stdout.write(f"calibration set {cset.name!r}: /calibration-sets/{cset.uuid}/")

    def _run_demo_suite(self, suite, index: int, user, opts, *, changed: bool) -> Run:

        name = f"demo-{Run.objects.filter(suite=suite).count() + 1}"
        run = run_start(
            suite=suite,
            name=name,
            target=demo_target(seed=1000 + index + (100 if changed else 0), changed=changed),
            graders=DEMO_GRADERS,
            trials_per_case=opts["trials"],
            source_version="demo",
            started_by=user,
        )
        deadline = time.monotonic() + opts["timeout"]
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.is_terminal:
                return run
            time.sleep(0.5)
        raise CommandError(
            f"run {name} did not finish within {opts['timeout']} s: is the worker running?"
        )
