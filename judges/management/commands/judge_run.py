"""``manage.py judge_run RUN JUDGE_VERSION [--sample N] [--seed S] [--wait [--timeout S]]
[--json]``, ``judge_run --pairwise BASE HEAD JUDGE_VERSION [--wait [--timeout S]] [--json]``
and ``judge_run --cancel JUDGE_RUN [--json]``.

RUN is a run UUID, "suite name/run name" or a unique run name; JUDGE_VERSION as
``judges.selectors.judge_version_resolve`` reads it. ``--wait`` polls the database for at
most ``--timeout`` seconds (the judge run keeps going after it). Exit codes: ``EXIT_HELP``.
"""

from __future__ import annotations

import json
import time

from django.core.management.base import CommandError

from core.actors import Via
from core.commands import DomainCommand, seed_arg
from core.errors import DomainError
from core.ids import uuid_parse
from evals.selectors import run_lookup
from judges.models import JudgeRun, JudgeVersion
from judges.runs import judge_run_cancel, judge_run_start, pairwise_judge_run_start
from judges.selectors import judge_version_resolve, pairwise_tally_get

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 3
EXIT_SOME_ERRORED = 4
EXIT_TIMEOUT = 5
EXIT_CANCELLED = 6
EXIT_HELP = (
    "With --pairwise BASE, RUN is the head run and counts are pairs. "
    "Exit codes: 0 started (no --wait), finished with every grade a verdict, or cancelled "
    "by --cancel; 1 failed: every grade errored; 2 usage error; 3 refused (unknown or "
    "ambiguous run, judge version or judge run; a judge that cannot grade single trials; "
    "--cancel of a finished judge run); 4 finished but some grades errored; 5 --timeout "
    "passed first (the judge run keeps going); 6 cancelled while waiting."
)
POLL_S = 0.5


def exit_code(judge_run: JudgeRun, *, waited: bool) -> int:
    """The exit code of a judge run's state (``EXIT_HELP``)."""
    if not waited:
        return EXIT_OK
    if judge_run.status == JudgeRun.Status.FAILED:
        return EXIT_FAILED
    if judge_run.status == JudgeRun.Status.CANCELLED:
        return EXIT_CANCELLED
    if judge_run.status == JudgeRun.Status.SUCCEEDED:
        return EXIT_SOME_ERRORED if judge_run.trials_errored else EXIT_OK
    return EXIT_TIMEOUT


class Command(DomainCommand):
    help = (
        "Grade a run with a judge version (all trials, or a sample), compare two runs with "
        "a pairwise judge version (--pairwise BASE HEAD JUDGE_VERSION: attempt i against "
        "attempt i, both presentation orders, a tie when they disagree), or cancel a judge "
        "run. " + EXIT_HELP
    )
    domain_error_exit = EXIT_REFUSED

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "run",
            nargs="?",
            help='run UUID, "suite name/run name" or a unique run name '
            "(with --pairwise: the head run)",
        )
        parser.add_argument(
            "judge_version",
            nargs="?",
            help="judge version: UUID, JUDGE:vN, or a judge name (its newest version)",
        )
        parser.add_argument(
            "--pairwise",
            metavar="BASE",
            help="compare RUN (the head) with this base run (UUID or suite/run name) using a "
            "pairwise judge version, both presentation orders per case and attempt",
        )
        parser.add_argument("--sample", type=int, default=None)
        parser.add_argument("--seed", type=seed_arg, default=None, help="0 to 2**63 - 1")
        parser.add_argument("--wait", action="store_true", help="wait until it is finished")
        parser.add_argument(
            "--timeout",
            type=float,
            default=None,
            help="with --wait: give up waiting after this many seconds (exit 5)",
        )
        parser.add_argument(
            "--cancel", metavar="JUDGE_RUN", help="cancel this judge run (UUID) instead"
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options) -> None:
        if options["cancel"]:
            return self._cancel(options)
        if not options["run"] or not options["judge_version"]:
            raise DomainError("give RUN and JUDGE_VERSION (or --cancel JUDGE_RUN)", field="run")
        if options["timeout"] is not None:
            if not options["wait"]:
                raise DomainError("only with --wait", field="timeout")
            if not options["timeout"] > 0:
                raise DomainError(
                    f"expected a positive number of seconds, got {options['timeout']}",
                    field="timeout",
                )
        try:
            run = run_lookup(options["run"])
        except CommandError as exc:
            raise DomainError(str(exc), field="run", code="not_found") from exc
        version = judge_version_resolve(ref=options["judge_version"], field="judge")
        if options["pairwise"]:
            if options["sample"] is not None or options["seed"] is not None:
                raise DomainError("not with --pairwise: every pair is judged", field="sample")
            try:
                base = run_lookup(options["pairwise"])
            except CommandError as exc:
                raise DomainError(str(exc), field="pairwise", code="not_found") from exc
            judge_run = pairwise_judge_run_start(base=base, head=run, judge_version=version)
        else:
            judge_run = judge_run_start(
                run=run, judge_version=version, sample=options["sample"], seed=options["seed"]
            )
        if options["wait"]:
            self._wait(judge_run, options["timeout"])
        judge_run.refresh_from_db()
        self._report(judge_run, version, options)
        code = exit_code(judge_run, waited=options["wait"])
        if code:
            raise CommandError(self._ending(judge_run, code), returncode=code)

    def _wait(self, judge_run: JudgeRun, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            judge_run.refresh_from_db()
            if judge_run.is_terminal:
                return
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            time.sleep(POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - now)))

    def _cancel(self, options) -> None:
        if options["run"] or options["judge_version"] or options["wait"] or options["pairwise"]:
            raise DomainError("give --cancel JUDGE_RUN alone", field="cancel")
        value = uuid_parse(options["cancel"])
        judge_run = (
            JudgeRun.objects.select_related("judge_version__judge", "run__suite")
            .filter(uuid=value)
            .first()
            if value is not None
            else None
        )
        if judge_run is None:
            raise DomainError(
                f"no judge run with id {options['cancel']!r}", field="cancel", code="not_found"
            )
        judge_run_cancel(judge_run=judge_run, via=Via.COMMAND, refuse_finished=True)
        self._report(judge_run, judge_run.judge_version, options)

    def _report(self, judge_run: JudgeRun, version: JudgeVersion, options) -> None:
        out = {
            "judge_run": str(judge_run.uuid),
            "judge_version": str(version.uuid),
            "judge_version_name": f"{version.judge.name}:v{version.number}",
            "grader": judge_run.grader,
            "status": judge_run.status,
            "trials_total": judge_run.trials_total,
            "trials_graded": judge_run.trials_graded,
            "trials_errored": judge_run.trials_errored,
            "error_message": judge_run.error_message,
            "provisional": not version.is_trusted,
        }
        base_run = judge_run.base_run  # None unless the judge run is pairwise
        if base_run is not None:
            tally = pairwise_tally_get(judge_run=judge_run)
            out |= {
                "base_run": str(base_run.uuid),
                "head_run": str(judge_run.run.uuid),
                "pairs_total": judge_run.trials_total,
                "pairs_judged": judge_run.trials_graded,
                "pairs_errored": judge_run.trials_errored,
                "unpaired": judge_run.unpaired,
                "head_wins": tally.head_wins,
                "base_wins": tally.base_wins,
                "ties": tally.ties,
            }
        if options["json"]:
            self.stdout.write(json.dumps(out, allow_nan=False))
            return
        if base_run is not None:
            self.stdout.write(
                f"{version}: run {judge_run.run.ref_text} against run "
                f"{base_run.ref_text}: {out['status']}, "
                f"{out['pairs_judged']}/{out['pairs_total']} pairs judged in both orders "
                f"({out['unpaired']} trials unpaired), {out['pairs_errored']} with a judge "
                f"error; head wins {out['head_wins']}, base wins {out['base_wins']}, ties "
                f"(the orders disagree) {out['ties']}"
                + (" (provisional: version not trusted)" if out["provisional"] else "")
                + f" [judge run {out['judge_run']}]"
            )
            return
        self.stdout.write(
            f"{version} on run {judge_run.run.ref_text} of suite {judge_run.run.suite.name}: "
            f"{out['status']}, "
            f"{out['trials_graded']}/{out['trials_total']} graded, "
            f"{out['trials_errored']} judge errors"
            + (" (provisional: version not trusted)" if out["provisional"] else "")
            + f" [judge run {out['judge_run']}]"
        )

    @staticmethod
    def _ending(judge_run: JudgeRun, code: int) -> str:
        if code == EXIT_TIMEOUT:
            return (
                f"--timeout passed: judge run {judge_run.uuid} is still {judge_run.status} "
                f"({judge_run.trials_graded}/{judge_run.trials_total} graded); it keeps going"
            )
        if code == EXIT_CANCELLED:
            return f"judge run {judge_run.uuid} was cancelled"
        return f"judge run {judge_run.uuid} {judge_run.status}: {judge_run.error_message}"
