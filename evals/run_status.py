"""A run's status as every surface shows it (run list, run page, suite page, grid, case
history, the API and ``run_report``): ``run_status_shown``.

A run Assay executed shows its stored status (``succeeded`` only when no trial and no grade
errored: ``evals.runner.finalize``). A run imported from another harness was not run here:
its stored status says only that the import finished, so it shows **imported**, with what
its trials say: how many errored (pipeline errors: never a pass) and whether it is
**partial** (fewer trials recorded than its cases × attempts, or than the source planned:
``trials_finished < trials_total``, written by ``interop.importers.context.run_finish``),
and a source that itself failed or was cancelled (a run file of a failed run). No query: it
reads the run's own counters.
"""

from __future__ import annotations

from dataclasses import dataclass

from evals.models import Run


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


SOURCE_STATUS_PROBLEM = {
    Run.Status.FAILED: "failed at the source",
    Run.Status.CANCELLED: "cancelled at the source",
}


def run_status_shown(run: Run) -> RunStatusShown:
    """The status ``run`` shows (module rules): reads ``source``, ``status``,
    ``trials_total``, ``trials_finished``, ``trials_errored`` and ``error_message`` (the
    import's sentence, shown when the counters hold no problem: grade errors, a source's
    status); no query."""
    errored = int(run.trials_errored or 0)
    if run.source != Run.Source.IMPORTED or not run.is_terminal:
        return RunStatusShown(
            key=run.status, label=run.get_status_display(), errored=errored, partial=False
        )
    problems = []
    finished, total = int(run.trials_finished or 0), int(run.trials_total or 0)
    if errored:
        problems.append(f"{errored} of {finished} trials errored")
    partial = finished < total
    if partial:
        problems.append(f"partial: {finished} of {total} trials recorded")
    if run.status in SOURCE_STATUS_PROBLEM:
        problems.append(SOURCE_STATUS_PROBLEM[run.status])
    if not problems and run.error_message:  # what the counters do not hold (grade errors)
        problems.append(run.error_message)
    return RunStatusShown(
        key="imported-problems" if problems else "imported",
        label="imported",
        problems=tuple(problems),
        errored=errored,
        partial=partial,
    )
