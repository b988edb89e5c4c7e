"""``manage.py import_results FILE --suite NAME --run NAME``: import results recorded elsewhere.

Thin: parses arguments and calls ``interop.importers.results_import`` (rules and format
detection documented there). ``--json`` prints strict JSON of what was created. Any error
is a CommandError naming the line/row and field (exit code 1), and nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError

from core.commands import DomainCommand
from evals.models import Suite
from interop.importers import FORMATS, mapping_parse, results_import


class Command(DomainCommand):
    def domain_error_text(self, error, options) -> str:
        return f"{Path(options['file']).name}: {error}"

    help = (
        "Import labeled records, CSV or JSONL results, a promptfoo results file or an "
        "Inspect AI JSON log into a suite as a new run."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="path of the .jsonl, .csv or .json file")
        parser.add_argument("--suite", required=True, help="suite name (created when missing)")
        parser.add_argument("--run", required=True, help="new run name (must be new in the suite)")
        parser.add_argument(
            "--format",
            choices=FORMATS,
            default=None,
            help=f"{', '.join(FORMATS)} (default: detected)",
        )
        parser.add_argument(
            "--map",
            action="append",
            default=[],
            metavar="FIELD=COLUMN",
            help="column mapping for csv/jsonl, repeatable",
        )
        parser.add_argument(
            "--suite-kind",
            choices=Suite.Kind.values,
            default=Suite.Kind.REGRESSION,
            help="kind of a new suite",
        )
        parser.add_argument(
            "--threshold",
            type=float,
            default=None,
            help="pass threshold in [0, 1] for rows with a score but no verdict",
        )
        parser.add_argument("--json", action="store_true", help="print counts as JSON")

    def handle(self, *args, **opts):
        path = Path(opts["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        mapping = mapping_parse(opts["map"])
        with path.open("rb") as stream:
            summary = results_import(
                stream=stream,
                filename=path.name,
                suite_name=opts["suite"],
                run_name=opts["run"],
                fmt=opts["format"],
                mapping=mapping,
                suite_kind=opts["suite_kind"],
                threshold=opts["threshold"],
            )
        data = summary.as_json()
        if opts["json"]:
            self.stdout.write(json.dumps(data, allow_nan=False, ensure_ascii=False))
            return
        self.stdout.write(
            f"Imported {data['trials']} trials of {data['cases']} cases into suite "
            f"{data['suite']!r}, run(s) {', '.join(repr(r) for r in data['runs'])}: "
            f"{data['grades']} grades, {data['labels']} labels, "
            f"{data['preference_labels']} preference labels, "
            f"{data['pairwise_verdicts']} pairwise verdicts, "
            f"{data['judge_versions']} judge versions."
            + (f" {summary.retired_sentence()}" if summary.retired_cases else "")
        )
