"""Runs of a grid graded by different grader sets: the warning naming which runs differ and
how (``grader_set_differences``), and whether two columns' verdicts may be compared at all
(``same_gating``).

A case's overall verdict is "every gating grader passed" (``evals.grading.verdict``): a run
with a gating grader another lacks can fail a case the other passes with the same output,
so a change between such runs says nothing of the target. The grid does not give such a
case a change class (it is "graders differ", never "broken"). Read from the stored grader
sets (``Run.grader_set``): no query."""

from __future__ import annotations

import json
from collections.abc import Sequence

from evals.models import Run

GRADERS_DIFFER = "graders differ"


def gating_set(run: Run) -> frozenset[str]:
    """The keys of ``run``'s gating graders, as stored."""
    return frozenset(key for key, gates in run.grader_set.gating_pairs if gates)


def _specs(run: Run) -> dict[str, str]:
    """Grader key -> its kind, config and gating as compact JSON text."""
    out = {}
    for spec in run.graders or []:
        if isinstance(spec, dict):
            body = {k: spec.get(k) for k in ("kind", "config", "gating")}
            out[str(spec.get("key"))] = json.dumps(body, sort_keys=True, default=str)
    return out


def grader_set_differences(runs: Sequence[Run]) -> list[str]:
    """One sentence per run whose grader set differs from the newest run's (the last of
    ``runs``, oldest first): the graders it lacks, those it adds and those it configures
    differently, by key. [] when every run has the same set (or fewer than two runs)."""
    if len(runs) < 2:
        return []
    ref = runs[-1]
    ref_specs = _specs(ref)
    out = []
    for run in runs[:-1]:
        specs = _specs(run)
        lacks = sorted(ref_specs.keys() - specs.keys())
        adds = sorted(specs.keys() - ref_specs.keys())
        changed = sorted(k for k in specs.keys() & ref_specs.keys() if specs[k] != ref_specs[k])
        parts = []
        if lacks:
            parts.append(f"lacks {', '.join(lacks)}")
        if adds:
            parts.append(f"has {', '.join(adds)}, which {ref.name!r} lacks")
        if changed:
            parts.append(f"configures {', '.join(changed)} differently (kind, config or gating)")
        if parts:
            out.append(f"{run.name!r} {'; '.join(parts)}")
    return out


def same_gating(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether verdicts decided by gating sets ``a`` and ``b`` may be compared (equal sets)."""
    return a == b
