"""``manage.py export_results run RUN | labels RUN | comparison BASE HEAD --format csv|parquet
--out FILE [--tz ZONE]``: a table export (``evals.exports``). RUN, BASE, HEAD are run UUIDs
or "suite name/run name"; ``--tz`` an IANA zone for the times (default UTC)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evals import exports
from evals.management.commands.run_report import run_lookup


class Command(BaseCommand):
    help = "Export a run, its labels or a comparison as CSV or Parquet."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=["run", "labels", "comparison"])
        parser.add_argument("runs", nargs="+", help="RUN (run, labels) or BASE HEAD (comparison)")
        parser.add_argument("--format", choices=list(exports.FORMATS), default="csv")
        parser.add_argument("--out", required=True, help="file to write")
        parser.add_argument("--tz", default="UTC", help="IANA time zone for times (default UTC)")

    def handle(self, *args, **options):
        kind, refs = options["kind"], options["runs"]
        wanted = 2 if kind == "comparison" else 1
        if len(refs) != wanted:
            raise CommandError(f"{kind}: expected {'BASE HEAD' if wanted == 2 else 'RUN'}")
        runs = [run_lookup(ref) for ref in refs]
        try:
            zone = exports.zone_get(name=options["tz"])
            if kind == "run":
                table = exports.run_table(run=runs[0], zone=zone)
            elif kind == "labels":
                table = exports.labels_table(run=runs[0], zone=zone)
            else:
                table = exports.comparison_table(base=runs[0], head=runs[1])
            body = exports.table_write(table=table, fmt=options["format"])
        except exports.ExportError as exc:
            raise CommandError(str(exc)) from exc
        try:
            Path(options["out"]).write_bytes(body)
        except OSError as exc:
            raise CommandError(f"--out: cannot write {options['out']}: {exc.strerror}") from exc
        self.stdout.write(f"wrote {options['out']} ({len(table.rows)} rows)")
