"""The run list's baseline badge and regression flag: whether a run is its suite's baseline,
and the gate's verdict on it against that baseline as last decided (``baseline_marks_get``).

A verdict is remembered (in the "shared" cache: a worker decides it as a run closes, the web
reads it) when a surface decides it at the gate's defaults
(``verdict_remember``: the comparison page, ``GET /api/comparisons/`` and ``manage.py
gate``) under both runs' summary keys (``evals.comparison.summary.run_summary_keys``), so a
new trial, grade, regrade, judge trust or case change makes it unknown again. The run list reads
what was remembered, one cache read for the page, and never computes a comparison; a run
decides itself against its suite's baseline once as it closes (``baseline_verdict_refresh``).
A pair nobody decided, or decided before a change, is "not compared"."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.cache import caches
from django.db.models import OuterRef, QuerySet, Subquery

from core.errors import DomainError
from evals.comparison.summary import run_summary_keys
from evals.models import Baseline, Run

VERDICT_CACHE_SECONDS = 30 * 24 * 3600
NOT_COMPARED = "not compared"
GATE_ALPHA = 0.05  # the gate command's default --alpha, which the comparison page uses


@dataclass(frozen=True)
class BaselineMark:
    """One run of the list: ``is_baseline`` (its suite's current baseline), ``baseline_name``
    and ``baseline_uuid`` (that baseline's, "" when the suite has none) and ``verdict``: the
    gate's verdict against it ("pass", "block", "undecided", "cannot decide yet", "cannot
    decide"), "" when there is nothing to compare (the baseline itself, a run not finished, a suite
    without a baseline) or ``NOT_COMPARED`` when nobody decided it since the runs last
    changed."""

    is_baseline: bool = False
    baseline_name: str = ""
    verdict: str = ""
    baseline_uuid: str = ""

    @property
    def regression(self) -> bool:
        return self.verdict == "block"


NO_MARK = BaselineMark()


def _key(base: Run, head: Run, base_key: str, head_key: str) -> str:
    digest = hashlib.sha256(f"{base_key}|{head_key}".encode()).hexdigest()[:32]
    return f"assay:baseline-verdict:v1:{base.uuid}:{head.uuid}:{digest}"


def verdict_remember(
    *, base: Run, head: Run, verdict: str, alpha: float = GATE_ALPHA, default_policy: bool = True
) -> None:
    """Remember the gate's ``verdict`` on ``head`` against ``base`` (both finished; else
    nothing) under their summary keys, when it was decided as the comparison page decides it:
    at ``GATE_ALPHA`` under the default policy (no errored trials allowed, trusted judges
    only, comparable runs). Three queries (the keys)."""
    if alpha != GATE_ALPHA or not default_policy or not (base.is_terminal and head.is_terminal):
        return
    keys = run_summary_keys(runs=[base, head])
    base_key, head_key = keys[base.id], keys[head.id]
    if base_key is None or head_key is None:
        return
    caches["shared"].set(_key(base, head, base_key, head_key), verdict, VERDICT_CACHE_SECONDS)


def with_suite_baseline(runs: QuerySet[Run]) -> QuerySet[Any]:
    """``runs`` annotated with ``suite_baseline_run_id``: the id of its suite's current baseline
    run (the latest ``Baseline`` row), or None; a subquery, no query of its own."""
    latest = Baseline.objects.filter(suite_id=OuterRef("suite_id")).order_by("-set_at", "-id")
    return runs.annotate(suite_baseline_run_id=Subquery(latest.values("run_id")[:1]))


def baseline_marks_get(*, runs: Sequence[Run]) -> dict[int, BaselineMark]:
    """Run id -> ``BaselineMark`` for ``runs``, read through ``with_suite_baseline``. No query
    when no suite of ``runs`` has a baseline; else at most four and one cache read, whatever
    the number of runs: the baseline runs not in ``runs`` and the summary keys of the finished
    runs and their baselines."""
    current: dict[int, int] = {}  # suite id -> its baseline's run id
    for run in runs:
        base_id = getattr(run, "suite_baseline_run_id", None)  # the annotation
        if base_id is not None:
            current[run.suite_id] = base_id
    if not current:
        return {}
    by_id = {r.id: r for r in runs}
    missing = set(current.values()) - by_id.keys()
    if missing:
        by_id.update({r.id: r for r in Run.objects.filter(id__in=missing).only(*_FIELDS)})
    pairs = [
        (by_id[current[r.suite_id]], r)
        for r in runs
        if r.suite_id in current and current[r.suite_id] != r.id and r.is_terminal
    ]
    keys = (
        run_summary_keys(runs=list({r.id: r for p in pairs for r in p}.values())) if pairs else {}
    )
    wanted = {}
    for base, head in pairs:
        base_key, head_key = keys.get(base.id), keys.get(head.id)
        if base_key and head_key:
            wanted[head.id] = _key(base, head, base_key, head_key)
    found = caches["shared"].get_many(list(wanted.values())) if wanted else {}
    marks = {}
    for run in runs:
        base_id = current.get(run.suite_id)
        if base_id is None:
            continue
        base = by_id[base_id]
        mark = BaselineMark(baseline_name=base.name, baseline_uuid=str(base.uuid))
        if base_id == run.id:
            mark = BaselineMark(is_baseline=True, baseline_name=base.name)
        elif run.is_terminal:
            verdict = found.get(wanted.get(run.id, ""), NOT_COMPARED)
            mark = dataclasses.replace(mark, verdict=verdict)
        marks[run.id] = mark
    return marks


_FIELDS = ("id", "uuid", "name", "suite_id", "status")


def baseline_verdict_refresh(*, run: Run) -> str | None:
    """Decide ``run`` against its suite's current baseline as the comparison page does (the
    gate's defaults: ``comparison_plan``, ``comparison_cached_get``, ``gate_decide``) and
    remember the verdict, so the run list flags a regression without anyone opening the pair.
    Called once as a run closes (``evals.runner.finalize``). Returns the verdict, or None when
    there is nothing to decide (no baseline, the run is the baseline, a run not finished) or
    the pair cannot be compared (``DomainError``: nothing remembered, "not compared" stays)."""
    from evals.comparison.cache import comparison_cached_get  # noqa: PLC0415 - scipy, at close only
    from evals.comparison.gate import comparison_plan, gate_decide  # noqa: PLC0415

    baseline = (
        Baseline.objects.filter(suite_id=run.suite_id)
        .order_by("-set_at", "-id")
        .select_related("run")
        .first()
    )
    if baseline is None or baseline.run_id == run.id:
        return None
    base = baseline.run
    if not (base.is_terminal and run.is_terminal):
        return None
    try:
        plan, _refusal = comparison_plan(base=base, head=run, alpha=GATE_ALPHA)
        comparison = comparison_cached_get(base=base, head=run, alpha=GATE_ALPHA)
        decision = gate_decide(comparison, alpha=GATE_ALPHA, plan=plan)
    except DomainError:
        return None
    verdict_remember(base=base, head=run, verdict=decision.verdict)
    return decision.verdict
