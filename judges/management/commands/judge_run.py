"""``manage.py judge_run RUN JUDGE_VERSION [--sample N] [--seed S] [--wait] [--json]``.

RUN is a run UUID or "suite name/run name"; JUDGE_VERSION a judge version UUID. Grades the
run's ok trials (or a random sample) in Celery tasks; ``--wait`` polls the database until
the judge run is finished. Exit 0; a bad argument is a CommandError (exit 1).
"""

from __future__ import annotations

import json
import time

from django.core.management.base import CommandError

from core.commands import DomainCommand
from core.errors import DomainError
from core.ids import uuid_parse
from evals.management.commands.run_report import run_lookup
from judges.models import JudgeRun, JudgeVersion
from judges.runs import judge_run_start


class Command(DomainCommand):
    help = "Grade a run with a judge version (all trials, or a sample)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run")
        parser.add_argument("judge_version")
        parser.add_argument("--sample", type=int, default=None)
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--wait", action="store_true")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        run = run_lookup(options["run"])
        try:
            version = JudgeVersion.objects.select_related("judge").get(
                uuid=uuid_parse(options["judge_version"])
            )
        except (ValueError, JudgeVersion.DoesNotExist) as exc:
            raise CommandError(f"no judge version {options['judge_version']!r}") from exc
        try:
            judge_run = judge_run_start(
                run=run, judge_version=version, sample=options["sample"], seed=options["seed"]
            )
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        while options["wait"]:
            judge_run.refresh_from_db()
            if judge_run.status in JudgeRun.TERMINAL:
                break
            time.sleep(1)
        judge_run.refresh_from_db()
        out = {
            "judge_run": str(judge_run.uuid),
            "judge_version": str(version.uuid),
            "grader": judge_run.grader,
            "status": judge_run.status,
            "trials_total": judge_run.trials_total,
            "trials_graded": judge_run.trials_graded,
            "trials_errored": judge_run.trials_errored,
            "provisional": not version.is_trusted,
        }
        if options["json"]:
            self.stdout.write(json.dumps(out, allow_nan=False))
            return
        self.stdout.write(
            f"{version} on {run}: {out['status']}, {out['trials_graded']}/{out['trials_total']} "
            f"graded, {out['trials_errored']} judge errors"
            + (" (provisional: version not trusted)" if out["provisional"] else "")
        )
