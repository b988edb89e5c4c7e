"""``manage.py gate``: compare a head run with a base run and exit with the CI decision.

    manage.py gate --head RUN_OR_FILE [--base RUN_OR_FILE] [--alpha 0.05] [--json]
                   [--markdown FILE] [--allow-untrusted] [--max-errored-fraction F]
                   [--allow-incomparable]
                   [--top-up [--max-trials-per-case M] [--max-cost USD] [--timeout S]]

RUN_OR_FILE: a run reference (``run_resolve``) or an ``export_run`` file; no ``--base``: the
suite's baseline. Exit 0 pass, 1 regression, 2 cannot decide, 3 bad arguments. ``--top-up``
adds trials to suspects in rounds (``evals.comparison.topup``; a worker takes them) under the
default policy only; runs that cannot be replayed are decided on the trials there are."""

from __future__ import annotations

import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.core.management.base import CommandError

from core.commands import DomainCommand
from core.errors import DomainError
from evals.baselines import baseline_current
from evals.comparison.agents import agent_moves_for
from evals.comparison.baseline_verdicts import verdict_remember
from evals.comparison.gate import comparison_plan, gate_evaluate, gate_options_check
from evals.comparison.render import gate_json, gate_markdown, gate_text
from evals.comparison.run_data import RunData, run_data_from_file
from evals.comparison.topup import (
    comparison_decision,
    top_up_refused,
    top_up_result,
    top_up_start,
    top_up_wait,
)
from evals.models import Run
from evals.selectors import run_lookup


def _load(ref: str) -> RunData | Run:
    """The run named by ``ref``, or the ``RunData`` of the file at that path."""
    if ref.endswith(".json") or Path(ref).is_file():
        return run_data_from_file(ref)  # a DomainError when unreadable: exit 3
    return run_lookup(ref)


class Command(DomainCommand):
    domain_error_exit = 3  # bad input; never 1 (= regression)

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
        parser.add_argument(
            "--head", required=True, help="run UUID, 'suite/run', a unique run name or a file"
        )
        parser.add_argument(
            "--base",
            help="run UUID, 'suite/run', a unique run name or a file "
            "(default: the suite's current baseline)",
        )
        parser.add_argument(
            "--alpha",
            type=float,
            default=0.05,
            help="two-sided level of the test, from 1e-6 to 0.5 (default 0.05)",
        )
        parser.add_argument("--json", action="store_true", help="print strict JSON")
        parser.add_argument("--markdown", help="write a Markdown summary (PR comment) here")
        parser.add_argument(
            "--allow-untrusted",
            action="store_true",
            help="gate on grades from judge versions that are not trusted",
        )
        parser.add_argument(
            "--max-errored-fraction",
            type=float,
            default=0.0,
            help="errored trials allowed per run, as a fraction (default 0)",
        )
        parser.add_argument(
            "--top-up",
            action="store_true",
            help="settle suspect cases with more trials of both runs (runs executed by "
            "Assay and replayable here; a worker must be running, or CELERY_TASK_ALWAYS_EAGER)",
        )
        parser.add_argument(
            "--max-trials-per-case",
            type=int,
            default=None,
            help="with --top-up: trials a side a case may reach, first ones included "
            "(whole rounds only; default 4 x N)",
        )
        parser.add_argument(
            "--max-cost",
            default=None,
            help="with --top-up: stop before a round that would take the added trials' "
            "cost past this many USD (exit 2 if suspects stay unresolved)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=3600.0,
            help="with --top-up: seconds to wait for the rounds (default 3600; exit 2 after)",
        )
        parser.add_argument(
            "--allow-incomparable",
            action="store_true",
            help="test the shared cases even when the suite, grader set or "
            "judge version differs (the problems are still reported)",
        )

    def handle(self, *args, **options):
        try:
            code = self._gate(options)
        except CommandError as exc:
            if exc.returncode == 2:
                raise
            raise CommandError(str(exc), returncode=3) from exc  # never 1 (= regression)
        sys.exit(code)

    def _gate(self, options) -> int:
        gate_options_check(
            alpha=options["alpha"], max_errored_fraction=options["max_errored_fraction"]
        )
        if options["timeout"] is not None and not options["timeout"] > 0:
            raise DomainError(
                detail="--timeout must be a positive number of seconds", field="timeout"
            )
        head = _load(options["head"])
        base = _load(options["base"]) if options["base"] else None
        if options["top_up"]:
            comparison, decision, base = self._top_up(head, base, options)
        else:
            policy = {
                "alpha": options["alpha"],
                "max_errored_fraction": options["max_errored_fraction"],
                "allow_untrusted": options["allow_untrusted"],
                "allow_incomparable": options["allow_incomparable"],
            }
            if base is None and isinstance(head, Run):
                current = baseline_current(suite=head.suite)
                base = current.run if current is not None else None
            if isinstance(head, Run) and isinstance(base, Run):
                # A settled top-up of this pair decides, as on the page.
                comparison, decision = comparison_decision(head=head, base=base, **policy)
                verdict_remember(  # the run list's regression flag
                    base=base,
                    head=head,
                    verdict=decision.verdict,
                    alpha=options["alpha"],
                    default_policy=not (
                        options["max_errored_fraction"]
                        or options["allow_untrusted"]
                        or options["allow_incomparable"]
                    ),
                )
            else:
                comparison, decision = gate_evaluate(head=head, base=base, **policy)
        agents = agent_moves_for(base=base, head=head)  # as each run's report reads it
        if options["markdown"]:
            try:
                Path(options["markdown"]).write_text(
                    gate_markdown(comparison, decision), encoding="utf-8"
                )
            except OSError as exc:  # never exit 1 (= regression) for a path
                raise DomainError(
                    detail=f"--markdown: cannot write {options['markdown']!r}: {exc.strerror}",
                    field="markdown",
                ) from exc
        self.stdout.write(
            gate_json(comparison, decision, agents=agents)
            if options["json"]
            else gate_text(comparison, decision)
        )
        self.stdout.flush()
        return decision.exit_code

    def _top_up(self, head, base, options):
        """Start (or join) the top-up of these two runs, wait for it, and decide; on runs
        that cannot be replayed, decide on the trials there are and say so. Returns
        (comparison, decision, the base run or file compared)."""
        flags = [
            flag
            for flag, on in (
                ("--allow-untrusted", options["allow_untrusted"]),
                ("--allow-incomparable", options["allow_incomparable"]),
                ("--max-errored-fraction", options["max_errored_fraction"] != 0.0),
            )
            if on
        ]
        if flags:
            raise DomainError(
                detail=f"--top-up decides under the default policy: drop {', '.join(flags)}",
                field="top_up",
            )
        if base is None and not isinstance(head, RunData):
            current = baseline_current(suite=head.suite)
            if current is None:
                raise DomainError(
                    detail=f"suite {head.suite.name!r} has no baseline: give --base",
                    field="base",
                )
            base = current.run
        _, refusal = comparison_plan(base=base, head=head, alpha=options["alpha"])
        if refusal is not None:
            comparison, decision = gate_evaluate(head=head, base=base, alpha=options["alpha"])
            return comparison, top_up_refused(decision, refusal), base
        max_cost = None
        if options["max_cost"] is not None:
            try:
                max_cost = Decimal(options["max_cost"])
            except InvalidOperation as exc:
                raise DomainError(
                    detail=f"--max-cost must be an amount of USD, got {options['max_cost']!r}",
                    field="max_cost_usd",
                ) from exc
        top_up = top_up_start(
            base=base,
            head=head,
            alpha=options["alpha"],
            max_trials_per_case=options["max_trials_per_case"],
            max_cost_usd=max_cost,
        )
        top_up = top_up_wait(top_up=top_up, timeout_s=options["timeout"])
        if not top_up.is_terminal:
            raise CommandError(
                f"cannot decide: the top-up was still running after {options['timeout']:g} s "
                f"(round {top_up.rounds_done}; it goes on: run the gate again later)",
                returncode=2,
            )
        return (*top_up_result(top_up=top_up), base)
