"""`python manage.py demo`: the main job on the embedded default, end to end.

Migrates, loads the demo suites (and ../shared/data when present), starts a Celery worker,
runs the demo story (``demo.story``), the contract suite and the agent suite through it,
prints the links and the login, then serves the dashboard on 127.0.0.1:8000. The demo's
registry (``demo.registry``) is loaded here and passed to the worker it starts."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from core.errors import DomainError
from core.registry import registry_install, registry_load
from demo.load import agent_suite_load, contract_suite_load, demo_suites_load, demo_user_ensure
from demo.story import (
    agent_demo_run,
    contract_demo_run,
    demo_chapter,
    demo_experiment,
    demo_run,
)
from evals.baselines import baseline_current, baseline_set
from evals.grading.contract.decisions import run_decisions
from evals.models import Run, Suite
from evals.report.agents import run_disagreements
from interop.importers import results_import
from judges.models import JudgeVersion
from labeling.calibration_sets import calibration_set_build
from labeling.models import CalibrationSet

REAL_DATA = ("llmbar_pointwise", "halueval_general")
DEMO_REGISTRY = "demo.registry"
WATCH_SECONDS = 5.0  # how often the demo checks that its worker process is still there


def demo_registries() -> tuple[str, ...]:
    """The operator's ``ASSAY_REGISTRIES`` and ``demo.registry``."""
    listed = tuple(settings.ASSAY.get("REGISTRIES", ()))
    return listed if DEMO_REGISTRY in listed else (*listed, DEMO_REGISTRY)


def _address_free_or_fail(addrport: str) -> None:
    """``CommandError`` when the dashboard's address is taken, before anything starts."""
    host, _, port = addrport.rpartition(":")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as runserver does
            probe.bind((host or "127.0.0.1", int(port)))
    except (OSError, ValueError) as exc:
        raise CommandError(
            f"--addrport {addrport}: cannot listen there ({exc}); stop what uses it or "
            "choose another, e.g. python manage.py demo --addrport 127.0.0.1:8123"
        ) from exc


def _loopback(addrport: str) -> bool:
    """True when ``addrport`` listens on loopback only."""
    host = addrport.rpartition(":")[0].strip("[]") or "127.0.0.1"
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _group_kill(pgid: int) -> None:
    """SIGKILL what is left of a worker's process group; nothing when it is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class Command(BaseCommand):
    help = "Set up and serve the demo: migrate, load data, run the demo suites, serve."

    def add_arguments(self, parser):
        parser.add_argument(
            "--addrport",
            default="127.0.0.1:8000",
            help="where the dashboard listens (default 127.0.0.1:8000; e.g. 127.0.0.1:8123)",
        )
        parser.add_argument("--no-serve", action="store_true", help="stop after the demo runs")
        parser.add_argument("--username", default="demo")
        parser.add_argument(
            "--password", default=os.environ.get("ASSAY_DEMO_PASSWORD", "assay-demo")
        )
        parser.add_argument("--trials", type=int, default=5)
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")

    def handle(self, *args, **opts):
        if not opts["no_serve"]:
            _address_free_or_fail(opts["addrport"])  # before any run: nothing left behind
        registry_install(registry_load(modules=demo_registries()))
        call_command("migrate", interactive=False, verbosity=0)
        user = demo_user_ensure(username=opts["username"], password=opts["password"])
        suites = demo_suites_load()
        self.stdout.write(f"demo suites: {', '.join(s.name for s in suites)}")
        self._import_real_data()

        self._worker = self._start_worker()
        self._stopping = threading.Event()
        watchdog = threading.Thread(target=self._watch_worker, name="demo-worker-watchdog")
        watchdog.daemon = True
        watchdog.start()
        # The worker runs in its own session (Ctrl-C in the terminal must not reach it
        # before the server stops): on SIGTERM/SIGHUP exit through `finally`, which stops it.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda *_: sys.exit(0))
        try:
            for index, suite in enumerate(suites):
                self._demo_suite_runs(suite, index, user, opts)
            self._demo_experiment(suites[0], user, opts)
            self._demo_contract_run(user, opts)
            self._demo_agent_run(user, opts)
            self._demo_calibration_set(user)
            self.stdout.write(
                self.style.SUCCESS(
                    f"\nDashboard: http://{opts['addrport']}/  login: {opts['username']} / "
                    f"{opts['password']}\n"
                )
            )
            if not opts["no_serve"]:
                if _loopback(opts["addrport"]):
                    # Django's "This is a development server" warning is about serving
                    # others; a demo on this machine's loopback serves no one else. On any
                    # other address it stays.
                    os.environ["DJANGO_RUNSERVER_HIDE_WARNING"] = "true"
                call_command("runserver", opts["addrport"], use_reloader=False)
        finally:
            self._stopping.set()
            self._stop_worker(self._worker)

    def _watch_worker(self) -> None:
        """Every WATCH_SECONDS restart an exited worker; one that dies within a minute of its start
        waits a minute first."""
        while not self._stopping.wait(WATCH_SECONDS):
            code = self._worker.poll()
            if code is None:
                continue
            self.stderr.write(
                self.style.WARNING(
                    f"WARNING: the Celery worker exited (code {code}); starting a new one"
                )
            )
            # Its embedded beat is a child in the same process group: without this it would
            # live on as an orphan beside the new worker's own beat.
            _group_kill(self._worker.pid)
            if time.monotonic() - self._worker_started < 60 and self._stopping.wait(60):
                return
            if not self._stopping.is_set():
                self._worker = self._start_worker()

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
        self._worker_started = time.monotonic()
        env = {**os.environ, "ASSAY_REGISTRIES": ",".join(demo_registries())}
        return subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, start_new_session=True)

    @staticmethod
    def _stop_worker(worker: subprocess.Popen) -> None:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)

    def _demo_suite_runs(self, suite, index: int, user, opts) -> None:
        """A baseline run the first time; every time, a run of the edited prompt and a re-run of the
        baseline, each gated against the baseline (``demo.story``)."""

        baseline = baseline_current(suite=suite)
        if baseline is None:
            base = self._run(suite, index, user, opts, changed=False)
            if base.status != Run.Status.SUCCEEDED:
                return
            baseline = baseline_set(suite=suite, run=base, by=user, note="demo baseline")
        chapters = [
            ("the prompt edit (prompt revision demo-2)", True),
            ("a re-run of the baseline configuration (prompt revision demo-1, new draws)", False),
        ]
        for title, changed in chapters:
            head = self._run(suite, index, user, opts, changed=changed)
            chapter = demo_chapter(title=title, base=baseline.run, head=head)
            url = reverse(
                "evals:comparison", kwargs={"head_id": head.uuid, "base_id": baseline.run.uuid}
            )
            self.stdout.write(
                f"  {title} against the baseline {baseline.run.name}: gate exit "
                f"{chapter.exit_code}. {chapter.sentence}\n    -> http://{opts['addrport']}{url}"
            )

    def _run(self, suite, index: int, user, opts, *, changed: bool) -> Run:
        seed = 1000 + 100 * index + Run.objects.filter(suite=suite).count()
        try:
            run = demo_run(
                suite=suite,
                seed=seed,
                user=user,
                trials=opts["trials"],
                changed=changed,
                timeout=opts["timeout"],
            )
        except DomainError as error:
            raise CommandError(str(error)) from error
        self._say_run(run)
        return run

    def _say_run(self, run: Run) -> None:
        self.stdout.write(
            f"run {run.suite.name} / {run.name}: {run.status} "
            f"({run.trials_finished} of {run.trials_total} trials, "
            f"{run.trials_errored} errored) -> /runs/{run.uuid}/"
        )

    def _demo_experiment(self, suite, user, opts) -> None:
        """The first time, an experiment of three prompts on ``suite``; every time, its decision."""
        from evals.experiments.decision import experiment_decision  # noqa: PLC0415
        from evals.models import Experiment  # noqa: PLC0415

        experiment = Experiment.objects.filter(suite=suite).first()
        if experiment is None:
            try:
                experiment = demo_experiment(
                    suite=suite, seed=5000, user=user, trials=opts["trials"],
                    timeout=opts["timeout"],
                )  # fmt: skip
            except DomainError as error:
                raise CommandError(str(error)) from error
        decision = experiment_decision(experiment=experiment)
        self.stdout.write(
            f"experiment {experiment.name!r}: {decision.sentence}\n"
            f"    -> http://{opts['addrport']}/experiments/{experiment.uuid}/"
        )

    def _demo_contract_run(self, user, opts) -> None:
        """One contract-suite run the first time, and its decisions."""
        suite = contract_suite_load()
        run = Run.objects.filter(suite=suite).first()
        if run is None:
            try:
                run = contract_demo_run(
                    suite=suite,
                    seed=3000,
                    user=user,
                    trials=opts["trials"] * 2,
                    timeout=opts["timeout"],
                )
            except DomainError as error:
                raise CommandError(str(error)) from error
        self._say_run(run)
        c = run_decisions(run=run).counts
        self.stdout.write(
            f"  contract decisions: {c['rejected']} rejected, {c['review']} in review, "
            f"{c['accepted']} accepted"
        )

    def _demo_agent_run(self, user, opts) -> None:
        """One refund-agent run the first time, with its 2 x 2 and disagreements."""
        suite = agent_suite_load()
        run = Run.objects.filter(suite=suite).first()
        if run is None:
            try:
                run = agent_demo_run(
                    suite=suite, seed=4000, user=user, trials=opts["trials"] * 2,
                    timeout=opts["timeout"],
                )  # fmt: skip
            except DomainError as error:
                raise CommandError(str(error)) from error
        self._say_run(run)
        agents = run_disagreements(run=run)
        if agents is not None:
            self.stdout.write(
                f"  agent: {agents.outcome_only.trials} right outcome by a wrong path, "
                f"{agents.path_only.trials} wrong outcome on the expected path, of "
                f"{agents.in_table} trials"
            )

    def _demo_calibration_set(self, user) -> None:
        """A 30-trial calibration set on the imported LLMBar run's first recorded judge."""

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
