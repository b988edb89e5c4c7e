"""Run summaries: what a comparison reads of a finished run, stored in the database.

A finished run's ``RunData`` and, per alpha, its detectable drop are stored in
``evals.models.RunSummary``, so a comparison reads two rows instead of every trial. A
summary is read only while its ``key`` equals the run's current key (``run_summary_keys``:
fingerprint, judge trust, case changes); a run not finished has none. The key is read before
the data, so a concurrent write stores newer data under an older key, which the next read
misses. Identity is read fresh."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from decimal import Decimal
from typing import Any

import orjson
from django.core.cache import cache
from django.utils import timezone

from evals.comparison.compute import base_detectable_drop
from evals.comparison.run_data import (
    CaseData,
    GraderInfo,
    RunData,
    run_data_get,
    runs_data_get,
)
from evals.fingerprint import (
    case_changes_fingerprints,
    judge_trust_fingerprint,
    run_fingerprints,
)
from evals.models import Run, RunSummary
from stats.power import DetectableDrop

CASE_FIELDS = tuple(f.name for f in fields(CaseData))
# A stored body is read by field name: a new field of CaseData (or GraderInfo) changes the
# key, so no summary written before it is read.
KEY_VERSION = (
    "v2."
    + hashlib.sha256(
        repr((CASE_FIELDS, tuple(f.name for f in fields(GraderInfo)))).encode()
    ).hexdigest()[:8]
)


@dataclass(frozen=True)
class SummaryRead:
    """One run as a comparison reads it: ``data`` (equal to ``run_data_get(run=)``) and
    ``detectable``: alpha -> the run's detectable drop as a base (None when undefined), for
    the alphas asked of ``run_summaries_get``."""

    data: RunData
    detectable: dict[float, DetectableDrop | None]


def run_summary_keys(*, runs: Sequence[Run]) -> dict[int, str | None]:
    """Run id -> its summary key (None if not finished); three queries whatever the run count."""
    prints = run_fingerprints(runs=runs)
    trust = judge_trust_fingerprint()
    changes = case_changes_fingerprints(suite_ids={r.suite_id for r in runs})
    keys: dict[int, str | None] = {}
    for run in runs:
        key = prints[run.id].key
        keys[run.id] = (
            None if key is None else f"{KEY_VERSION}:{key}:{trust}:{changes[run.suite_id]}"
        )
    return keys


def run_summaries_get(
    *,
    runs: Sequence[Run],
    keys: dict[int, str | None] | None = None,
    detectable_for: Sequence[Run] = (),
    alpha: float = 0.05,
) -> dict[int, SummaryRead]:
    """Run id -> ``SummaryRead`` for each of ``runs``, with the detectable drop at ``alpha`` for
    each run in ``detectable_for`` (the base).

    ``keys``: ``run_summary_keys(runs=)`` when the caller has them. A stored summary is read
    when its key matches, else computed and stored (one upsert for all). A run not finished is
    loaded every time, its detectable drop from ``detectable_drop_get``. Four queries when every
    summary is stored."""
    runs = list({r.id: r for r in runs}.values())  # base and head may be the same run
    if keys is None:
        keys = run_summary_keys(runs=runs)
    alpha_text = repr(float(alpha))
    want = {r.id for r in detectable_for}
    stored = {
        s.run_id: s
        for s in RunSummary.objects.filter(
            run_id__in=[r.id for r in runs if keys.get(r.id) is not None]
        )
    }
    out: dict[int, SummaryRead] = {}
    misses = []
    writes: list[RunSummary] = []
    for run in runs:
        summary = stored.get(run.id)
        if keys.get(run.id) is None or summary is None or summary.key != keys[run.id]:
            misses.append(run)
            continue
        data = _data_from_body(run, summary.body)
        detectable = {}
        if run.id in want:
            if alpha_text not in summary.detectable:
                drop = base_detectable_drop(data, alpha=alpha)
                summary.detectable[alpha_text] = None if drop is None else asdict(drop)
                writes.append(summary)
            raw = summary.detectable[alpha_text]
            detectable[alpha] = None if raw is None else DetectableDrop(**raw)
        out[run.id] = SummaryRead(data=data, detectable=detectable)
    if misses:
        loaded = runs_data_get(runs=misses)
        for run in misses:
            data = loaded[run.id]
            detectable = {}
            key = keys.get(run.id)
            if key is None:
                if run.id in want:
                    detectable[alpha] = detectable_drop_get(run=run, alpha=alpha, data=data)
                out[run.id] = SummaryRead(data=data, detectable=detectable)
                continue
            stored_drops: dict[str, Any] = {}
            if run.id in want:
                detectable[alpha] = base_detectable_drop(data, alpha=alpha)
                drop = detectable[alpha]
                stored_drops[alpha_text] = None if drop is None else asdict(drop)
            writes.append(
                RunSummary(
                    run_id=run.id,
                    key=key,
                    body=_body(data),
                    detectable=stored_drops,
                    computed_at=timezone.now(),
                )
            )
            out[run.id] = SummaryRead(data=data, detectable=detectable)
    if writes:
        RunSummary.objects.bulk_create(
            writes,
            update_conflicts=True,
            unique_fields=["run"],
            update_fields=["key", "body", "detectable", "computed_at"],
        )
    return out


POWER_CACHE_SECONDS = 24 * 3600


def detectable_drop_get(
    *, run: Any, alpha: float = 0.05, data: RunData | None = None
) -> DetectableDrop | None:
    """The smallest drop ``run`` (as a baseline) can detect with 80% power at ``alpha``
    (``evals.comparison.compute.base_detectable_drop``; None when it graded nothing), without
    simulating on every view (~110 ms at 2,000 cases).

    A finished run's value lives in its stored summary (``run_summaries_get``; ``data`` unused).
    A run not finished is computed from ``data`` (else loaded) and kept a day in Django's cache
    under its fingerprint's ``state`` and judge trust, so any new trial or grade misses it."""
    if run.is_terminal:
        read = run_summaries_get(runs=[run], detectable_for=[run], alpha=alpha)
        return read[run.id].detectable[alpha]
    state = run_fingerprints(runs=[run])[run.id].state
    key = f"assay:detectable:v2:{run.uuid}:{alpha}:{state}:{judge_trust_fingerprint()}"
    hit = cache.get(key)
    if hit is not None:
        return hit or None  # False caches "undefined"
    value = base_detectable_drop(data if data is not None else run_data_get(run=run), alpha=alpha)
    cache.set(key, value if value is not None else False, POWER_CACHE_SECONDS)
    return value


def run_summary_refresh(*, run: Run) -> None:
    """Store the summary of a finished ``run`` with its detectable drop at the gate's default alpha
    (0.05). Idempotent (an upsert keyed by the run); nothing for a run not finished."""
    if run.is_terminal:
        run_summaries_get(runs=[run], detectable_for=[run], alpha=0.05)


def _body(data: RunData) -> str:
    """A ``RunData``'s graders, cases and judge versions as compact JSON: each case a list in
    ``CASE_FIELDS`` order (Decimal cost as text), a third of its dict form's size."""
    cases = []
    for case in data.cases:
        row = [getattr(case, name) for name in CASE_FIELDS]
        row[CASE_FIELDS.index("cost_known_usd")] = str(case.cost_known_usd)
        cases.append(row)
    return orjson.dumps(
        {
            "fields": CASE_FIELDS,
            "graders": [asdict(g) for g in data.graders],
            "cases": cases,
            "judge_versions": data.judge_versions,
        }
    ).decode()


def _data_from_body(run: Run, body: str) -> RunData:
    """``run``'s ``RunData`` from its stored ``_body`` and identity, as the loader builds it."""
    raw = orjson.loads(body)
    names = raw["fields"]
    cost = names.index("cost_known_usd")
    tuples = {names.index(n) for n in ("tags", "verdicts")}
    looks = names.index("looks")
    cases = []
    for row in raw["cases"]:
        row[cost] = Decimal(row[cost])
        for i in tuples:
            row[i] = tuple(row[i])
        row[looks] = tuple(map(tuple, row[looks]))
        cases.append(CaseData(**dict(zip(names, row, strict=True))))
    suite = run.suite
    return RunData(
        label=f"{suite.name} / {run.name}",
        uuid=str(run.uuid),
        name=run.name,
        suite_name=suite.name,
        suite_kind=suite.kind,
        status=run.status,
        trials_per_case=run.trials_per_case,
        graders=tuple(GraderInfo(**g) for g in raw["graders"]),
        cases=tuple(cases),
        judge_versions=raw["judge_versions"],
        simulated=run.is_simulated,
    )
