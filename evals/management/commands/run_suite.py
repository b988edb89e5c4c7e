"""``manage.py run_suite SUITE --target FILE.json|--target-preset NAME|--simulated``: start a
run, optionally wait; ``--graders FILE.json`` or ``--grader-set NAME``.

Exit codes with ``--wait``: 0 succeeded, 1 failed, 2 anything else. Without it, prints the
run id and exits 0 once the run is queued."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connections

from core.commands import DomainCommand, seed_arg
from core.ids import uuid_parse
from evals.models import GraderSetPreset, Run, Suite, TargetPreset, TopUp
from evals.run_status import run_count_summary
from evals.runner.start import (
    DEFAULT_TRIALS_PER_CASE,
    run_name_default,
    run_publish_warning,
    run_start,
)

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_OTHER = 0, 1, 2

# How often ``--wait`` looks at the run, seconds: one primary-key read of its status, so
# the command exits within this of the run's end (bench/bench_start.py).
WAIT_POLL_S = 0.05

SIMULATED_TARGET = {"kind": "simulated", "model": "simulated", "seed": 1234}


def _json_file(path: str, *, option: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise CommandError(f"{option}: cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{option}: {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc


def _suite_get(ref: str) -> Suite:
    suite = Suite.objects.filter(name=ref).first()
    if suite is None:
        ref_uuid = uuid_parse(ref)
        suite = Suite.objects.filter(uuid=ref_uuid).first() if ref_uuid else None
    if suite is None:
        raise CommandError(f"SUITE: no suite named {ref!r}")
    return suite


class Command(DomainCommand):
    help = "Start a run of a suite against a target; with --wait, wait and exit 0/1/2."
    # No system checks: they import every URLconf and view (scipy.signal and pandas among
    # them), seconds of start-up before the run is even created; the web
    # process and `manage.py check` still run them.
    requires_system_checks: list[str] = []

    def run_from_argv(self, argv: list[str]) -> None:
        """From the command line only: once done, flush, close the connections and exit at once,
        skipping the interpreter's teardown (about a second), so ``--wait`` ends with the run."""
        try:
            super().run_from_argv(argv)
            code: object = 0
        except SystemExit as exc:
            code = exc.code
        if code is not None and not isinstance(code, int):
            raise SystemExit(code)
        _exit_now(code or 0)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("suite", metavar="SUITE", help="suite name (or uuid)")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--target", metavar="FILE.json", help="target configuration file")
        target.add_argument(
            "--simulated", action="store_true", help="use the simulated target (no network)"
        )
        target.add_argument(
            "--target-preset", metavar="NAME", help="a target preset declared with apply_config"
        )
        parser.add_argument(
            "--seed",
            type=seed_arg,
            default=None,
            help="seed of --simulated, 0 to 2**63 - 1 (default 1234)",
        )
        parser.add_argument(
            "--trials",
            type=int,
            default=DEFAULT_TRIALS_PER_CASE,
            help=f"trials per case (default {DEFAULT_TRIALS_PER_CASE}, as on the form and the API)",
        )
        parser.add_argument("--name", default=None, help="run name (default: run-<UTC time>)")
        graders = parser.add_mutually_exclusive_group()
        graders.add_argument("--graders", metavar="FILE.json", help="grader set: a JSON list")
        graders.add_argument(
            "--grader-set", metavar="NAME", help="a grader set preset declared with apply_config"
        )
        parser.add_argument(
            "--against",
            metavar="BASE_RUN",
            default=None,
            help="an adaptive run: after N trials per case, more trials only where the "
            "comparison with this run (UUID, 'suite/run' or a unique run name) is uncertain, "
            "up to 4N",
        )
        parser.add_argument("--wait", action="store_true", help="wait until the run ends")
        parser.add_argument(
            "--timeout", type=float, default=3600.0, help="seconds --wait waits (default 3600)"
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        suite = _suite_get(opts["suite"])
        if opts["simulated"]:
            target = dict(SIMULATED_TARGET)
            if opts["seed"] is not None:
                target["seed"] = opts["seed"]
        elif opts["target_preset"]:
            preset = TargetPreset.objects.filter(name=opts["target_preset"]).first()
            if preset is None:
                raise CommandError(
                    f"--target-preset: no target preset named "
                    f"{opts['target_preset']!r} (declare it with apply_config)"
                )
            target = preset.config
        else:
            target = _json_file(opts["target"], option="--target")
            if not isinstance(target, dict):
                raise CommandError("--target: expected a JSON object")
        if opts["grader_set"]:
            grader_set = GraderSetPreset.objects.filter(name=opts["grader_set"]).first()
            if grader_set is None:
                raise CommandError(
                    f"--grader-set: no grader set named {opts['grader_set']!r} "
                    "(declare it with apply_config)"
                )
            graders = grader_set.graders
        else:
            graders = _json_file(opts["graders"], option="--graders") if opts["graders"] else []
        if not isinstance(graders, list):
            raise CommandError("--graders: expected a JSON list of grader specs")
        name = opts["name"] or run_name_default(suite=suite)
        against = None
        if opts["against"]:
            # evals.selectors imports the run list's figures (numpy): only an adaptive run
            # needs its lookup, not every start.
            from evals.selectors import run_lookup  # noqa: PLC0415

            against = run_lookup(opts["against"])
        run = run_start(
            suite=suite,
            name=name,
            target=target,
            graders=graders,
            trials_per_case=opts["trials"],
            against=against,
        )
        warning = run_publish_warning(run=run)
        if warning:
            self.stderr.write(f"warning: {warning}")

        if not opts["wait"]:
            self._report(run, opts, waited=False)
            return
        deadline = time.monotonic() + opts["timeout"]
        run.refresh_from_db()
        while not _settled(run) and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            if _status(run) in Run.TERMINAL:
                run.refresh_from_db()
        self._report(run, opts, waited=True)
        if run.status == Run.Status.SUCCEEDED:
            code = EXIT_SUCCEEDED
        elif run.status == Run.Status.FAILED:
            code = EXIT_FAILED
        else:
            code = EXIT_OTHER
        if code:
            sys.exit(code)

    def _report(self, run: Run, opts: dict, *, waited: bool) -> None:
        summary: dict[str, Any] = {
            "run": str(run.uuid),
            "suite": run.suite.name,
            "name": run.name,
            "status": run.status,
            "trials_total": run.trials_total,
            "trials_finished": run.trials_finished,
            "trials_errored": run.trials_errored,
            "trials_cancelled": run.trials_cancelled,
            "error_message": run.error_message,
        }
        if waited and not run.is_terminal:
            summary["error_message"] = f"timed out after {opts['timeout']} s (status {run.status})"
        if opts["json"]:
            self.stdout.write(json.dumps(summary))
            return
        self.stdout.write(
            f"run {run.ref_text} of suite {run.suite.name}: {run.status}; {run_count_summary(run)}"
        )
        if summary["error_message"]:
            self.stdout.write(summary["error_message"])


def _exit_now(code: int) -> None:
    """Flush output and log, close database connections, and ``os._exit(code)``."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    connections.close_all()
    os._exit(code)


def _status(run: Run) -> str | None:
    """The run's stored status (one primary-key read of one column)."""
    return Run.objects.filter(id=run.id).values_list("status", flat=True).first()


def _settled(run: Run) -> bool:
    """The run is over: finished, and for an adaptive run its top-up ended too."""
    if not run.is_terminal:
        return False
    if run.against_id is None or run.status != Run.Status.SUCCEEDED:
        return True
    top_up = TopUp.objects.filter(head=run, base_id=run.against_id).first()
    return top_up is not None and top_up.is_terminal
