"""``manage.py runs_sweep``: one pass of the sweeper (``evals.runner.sweeper``), for cron users who
do not run Celery beat. Prints what it enqueued again."""

from __future__ import annotations

from core.commands import DomainCommand
from evals.runner.sweeper import runs_sweep


class Command(DomainCommand):
    help = (
        "Send unsent task messages again, take back trials whose lease expired and judge "
        "rungs that stalled (one pass)."
    )

    def handle(self, *args, **options):
        r = runs_sweep()
        self.stdout.write(
            f"{r.trials} trials taken back in {r.chunks} chunks ({r.runs} runs); "
            f"{r.judge_chunks} judge chunks enqueued again ({r.judge_runs} runs); "
            f"{r.messages} task messages sent again"
        )
