"""Whether a run can be replayed here: more trials of it, for the gate's top-up rounds.

A run can be replayed when Assay executed it, it succeeded, and its target snapshot builds
here: a simulated target always (seeded draws per case and attempt, so new attempts are new
draws); a Python callable when it imports; an OpenAI-compatible endpoint when the API key
variable it names is set. Runs imported from elsewhere, run files and failed runs cannot.
"""

from __future__ import annotations

import os

from core.errors import DomainError
from evals.models import Run
from evals.runner.targets.base import target_validate


def run_replay_refusal(*, run: Run) -> str | None:
    """None when ``run`` can be replayed, else why not (a sentence for the page)."""
    if run.source != Run.Source.EXECUTED:
        return f"run {run.name!r} was imported: Assay cannot run it again"
    if run.status != Run.Status.SUCCEEDED:
        return f"run {run.name!r} is {run.status}: only a succeeded run gets more trials"
    target = run.target if isinstance(run.target, dict) else {}
    try:
        target_validate(target)
    except DomainError as exc:
        return f"run {run.name!r}: its target does not build here ({exc})"
    if target.get("kind") == "openai":
        key = target.get("api_key_env", "OPENAI_API_KEY")
        if not os.environ.get(key):
            return f"run {run.name!r}: {key} is not set here, so its endpoint cannot be called"
    return None
