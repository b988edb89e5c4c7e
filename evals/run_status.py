"""A run's status as every surface shows it (run list, run page, suite page, grid, case
history, the API and ``run_report``): ``run_status_shown``.

The run list's and the API's ``?status=`` filter on the same status
(``runs_status_shown_filter``: ``imported`` is a filter value, and ``succeeded`` holds no
imported run), and every surface shows a run's trials as the same finished/planned figure
(``run_trial_count``, read from the run's counters: "59/60" for a partial run, on the list,
the run page and the API alike). One rule for the denominators: a cancelled trial was not
run, so "N of M trials errored" counts M over finished trials (ok + errored) everywhere,
and the cancelled are said apart ("K cancelled").

A run Assay executed shows its stored status (``succeeded`` only when no trial and no grade
errored: ``evals.runner.finalize``). A run imported from another harness was not run here:
its stored status says only that the import finished, so it shows **imported**, with what
its trials say: how many errored (pipeline errors: never a pass) and whether it is
**partial** (fewer trials recorded, finished or cancelled, than the source planned:
``trials_finished + trials_cancelled < trials_total``, written by
``interop.importers.context.run_finish``; the planned total is what the source recorded
unless it says otherwise, never invented from cases × the largest attempt),
and a source that itself failed or was cancelled (a run file of a failed run). No query: it
reads the run's own counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from django.db.models import Q, QuerySet

from core.errors import DomainError
from evals.models import Run

_Runs = TypeVar("_Runs", bound="QuerySet[Run]")

IMPORTED = "imported"
# What ``?status=`` accepts on the run list and the API: a badge's label.
STATUS_SHOWN_VALUES = (*Run.Status.values, IMPORTED)


@dataclass(frozen=True)
class RunStatusShown:
    """``key``: the badge's class suffix (a stored status, ``imported``, or
    ``imported-problems`` when an imported run has any problem); ``label``: the badge text
    ("imported", "succeeded"); ``problems``: what is wrong, for people ("3 of 60 trials
    errored", "partial: 58 of 60 trials recorded"), empty when nothing is; ``errored``:
    errored trials (count); ``partial``: fewer trials recorded than planned."""

    key: str
    label: str
    problems: tuple[str, ...] = ()
    errored: int = 0
    partial: bool = False

    @property
    def text(self) -> str:
        """The label and the problems in one line: "imported · 3 of 60 trials errored"."""
        return " · ".join((self.label, *self.problems))

    def as_json(self) -> dict:
        """``{"key", "label", "problems", "errored", "partial"}`` (JSON-safe)."""
        return {
            "key": self.key,
            "label": self.label,
            "problems": list(self.problems),
            "errored": self.errored,
            "partial": self.partial,
        }


SOURCE_STATUS_PROBLEM: dict[str, str] = {
    Run.Status.FAILED: "failed at the source",
    Run.Status.CANCELLED: "cancelled at the source",
}


@dataclass(frozen=True)
class RunTrialCount:
    """A run's trials as every surface shows them: ``finished`` (ok or errored, current
    attempts: a retried trial's errored attempt is history), ``planned`` (the trials the run
    means to have: cases × trials per case, plus top-ups; for an imported run what its source
    recorded, or planned when it says so), ``errored`` (pipeline errors among ``finished``),
    ``cancelled`` (never run: neither finished nor errored, nor pending); counts.

    The one rule of the denominators: a cancelled trial was not run, so "N of M trials
    errored" takes M = ``finished`` (ok + errored) on every surface, and the cancelled are
    said apart ("K cancelled")."""

    finished: int
    planned: int
    errored: int
    cancelled: int = 0

    @property
    def recorded(self) -> int:
        """Trials there are rows for: finished and cancelled."""
        return self.finished + self.cancelled

    @property
    def partial(self) -> bool:
        """Fewer trials recorded (finished or cancelled) than planned: for an imported run,
        the source planned more than it recorded."""
        return self.recorded < self.planned

    @property
    def text(self) -> str:
        """ "59/60": finished of planned."""
        return f"{self.finished}/{self.planned}"

    @property
    def errored_text(self) -> str:
        """ "3 of 57 trials errored" (of the finished), "" when none errored."""
        if not self.errored:
            return ""
        return f"{self.errored} of {self.finished} trials errored"

    @property
    def partial_text(self) -> str:
        """ "partial: 4 of 6 trials recorded" (recorded: finished or cancelled), "" when the
        run is not partial."""
        if not self.partial:
            return ""
        return f"partial: {self.recorded} of {self.planned} trials recorded"

    @property
    def summary(self) -> str:
        """ "3 of 4 trials finished, 1 errored, 1 cancelled" (errored and cancelled only when
        there are any): what a command prints."""
        return ", ".join(
            p
            for p in (
                f"{self.finished} of {self.planned} trials finished",
                f"{self.errored} errored" if self.errored else "",
                self.cancelled_text,
            )
            if p
        )

    @property
    def cancelled_text(self) -> str:
        """ "3 cancelled", "" when none was."""
        return f"{self.cancelled} cancelled" if self.cancelled else ""


def run_trial_count(run: Run) -> RunTrialCount:
    """``run``'s ``RunTrialCount`` from its counters (``trials_finished``, ``trials_total``,
    ``trials_errored``, ``trials_cancelled``: kept by the runner, recounted when it closes,
    written by an import); no query. The one figure of a run's trials: never a count of its
    trial rows, which misses what a partial import planned and holds retried attempts."""
    return RunTrialCount(
        finished=int(run.trials_finished or 0),
        planned=int(run.trials_total or 0),
        errored=int(run.trials_errored or 0),
        cancelled=int(run.trials_cancelled or 0),
    )


def run_count_summary(run: Run) -> str:
    """What a command prints of ``run``'s trials (``RunTrialCount.summary``), and, for an
    executed run cancelled while calls were in flight, how many are: "368 of 600 trials
    finished, 216 cancelled, 16 in flight when it was cancelled (recorded as they end)", so
    the figures add up to the planned total. No query."""
    count = run_trial_count(run)
    in_flight = count.planned - count.recorded
    if run.source == Run.Source.IMPORTED or run.status != Run.Status.CANCELLED or in_flight <= 0:
        return count.summary
    return f"{count.summary}, {in_flight} in flight when it was cancelled (recorded as they end)"


def run_problems(count: RunTrialCount, *, grade_errors: int = 0) -> tuple[str, ...]:
    """What a run's trial counts say is wrong, for people, in order: "1 of 3 trials errored"
    (of the finished), "1 cancelled", "2 grade errors", "partial: 4 of 6 trials recorded"
    (recorded: finished or cancelled); empty when nothing is. The one wording of an
    imported run's problems (``run_status_shown``, ``interop.importers.context.run_finish``)."""
    problems = [count.errored_text, count.cancelled_text]
    if grade_errors:
        problems.append(f"{grade_errors} grade error{'s' if grade_errors != 1 else ''}")
    problems.append(count.partial_text)
    return tuple(p for p in problems if p)


def runs_status_shown_filter(runs: _Runs, *, status: str) -> _Runs:
    """``runs`` whose shown status (``run_status_shown(run).label``) is ``status``, in the
    database: ``imported`` is a finished imported run; a stored status (``succeeded``, ...)
    holds the runs that show it, never a finished imported run (which shows ``imported``).
    Raises ``DomainError(field="status")`` for a value not in ``STATUS_SHOWN_VALUES``."""
    if status not in STATUS_SHOWN_VALUES:
        raise DomainError(
            f"{status!r} is not one of {', '.join(STATUS_SHOWN_VALUES)}", field="status"
        )
    imported = Q(source=Run.Source.IMPORTED, status__in=Run.TERMINAL)
    if status == IMPORTED:
        return runs.filter(imported)
    return runs.filter(status=status).exclude(imported)


def run_status_shown(run: Run) -> RunStatusShown:
    """The status ``run`` shows (module rules): reads ``source``, ``status``,
    ``trials_total``, ``trials_finished``, ``trials_errored`` and ``error_message`` (the
    import's sentence, shown when the counters hold no problem: grade errors, a source's
    status); no query."""
    count = run_trial_count(run)
    errored = count.errored
    if run.source != Run.Source.IMPORTED or not run.is_terminal:
        return RunStatusShown(
            key=run.status, label=run.get_status_display(), errored=errored, partial=False
        )
    problems = list(run_problems(count))
    partial = count.partial
    if run.status in SOURCE_STATUS_PROBLEM:
        problems.append(SOURCE_STATUS_PROBLEM[run.status])
    if not problems and run.error_message:  # what the counters do not hold (grade errors)
        problems.append(run.error_message)
    return RunStatusShown(
        key="imported-problems" if problems else IMPORTED,
        label=IMPORTED,
        problems=tuple(problems),
        errored=errored,
        partial=partial,
    )
