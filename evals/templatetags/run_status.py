"""``{% run_status_badge run %}``: a run's status badge as every page shows it
(``evals.run_status.run_status_shown``: an imported run shows "imported" with its errored
trials and whether it is partial, never "succeeded"); ``run|run_trials``: its trials as the
one finished/planned figure (``evals.run_status.run_trial_count``)."""

from __future__ import annotations

from django import template

from evals.models import Run
from evals.run_status import RunStatusShown, RunTrialCount, run_status_shown, run_trial_count

register = template.Library()


@register.inclusion_tag("evals/fragments/run_status_badge.html")
def run_status_badge(run: Run | RunStatusShown) -> dict:
    """The badge of ``run`` (a ``Run``, or its ``RunStatusShown`` already built)."""
    shown = run if isinstance(run, RunStatusShown) else run_status_shown(run)
    return {"shown": shown}


@register.filter
def run_trials(run: Run) -> RunTrialCount:
    """``run``'s trials: ``finished``, ``planned``, ``errored`` (``run_trial_count``)."""
    return run_trial_count(run)
