"""``manage.py runs_prune [--older-than DAYS] [--keep-last N] [--suite NAME] [--run UUID ...]
[--batch-size N] [--dry-run] [--json]``: delete finished runs in bounded batches while
workers run others (``evals.prune``; docs/operations.md, "Deleting old runs"). Runs something
holds (a baseline, a top-up, human labels, ...) are kept and counted. Exit 0 done (also when
nothing matched), 2 bad input (a ``DomainError``: no filter, unknown suite or run, bad
number), 3 a run stopped half-way (left "pruning"; run the command again to finish it)."""

from __future__ import annotations

import argparse
import json
from datetime import timedelta

from django.core.management.base import CommandError

from core.actors import Via
from core.commands import DomainCommand
from core.errors import DomainError
from evals.models import Suite
from evals.prune import PruneReport, runs_prune


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of days, e.g. 90 or 0.5") from None
    if not 0 < value <= 100_000:
        raise argparse.ArgumentTypeError("expected more than 0 and at most 100,000 days")
    return value


class Command(DomainCommand):
    help = "Delete finished runs (their trials, grades, judge calls, stored reads) in batches."
    domain_error_exit = 2

    def add_arguments(self, parser) -> None:
        parser.add_argument("--older-than", type=_days, metavar="DAYS", help="finished before")
        parser.add_argument("--keep-last", type=int, metavar="N", help="keep each suite's N newest")
        parser.add_argument("--suite", help="only this suite (its name)")
        parser.add_argument("--run", action="append", metavar="UUID", help="only these runs")
        parser.add_argument("--batch-size", type=int, default=5000, help="trials per transaction")
        parser.add_argument("--dry-run", action="store_true", help="say what would go")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        suite = None
        if options["suite"] is not None:
            suite = Suite.objects.filter(name=options["suite"]).first()
            if suite is None:
                raise DomainError(f"no suite named {options['suite']!r}", field="suite")
        days = options["older_than"]
        report = runs_prune(
            older_than=None if days is None else timedelta(days=days),
            suite=suite,
            keep_last=options["keep_last"],
            run_uuids=options["run"],
            dry_run=options["dry_run"],
            batch_size=options["batch_size"],
            via=Via.COMMAND,
        )
        if options["json"]:
            self.stdout.write(json.dumps(report.as_json()))
        else:
            for line in _lines(report):
                self.stdout.write(line)
        if report.errors:
            raise CommandError("; ".join(report.errors), returncode=3)


def _lines(report: PruneReport) -> list[str]:
    verb = "would delete" if report.dry_run else "deleted"
    lines = [
        f"{verb} run {r.suite}/{r.name} ({r.uuid}, {r.status}{', resumed' if r.resumed else ''}):"
        f" {r.trials} trials, {r.grades} grades"
        for r in report.runs
    ]
    total = f"{verb} {len(report.runs)} runs: {report.trials} trials, {report.grades} grades"
    if report.dry_run:
        total += f", about {report.bytes_estimate:,} characters of output"
    else:
        total += f" in {report.batches} batches"
    return [*lines, total, *report.kept_lines()]
