"""``manage.py gate``: compare a head run with a base run and exit with the CI decision.

    manage.py gate --head RUN_OR_FILE [--base RUN_OR_FILE] [--alpha 0.05] [--json]
                   [--markdown FILE] [--allow-untrusted] [--max-errored-fraction F]
                   [--allow-incomparable]

RUN_OR_FILE: a run UUID, "suite name/run name", or the path of an ``export_run`` file.
Without ``--base`` the head suite's current baseline is used. Exit codes (``gate_decide``):
0 no significant regression; 1 significant regression or a broken regression case;
2 cannot decide (not comparable, no overlapping cases, errored trials or grades over the
allowed fraction — by default any —, provisional judge grades); 3 bad arguments (an
unknown run, an unreadable file), never 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evals.comparison import comparison_compute, detectable_drop_get, gate_decide
from evals.comparison_render import gate_json, gate_markdown, gate_text
from evals.management.commands.run_report import run_lookup
from evals.run_data import run_data_from_file, run_data_get
from evals.selectors import baseline_current


def _load(ref: str):
    """(RunData, Run or None) for a run reference or a file path."""
    if ref.endswith(".json") or Path(ref).is_file():
        try:
            return run_data_from_file(ref), None
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
    run = run_lookup(ref)
    return run_data_get(run=run), run


class Command(BaseCommand):
    help = "Gate a head run against a base run: exit 0 pass, 1 regression, 2 cannot decide."

    def create_parser(self, prog_name, subcommand, **kwargs):
        """Usage errors exit 3 (bad arguments), never argparse's 2 (= cannot decide)."""
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        argparse_error = parser.error

        def error(message):
            try:
                argparse_error(message)
            except SystemExit as exc:
                raise SystemExit(3) from exc

        parser.error = error
        return parser

    def add_arguments(self, parser):
        parser.add_argument("--head", required=True, help="run UUID, 'suite/run' or a file")
        parser.add_argument("--base", help="run UUID, 'suite/run' or a file (default: the "
                                           "suite's current baseline)")
        parser.add_argument("--alpha", type=float, default=0.05)
        parser.add_argument("--json", action="store_true", help="print strict JSON")
        parser.add_argument("--markdown", help="write a Markdown summary (PR comment) here")
        parser.add_argument("--allow-untrusted", action="store_true",
                            help="gate on grades from judge versions that are not trusted")
        parser.add_argument("--max-errored-fraction", type=float, default=0.0,
                            help="errored trials allowed per run, as a fraction (default 0)")
        parser.add_argument("--allow-incomparable", action="store_true",
                            help="test the shared cases even when the suite, grader set or "
                                 "judge version differs (the problems are still reported)")

    def handle(self, *args, **options):
        try:
            code = self._gate(options)
        except CommandError as exc:
            raise CommandError(str(exc), returncode=3) from exc  # never 1 (= regression)
        sys.exit(code)

    def _gate(self, options) -> int:
        alpha = options["alpha"]
        if not 0 < alpha < 1:
            raise CommandError("--alpha must be in (0, 1)")
        if not 0 <= options["max_errored_fraction"] <= 1:
            raise CommandError("--max-errored-fraction must be in [0, 1]")
        head, head_run = _load(options["head"])
        if options["base"]:
            base, base_run = _load(options["base"])
        else:
            if head_run is None:
                raise CommandError("--base is required when --head is a file")
            baseline = baseline_current(suite=head_run.suite)
            if baseline is None:
                raise CommandError(f"suite {head_run.suite.name!r} has no baseline: give --base")
            base_run = baseline.run
            base = run_data_get(run=base_run)
        detectable = (detectable_drop_get(run=base_run, alpha=alpha, data=base)
                      if base_run is not None else None)
        comparison = comparison_compute(base=base, head=head, alpha=alpha,
                                        detectable=detectable, with_power=base_run is None)
        decision = gate_decide(
            comparison, alpha=alpha, max_errored_fraction=options["max_errored_fraction"],
            allow_untrusted=options["allow_untrusted"],
            allow_incomparable=options["allow_incomparable"])
        if options["markdown"]:
            Path(options["markdown"]).write_text(gate_markdown(comparison, decision),
                                                 encoding="utf-8")
        self.stdout.write(gate_json(comparison, decision) if options["json"]
                          else gate_text(comparison, decision))
        self.stdout.flush()
        return decision.exit_code
