"""``manage.py grade_run RUN --graders FILE.json [--json]``: grade a finished run's ok
trials with new deterministic graders (``evals.grading.recorded.run_grade``), e.g. a
``contract`` grader on imported or ingested outputs. FILE.json is a grader set (a list of
``{"key", "kind", "config", "gating"?}``). A refused file or run exits 1, naming the field."""

from __future__ import annotations

import json
from pathlib import Path

from core.commands import DomainCommand
from core.errors import DomainError
from evals.grading.contract.decisions import run_decisions
from evals.grading.recorded import run_grade
from evals.selectors import run_lookup


class Command(DomainCommand):
    help = "Grade a finished run's ok trials with new deterministic graders (new keys)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", help="run UUID, 'suite/run' or a unique run name")
        parser.add_argument("--graders", required=True, metavar="FILE.json")
        parser.add_argument("--json", action="store_true", help="print strict JSON")

    def handle(self, *args, **options) -> None:
        run = run_lookup(options["run"])
        path = Path(options["graders"])
        try:
            graders = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DomainError(f"cannot read {path}: {exc}", field="graders") from exc
        summary = run_grade(run=run, graders=graders)
        decisions = run_decisions(run=run)
        out = {
            "run": str(run.uuid),
            "graders": list(summary.keys),
            "trials": summary.trials,
            "grades": summary.grades,
            "decisions": decisions.counts if decisions.graded else None,
        }
        if options["json"]:
            self.stdout.write(json.dumps(out, allow_nan=False))
            return
        self.stdout.write(
            f"run {run.ref_text}: {summary.trials} ok trial(s) graded by "
            f"{', '.join(summary.keys)} ({summary.grades} grades)"
        )
        if decisions.graded:
            c = decisions.counts
            self.stdout.write(
                f"decisions: {c['rejected']} rejected, {c['review']} in review, "
                f"{c['accepted']} accepted, {c['errored']} errored"
            )
