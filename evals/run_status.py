"""A run's status as every surface shows it: ``run_status_shown``, with its trial count
(``run_trial_count``, "59/60") and the ``?status=`` filter (``runs_status_shown_filter``).

A run Assay executed shows its stored status. An imported run shows **imported** with what
its trials say: how many errored, and whether it is **partial** (``trials_finished +
trials_cancelled < trials_total``, the total being what the source planned, never invented).
A cancelled trial was not run: "N of M trials errored" counts M over finished trials
everywhere, the cancelled said apart. No query: everything reads the run's counters."""

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
    """``key``: the badge's class suffix (a stored status, ``imported`` or ``imported-problems``);
    ``label``: the badge text; ``problems``: texts for people, empty when none; ``errored``:
    errored trials; ``partial``: fewer trials recorded than planned."""

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
    """A run's trials as every surface shows them: ``finished`` (ok or errored, current attempts),
    ``planned`` (cases × trials per case plus top-ups, or what an import's source recorded),
    ``errored`` among ``finished``, and ``cancelled`` (never run)."""

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
        """Fewer trials recorded (finished or cancelled) than planned."""
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
        """ "partial: 4 of 6 trials recorded", "" when the run is not partial."""
        if not self.partial:
            return ""
        return f"partial: {self.recorded} of {self.planned} trials recorded"

    @property
    def summary(self) -> str:
        """ "3 of 4 trials finished, 1 errored, 1 cancelled": what a command prints."""
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
    """``run``'s ``RunTrialCount`` from its counters (never its trial rows); no query."""
    return RunTrialCount(
        finished=int(run.trials_finished or 0),
        planned=int(run.trials_total or 0),
        errored=int(run.trials_errored or 0),
        cancelled=int(run.trials_cancelled or 0),
    )


def run_count_summary(run: Run) -> str:
    """What a command prints of ``run``'s trials, with the calls in flight of a run cancelled
    mid-call, so the figures add up to the planned total. No query."""
    count = run_trial_count(run)
    in_flight = count.planned - count.recorded
    if run.source == Run.Source.IMPORTED or run.status != Run.Status.CANCELLED or in_flight <= 0:
        return count.summary
    return f"{count.summary}, {in_flight} in flight when it was cancelled (recorded as they end)"


def run_problems(count: RunTrialCount, *, grade_errors: int = 0) -> tuple[str, ...]:
    """What a run's counts say is wrong, for people, in order: "1 of 3 trials errored",
    "1 cancelled", "2 grade errors", "partial: 4 of 6 trials recorded"; empty when nothing is."""
    problems = [count.errored_text, count.cancelled_text]
    if grade_errors:
        problems.append(f"{grade_errors} grade error{'s' if grade_errors != 1 else ''}")
    problems.append(count.partial_text)
    return tuple(p for p in problems if p)


def runs_status_shown_filter(runs: _Runs, *, status: str) -> _Runs:
    """``runs`` whose shown status is ``status``, in the database (``succeeded`` never holds a
    finished imported run). Raises ``DomainError(field="status")`` outside
    ``STATUS_SHOWN_VALUES``."""
    if status not in STATUS_SHOWN_VALUES:
        raise DomainError(
            f"{status!r} is not one of {', '.join(STATUS_SHOWN_VALUES)}", field="status"
        )
    imported = Q(source=Run.Source.IMPORTED, status__in=Run.TERMINAL)
    if status == IMPORTED:
        return runs.filter(imported)
    return runs.filter(status=status).exclude(imported)


def run_status_shown(run: Run) -> RunStatusShown:
    """The status ``run`` shows (an import's ``error_message`` when counters show none)."""
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


def runs_unanswered(runs: list[Run]) -> list[Run]:
    """The finished runs among ``runs`` with no answered trial: every trial the pipeline ran
    errored (an unreachable endpoint, a refused key). No query (the run's counters)."""
    return [
        r
        for r in runs
        if r.is_terminal and int(r.trials_errored or 0) >= int(r.trials_finished or 0)
    ]
