"""``manage.py run_retry RUN [--wait] [--json]``: retry a failed run's errored trials (the
errored attempts stay as history; new attempts replace them in every figure)."""

from __future__ import annotations

import json
import sys
import time

from core.commands import DomainCommand
from evals.runner.retry import run_retry
from evals.runner.start import run_publish_warning
from evals.selectors import run_lookup


class Command(DomainCommand):
    help = "Retry a run's errored trials; the run is finalized again when they are done."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", help="run UUID, 'suite/run' or a unique run name")
        parser.add_argument("--wait", action="store_true", help="wait until the run ends")
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        run = run_lookup(options["run"])
        new = run_retry(run=run)
        warning = run_publish_warning(run=run)
        if warning:
            self.stderr.write(f"warning: {warning}")
        if options["wait"]:
            deadline = time.monotonic() + options["timeout"]
            run.refresh_from_db()
            while not run.is_terminal and time.monotonic() < deadline:
                time.sleep(0.5)
                run.refresh_from_db()
        run.refresh_from_db()
        out = {
            "run": str(run.uuid),
            "retried": len(new),
            "status": run.status,
            "trials_errored": run.trials_errored,
        }
        if options["json"]:
            self.stdout.write(json.dumps(out))
        else:
            self.stdout.write(
                f"run {run.ref_text}: {len(new)} errored trial(s) retried; now {run.status}"
                + (f" ({run.trials_errored} errored)" if run.trials_errored else "")
            )
        if options["wait"] and run.status != "succeeded":
            sys.exit(1 if run.status == "failed" else 2)
