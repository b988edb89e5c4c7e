"""``manage.py reprice_run RUN [--dry-run] [--json]``: price a finished run's trials and judge
calls again at today's price table (``evals.reprice``), in one transaction, recorded on the
run. ``--dry-run`` says what would change and writes nothing. Exit 0 done (or nothing to
change), 1 no such run, 3 refused (the run has not finished). A total of costs none of which
is known reads "unknown" (``--json``: null), never $0."""

from __future__ import annotations

import json
from decimal import Decimal

from core.actors import Via
from core.commands import DomainCommand
from core.decimals import decimal_plain
from evals.reprice import reprice_text, run_reprice
from evals.selectors import run_lookup


def _plain(usd: Decimal | None) -> str | None:
    return None if usd is None else decimal_plain(usd)  # null: no cost known, never "0"


class Command(DomainCommand):
    help = "Re-price a finished run's trials and judge calls at today's price table."
    domain_error_exit = 3

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", help="run UUID, 'suite/run' or a unique run name")
        parser.add_argument("--dry-run", action="store_true", help="say what would change")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        run = run_lookup(options["run"])
        repricing = run_reprice(run=run, dry_run=options["dry_run"], via=Via.COMMAND)
        total = repricing.total
        if options["json"]:
            body = {
                "run": str(run.uuid),
                "dry_run": options["dry_run"],
                "trials_changed": repricing.trials.changed,
                "judge_calls_changed": repricing.judge_calls.changed,
                "old_usd": _plain(total.old_known_usd),
                "old_unknown": total.old_unknown,
                "new_usd": _plain(total.new_known_usd),
                "new_unknown": total.new_unknown,
                "prices": repricing.prices,
                "recorded": repricing.record is not None,
            }
            self.stdout.write(json.dumps(body))
            return
        prefix = "dry run, nothing written: " if options["dry_run"] else ""
        self.stdout.write(f"run {run.ref_text}: {prefix}{reprice_text(repricing)}")
