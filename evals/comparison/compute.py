"""Comparing a head run with a base run of the same suite (``comparison_compute``, pure), for
the page, ``manage.py gate`` and the API alike.

Comparability (same suite, grader set and judge versions) is a banner: figures are still
computed but the gate cannot decide. Cases match by content hash (then key); added, removed
and changed cases are left out. Per shared case: base x/N → head y/M and a ``change_class``;
the headline (``evals.comparison.headline``), pass@k and pass^k, usage per side."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.strict_json import json_safe
from core.templatetags.dashboard import key_ks
from evals.comparison.headline import Headline, headline_compute
from evals.comparison.passk import PassHatKDelta, pass_1_paired, pass_k_rows
from evals.comparison.run_data import GraderInfo, RunData
from evals.comparison.usage import UsageDelta, usage_delta
from stats.power import DetectableDrop, min_detectable_drop

FIXED, BROKEN, BETTER, WORSE, FLAKY, UNCHANGED, NO_VERDICT = (
    "fixed",
    "broken",
    "better",
    "worse",
    "flaky",
    "unchanged",
    "no verdict",
)
CHANGE_CLASSES = (FIXED, BROKEN, BETTER, WORSE, FLAKY, UNCHANGED, NO_VERDICT)


def change_class(base_passed: int, base_graded: int, head_passed: int, head_graded: int) -> str:
    """The change class of a case: "fixed" (base 0 passes → head all pass), "broken" (base
    all pass → head any fail), "better"/"worse" (rate up/down otherwise), "flaky" (same
    rate strictly between 0 and 1), "unchanged" (same rate, 0 or 1), "no verdict" (nothing
    graded on a side). Rates are compared exactly (x·M vs y·N)."""
    if not base_graded or not head_graded:
        return NO_VERDICT
    if base_passed == 0 and head_passed == head_graded:
        return FIXED
    if base_passed == base_graded and head_passed < head_graded:
        return BROKEN
    lhs, rhs = head_passed * base_graded, base_passed * head_graded
    if lhs > rhs:
        return BETTER
    if lhs < rhs:
        return WORSE
    return FLAKY if 0 < base_passed < base_graded else UNCHANGED


@dataclass(frozen=True)
class CaseComparison:
    """One shared case: ``base_passed``/``base_graded`` → ``head_passed``/``head_graded``, rates in
    [0, 1] (None when nothing graded), ``delta`` = head − base, ``change`` (a description:
    "broken" never blocks by itself), errored and provisional counts, and each side's
    ``(passed, graded)`` per look (``CaseData.looks``)."""

    key: str
    content_hash: str
    tags: tuple[str, ...]
    base_passed: int
    base_graded: int
    head_passed: int
    head_graded: int
    base_rate: float | None
    head_rate: float | None
    delta: float | None
    change: str
    base_errored: int
    head_errored: int
    provisional: int
    base_looks: tuple[tuple[int, int], ...] = ()
    head_looks: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class CaseRef:
    """A case left out of the test: ``key``, ``content_hash``, ``tags``; for a changed case
    ``other_hash`` is the base's hash (``content_hash`` is head's)."""

    key: str
    content_hash: str
    tags: tuple[str, ...]
    other_hash: str = ""


@dataclass(frozen=True)
class SideCounts:
    """One run's trial counts (whole run): ``trials``, ``pipeline_errored``,
    ``grade_errored`` (ok trials left out for an errored gating grade), ``provisional``
    gating grades from untrusted judge versions, ``cases``."""

    cases: int
    trials: int
    pipeline_errored: int
    grade_errored: int
    provisional: int

    @property
    def errored(self) -> int:
        return self.pipeline_errored + self.grade_errored

    @property
    def errored_fraction(self) -> float:
        return self.errored / self.trials if self.trials else 0.0


@dataclass(frozen=True)
class Comparison:
    """Everything the comparison page, the gate and the API show (module docstring)."""

    base: RunData
    head: RunData
    alpha: float
    problems: list[str]
    cases: list[CaseComparison]
    added: list[CaseRef]
    removed: list[CaseRef]
    changed: list[CaseRef]
    class_counts: dict[str, int]
    headline: Headline | None
    base_counts: SideCounts
    head_counts: SideCounts
    usage: UsageDelta
    pass_hat_k: list[PassHatKDelta]
    pass_at_k: list[PassHatKDelta]
    broken_regressions: list[CaseComparison]
    detectable: DetectableDrop | None = None
    suite_kind: str = "regression"
    notes: list[str] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        return not self.problems

    @property
    def pass_k_pairs(self) -> list[tuple[PassHatKDelta, PassHatKDelta]]:
        """(pass@k, pass^k) at the ks a page shows (``core.templatetags.dashboard.key_ks``)."""
        shown = {r.k for r in key_ks(self.pass_hat_k)}
        return [
            (a, h) for a, h in zip(self.pass_at_k, self.pass_hat_k, strict=True) if h.k in shown
        ]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON-safe dict (Decimals as strings, no NaN), the p-value as float and text."""
        data = json_safe({k: v for k, v in asdict(self).items() if k not in ("base", "head")})
        for side, run in (("base", self.base), ("head", self.head)):
            data[side] = {
                "label": run.label,
                "uuid": run.uuid,
                "name": run.name,
                "suite": run.suite_name,
                "kind": run.suite_kind,
                "trials_per_case": run.trials_per_case,
                "cases": len(run.cases),
                "source": run.source,
            }
        data["comparable"] = self.comparable
        if self.headline is not None:
            data["headline"]["p_text"] = self.headline.p_text
        return data


def comparability_problems(base: RunData, head: RunData) -> list[str]:
    """Reasons the two runs are not comparable (empty when they are): different suites, a changed
    grader set (keys or gating), a changed judge version per grader."""
    problems = []
    if base.uuid and base.uuid == head.uuid:
        problems.append("base and head are the same run: there is nothing to compare")
    if base.suite_name != head.suite_name:
        problems.append(
            f"different suites ({base.suite_name} → {head.suite_name}): the runs are not comparable"
        )
    b = {g.key: g for g in base.graders}
    h = {g.key: g for g in head.graders}
    removed = [k for k in b if k not in h]
    added = [k for k in h if k not in b]
    # A grader key that embeds the version (judge:<name>:v<n>) changes with it: pair a
    # removed and an added judge grader of the same judge as a version change.
    for rk in list(removed):
        match = next(
            (ak for ak in added if b[rk].judge_name and b[rk].judge_name == h[ak].judge_name), None
        )
        if match is not None:
            removed.remove(rk)
            added.remove(match)
            problems.append(_judge_change(b[rk], h[match]))
    if removed or added:
        parts = ([f"added {', '.join(added)}"] if added else []) + (
            [f"removed {', '.join(removed)}"] if removed else []
        )
        problems.append(f"grader set changed ({'; '.join(parts)}): the runs are not comparable")
    for key in (k for k in b if k in h):
        if b[key].gating != h[key].gating:
            problems.append(
                f"grader {key} is {'gating' if b[key].gating else 'non-gating'} "
                f"in base and {'gating' if h[key].gating else 'non-gating'} in "
                "head: the runs are not comparable"
            )
        if b[key].judge_version != h[key].judge_version:
            problems.append(_judge_change(b[key], h[key]))
    return problems


def _judge_change(b: GraderInfo, h: GraderInfo) -> str:
    return (
        f"judge version changed ({b.judge_version or 'no judge'} → "
        f"{h.judge_version or 'no judge'}): the runs are not comparable"
    )


def _match_cases(base: RunData, head: RunData):
    """(pairs [(base CaseData, head CaseData)], added, removed, changed) by content hash,
    then key within a hash; a hash unmatched on both sides with the same key is changed."""
    b_by = {(c.content_hash, c.key): c for c in base.cases}
    h_by = {(c.content_hash, c.key): c for c in head.cases}
    pairs = [(b_by[k], h_by[k]) for k in h_by if k in b_by]
    b_left = {k: c for k, c in b_by.items() if k not in h_by}
    h_left = {k: c for k, c in h_by.items() if k not in b_by}
    # Same content under a new key (renamed): still the same case.
    b_hash: dict[str, list] = {}
    for k in b_left:
        b_hash.setdefault(k[0], []).append(k)
    for k in list(h_left):
        cands = b_hash.get(k[0])
        if cands:
            pairs.append((b_left.pop(cands.pop(0)), h_left.pop(k)))
    b_key = {c.key: c for c in b_left.values()}
    changed = []
    for k, c in list(h_left.items()):
        old = b_key.pop(c.key, None)
        if old is not None:
            changed.append(CaseRef(c.key, c.content_hash, c.tags, old.content_hash))
            del h_left[k]
    added = [CaseRef(c.key, c.content_hash, c.tags) for c in h_left.values()]
    removed = [CaseRef(c.key, c.content_hash, c.tags) for c in b_key.values()]
    pairs.sort(key=lambda p: p[1].key)
    return (
        pairs,
        sorted(added, key=lambda r: r.key),
        sorted(removed, key=lambda r: r.key),
        sorted(changed, key=lambda r: r.key),
    )


def _side(run: RunData) -> SideCounts:
    return SideCounts(
        cases=len(run.cases),
        trials=run.trials_total,
        pipeline_errored=run.pipeline_errored,
        grade_errored=run.grade_errored,
        provisional=run.provisional,
    )


def base_detectable_drop(base: RunData, *, alpha: float = 0.05) -> DetectableDrop | None:
    """``stats.power.min_detectable_drop`` of the base's graded cases; None when none."""
    rates = [c.passed / c.graded for c in base.cases if c.graded]
    if not rates:
        return None
    return min_detectable_drop(rates, max(1, base.trials_per_case), alpha=alpha)


def comparison_compute(
    *,
    base: RunData,
    head: RunData,
    alpha: float = 0.05,
    n_resamples: int = 10_000,
    seed: int = 0,
    detectable: DetectableDrop | None = None,
    with_power: bool = True,
) -> Comparison:
    """Compare ``head`` with ``base`` (pure). ``alpha``: the test's two-sided level and
    1 − the intervals' confidence; ``n_resamples``/``seed``: Monte Carlo draws of the
    permutation test when exact enumeration does not fit; ``detectable``: a precomputed
    ``base_detectable_drop``. Raises ValueError unless 0 < alpha < 1. Long: one pass assembles
    every section of ``Comparison`` from the same matched cases."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    pairs, added, removed, changed = _match_cases(base, head)
    rows = []
    for b, h in pairs:
        br = b.passed / b.graded if b.graded else None
        hr = h.passed / h.graded if h.graded else None
        rows.append(
            CaseComparison(
                key=h.key,
                content_hash=h.content_hash,
                tags=h.tags,
                base_passed=b.passed,
                base_graded=b.graded,
                head_passed=h.passed,
                head_graded=h.graded,
                base_rate=br,
                head_rate=hr,
                delta=None if hr is None or br is None else hr - br,
                change=change_class(b.passed, b.graded, h.passed, h.graded),
                base_errored=b.pipeline_errored + b.grade_errored,
                head_errored=h.pipeline_errored + h.grade_errored,
                provisional=b.provisional + h.provisional,
                base_looks=b.looks or ((b.passed, b.graded),),
                head_looks=h.looks or ((h.passed, h.graded),),
            )
        )
    counts = dict.fromkeys(CHANGE_CLASSES, 0)
    for row in rows:
        counts[row.change] += 1
    kind = head.suite_kind
    broken = [r for r in rows if r.change == BROKEN] if kind == "regression" else []
    notes = []
    if counts[NO_VERDICT]:
        notes.append(
            f"{counts[NO_VERDICT]} shared case(s) have no graded trial on a side and "
            "are left out of the test"
        )
    if detectable is None and with_power:
        detectable = base_detectable_drop(base, alpha=alpha)
    headline = headline_compute(pairs, alpha=alpha, n_resamples=n_resamples, seed=seed)
    pass_at, pass_hat = pass_k_rows(pairs, min(base.trials_per_case, head.trials_per_case))
    if (
        headline is not None
        and all(bool(b.graded) == bool(h.graded) for b, h in pairs)
        and pass_at
        and pass_at[0].base_cases == pass_at[0].head_cases == headline.n_cases
    ):  # k = 1 is over the headline's cases: one quantity, one interval
        pass_at, pass_hat = pass_1_paired(pass_at, headline), pass_1_paired(pass_hat, headline)
    return Comparison(
        base=base,
        head=head,
        alpha=alpha,
        problems=comparability_problems(base, head),
        cases=rows,
        added=added,
        removed=removed,
        changed=changed,
        class_counts=counts,
        headline=headline,
        base_counts=_side(base),
        head_counts=_side(head),
        usage=usage_delta([b for b, _ in pairs], [h for _, h in pairs]),
        pass_at_k=pass_at,
        pass_hat_k=pass_hat,
        broken_regressions=broken,
        detectable=detectable,
        suite_kind=kind,
        notes=notes,
    )
