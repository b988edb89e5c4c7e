"""``manage.py run_cancel RUN [--json]``: cancel a queued or running run. Workers start no
further call; calls in flight finish and are recorded. Exit 0 cancelled (or already
cancelled), 1 no such run, 3 refused (the run has already succeeded or failed)."""

from __future__ import annotations

import json

from core.actors import Via
from core.commands import DomainCommand
from evals.run_status import run_count_summary
from evals.runner.finalize import run_cancel
from evals.selectors import run_lookup


class Command(DomainCommand):
    help = "Cancel a queued or running run: no further paid call starts."
    domain_error_exit = 3

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", help="run UUID, 'suite/run' or a unique run name")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        run = run_lookup(options["run"])
        changed = run_cancel(run=run, via=Via.COMMAND, refuse_finished=True)
        if options["json"]:
            self.stdout.write(json.dumps({"run": str(run.uuid), "status": run.status}))
        else:
            self.stdout.write(
                f"run {run.ref_text}: {'cancelled' if changed else 'was already cancelled'}; "
                f"{run_count_summary(run)}"
            )
