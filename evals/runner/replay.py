"""Whether a run can be replayed here (more trials of it, for top-up rounds): Assay executed
it, it succeeded, and its target builds here (simulated always; a callable when registered;
an OpenAI-compatible endpoint when its ``api_key_env`` is set or is null). Imported runs,
run files and failed runs cannot."""

from __future__ import annotations

import os

from core.errors import DomainError
from evals.models import Run
from evals.runner.targets.base import target_validate
from evals.runner.targets.openai import OpenAIConfig


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
        key = OpenAIConfig.parse(target).api_key_env  # None: a keyless endpoint
        if key is not None and not os.environ.get(key):
            return (
                f"run {run.name!r}: its target names the key variable {key}, which is not set "
                "here, so its endpoint cannot be called (set it; a target for an endpoint "
                'that takes no key says "api_key_env": null)'
            )
    return None
