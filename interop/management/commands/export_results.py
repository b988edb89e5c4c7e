"""``manage.py export_results run RUN | labels RUN | comparison BASE HEAD --format csv|parquet
--out FILE [--tz ZONE]``: a table export (``interop.exports``). RUN, BASE, HEAD are run UUIDs
or "suite name/run name"; ``--tz`` an IANA zone for the times (default UTC).

``manage.py export_results --calibration-set SET [--judge-version JV] --format csv|parquet
--out FILE [--tz ZONE]``: a calibration set's export
(``interop.calibration_export.calibration_table``), SET a UUID, JV a judge version UUID,
``JUDGE:vN`` or a judge name (its newest version; ``judges.selectors.judge_version_resolve``;
default: the set's own judge version)."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.core.management.base import CommandError

from core.commands import DomainCommand
from core.ids import uuid_parse
from evals.selectors import run_lookup
from interop import exports
from interop.calibration_export import calibration_table
from judges.selectors import judge_version_resolve
from labeling.models import CalibrationSet


class Command(DomainCommand):
    help = "Export a run, its labels, a comparison or a calibration set as CSV or Parquet."

    def add_arguments(self, parser):
        parser.add_argument("kind", nargs="?", choices=["run", "labels", "comparison"])
        parser.add_argument("runs", nargs="*", help="RUN (run, labels) or BASE HEAD (comparison)")
        parser.add_argument(
            "--calibration-set", help="UUID of a calibration set to export (instead of KIND RUN...)"
        )
        parser.add_argument(
            "--judge-version",
            help="judge version whose verdicts the calibration export holds: UUID, "
            "JUDGE:vN or a judge name (default: the set's own)",
        )
        parser.add_argument("--format", choices=list(exports.FORMATS), default="csv")
        parser.add_argument("--out", required=True, help="file to write")
        parser.add_argument("--tz", default="UTC", help="IANA time zone for times (default UTC)")

    def handle(self, *args, **options):
        kind, refs = options["kind"], options["runs"]
        if options["calibration_set"]:
            if kind or refs:
                raise CommandError("--calibration-set: give either it or KIND RUN..., not both")
            return self._write(_calibration_table(options), options)
        if kind is None:
            raise CommandError("kind: expected run, labels or comparison (or --calibration-set)")
        if options["judge_version"]:
            raise CommandError("--judge-version: only with --calibration-set")
        wanted = 2 if kind == "comparison" else 1
        if len(refs) != wanted:
            raise CommandError(f"{kind}: expected {'BASE HEAD' if wanted == 2 else 'RUN'}")
        runs = [run_lookup(ref) for ref in refs]
        zone = exports.zone_get(name=options["tz"])
        if kind == "run":
            table = exports.run_table(run=runs[0], zone=zone)
        elif kind == "labels":
            table = exports.labels_table(run=runs[0], zone=zone)
        else:
            table = exports.comparison_table(base=runs[0], head=runs[1])
        self._write(table, options)

    def _write(self, table: exports.ExportTable, options) -> None:
        body = exports.table_write(table=table, fmt=options["format"])
        try:
            Path(options["out"]).write_bytes(body)
        except OSError as exc:
            raise CommandError(f"--out: cannot write {options['out']}: {exc.strerror}") from exc
        self.stdout.write(f"wrote {options['out']} ({len(table.rows)} rows)")


def _uuid_option(options, name: str) -> uuid.UUID:
    raw = options[name]
    value = uuid_parse(raw)
    if value is None:
        raise CommandError(f"--{name.replace('_', '-')}: expected a UUID, got {raw!r}")
    return value


def _calibration_table(options) -> exports.ExportTable:
    """The calibration export named by ``--calibration-set`` (and ``--judge-version``)."""

    set_id = _uuid_option(options, "calibration_set")
    cset = CalibrationSet.objects.select_related("judge_version__judge").filter(uuid=set_id).first()
    if cset is None:
        raise CommandError(f"--calibration-set: no calibration set with id {set_id}")
    version = None
    if options["judge_version"]:
        version = judge_version_resolve(ref=options["judge_version"], field="--judge-version")
    zone = exports.zone_get(name=options["tz"])
    return calibration_table(calibration_set=cset, judge_version=version, zone=zone)
