"""Comparing a head run with a base run of the same suite, and the CI gate's decision.

``comparison_compute`` is pure (plain ``RunData`` in, ``Comparison`` out); ``comparison_get``
loads two runs from the database and calls it. The comparison page, ``manage.py gate`` and
the API all use these, so they cannot tell different stories.

Rules:
1. Comparability first (fault K1): same suite name, same grader set (keys and gating), same
   judge version per grader. A failed check is a problem (banner); the figures are still
   computed on the shared cases, but the gate cannot decide.
2. Cases are matched by content hash (and key, when two cases share content); a case only
   in head is "added", only in base "removed", same key with new content "changed"; all of
   those are left out of the test.
3. Per shared case: base x/N → head y/M and a change class (``change_class``).
4. Headline over shared cases graded on both sides: mean base rate, mean head rate, delta,
   the stratified permutation p (which decides), the within-case interval (the size of the
   effect on these cases: ``stats.compare.within_case_interval``) and the clustered
   interval (the "in general" question, labelled).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from typing import Any

import numpy as np
from django.core.cache import cache

from core.gc_pause import gc_paused_call
from core.strict_json import json_safe
from core.templatetags.dashboard import key_ks
from evals.comparison.run_data import (
    CaseData,
    GraderInfo,
    RunData,
    run_data_get,
    verdict_lists,
)
from evals.fingerprint import judge_trust_fingerprint, run_fingerprints
from evals.report.cost_quality import PER_TRIAL_QUANTUM, CostQuality, cost_quality
from evals.report.figures import pass_k_table
from stats.compare import (
    Interval,
    clustered_paired_interval,
    stratified_permutation_test,
    within_case_interval,
)
from stats.intervals import clustered_rate_interval
from stats.passk import difference_interval
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
EXACT_CASE_LIMIT = 500


def pvalue_format(p: float, alpha: float = 0.05) -> str:
    """A p-value for people: never "0" or "0.000" (fault D2).

    Below 0.001 -> "< 0.001"; below 0.1 three decimals (2/1024 -> "0.002"); otherwise two
    ("0.41"). Extra decimals are added when rounding would carry p across ``alpha``
    (0.0496 at alpha 0.05 -> "0.0496", not "0.050"). Raises ValueError outside [0, 1].
    """
    if not (isinstance(p, int | float) and math.isfinite(p) and 0 <= p <= 1):
        raise ValueError(f"p-value must be in [0, 1], got {p!r}")
    if p < 0.001:
        return "< 0.001"
    digits = 3 if p < 0.1 else 2
    text = f"{p:.{digits}f}"
    while (p < alpha) != (float(text) < alpha) and digits < 8:
        digits += 1
        text = f"{p:.{digits}f}"
    return text


def pvalue_phrase(p_text: str) -> str:
    """``"p = 0.002"``, or ``"p < 0.001"`` for a floored value (never "p = < 0.001")."""
    return f"p {p_text}" if p_text.startswith("<") else f"p = {p_text}"


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
    """One shared case: ``base_passed``/``base_graded`` → ``head_passed``/``head_graded``,
    rates in [0, 1] (None when nothing graded), ``delta`` = head − base rate, ``change``
    (``change_class``, a description: "broken" never blocks by itself), errored trials per
    side (pipeline + errored gating grade), provisional gating grades (both sides) and each
    side's ``(passed, graded)`` per look (the gate's input; ``CaseData.looks``)."""

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
class Headline:
    """The answer over ``n_cases`` shared cases graded on both sides: mean per-case pass
    rates (fractions), ``delta`` = head − base; ``p_value`` of the two-sided stratified
    permutation test (``p_exact``: exact enumeration, else Monte Carlo with
    ``n_resamples``); ``bootstrap_low/high`` (names kept for the API): the within-case
    interval at ``confidence`` (this exact suite, cases fixed; the MOVER of Clopper–Pearson
    limits joined with Agresti–Caffo, ``stats.compare.within_case_interval``; never of zero
    width); ``clustered``: the "in general" interval (cases as a sample, Miller 2024);
    ``sentence``: the plain-words reading; ``disagreement``: non-empty when p and the
    within-case interval tell different stories."""

    n_cases: int
    base_rate: float
    head_rate: float
    delta: float
    p_value: float
    p_exact: bool
    n_resamples: int
    bootstrap_low: float
    bootstrap_high: float
    confidence: float
    clustered: Interval
    significant: bool
    sentence: str
    disagreement: str = ""

    @property
    def p_text(self) -> str:
        return pvalue_format(self.p_value, 1 - self.confidence)


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
class Usage:
    """Usage over the shared cases' finished trials of one side: ``cost_usd`` total (None
    when any cost is unknown; ``cost_known_usd`` then is a lower bound), per-trial means
    (USD, tokens in+out, ms; None when unknown), ``cost_unknown``/``tokens_unknown`` trial
    counts, ``finished`` trials; ``quality``: cost per passing trial and pass rate per dollar
    over the same cases (``evals.report.cost_quality``)."""

    finished: int
    cost_usd: Decimal | None
    cost_known_usd: Decimal
    cost_unknown: int
    cost_per_trial_usd: Decimal | None
    tokens: int | None
    tokens_unknown: int
    tokens_per_trial: float | None
    latency_mean_ms: float | None
    quality: CostQuality | None = None


@dataclass(frozen=True)
class UsageDelta:
    """head − base per-trial means (null-aware: None when either side is unknown)."""

    base: Usage
    head: Usage
    cost_per_trial_usd: Decimal | None
    tokens_per_trial: float | None
    latency_mean_ms: float | None


@dataclass(frozen=True)
class PassHatKDelta:
    """pass^k (Yao et al. 2024) — or pass@k (Chen et al. 2021) in ``Comparison.pass_at_k`` —
    at one k over shared cases: base, head and head − base; None where a side has no case
    with k graded trials. ``base_low``/``base_high`` and ``head_low``/``head_high``: each
    side's 95% interval clustered by case (``evals.report.figures.PassK``);
    ``delta_low``/``delta_high``: the difference's 95% interval, never of zero width; None
    with the delta. ``delta_method`` says which: ``"paired"`` at k = 1 when every shared case
    with a verdict has one on both sides (pass@1 = pass^1 is then the headline's mean of
    per-case differences: its delta and its interval are the headline's "in general" one,
    ``stats.compare.clustered_paired_interval``, which uses the pairing: one quantity, one
    interval); else ``"mover"``, the MOVER of the two sides' intervals
    (``stats.passk.difference_interval``: Newcombe 1998, Zou & Donner 2008; conservative when
    the runs share cases)."""

    k: int
    base: float | None
    head: float | None
    delta: float | None
    base_low: float | None = None
    base_high: float | None = None
    head_low: float | None = None
    head_high: float | None = None
    delta_low: float | None = None
    delta_high: float | None = None
    delta_method: str = "mover"
    # The cases each side's figure is over (every k of a table: the shared cases with at
    # least k_max graded trials on that side, ``evals.report.figures.pass_k_table``).
    base_cases: int | None = None
    head_cases: int | None = None


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
        """Strict-JSON-safe dict (Decimals as strings, no NaN): runs as summaries, the
        p-value as a float plus its text."""
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
    """Reasons the two runs are not comparable (empty when they are): different suites,
    a changed grader set (keys or gating), a changed judge version per grader (fault K1:
    "judge version changed (judge-v1 → judge-v2): the runs are not comparable")."""
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


def _points(delta: float) -> str:
    text = f"{abs(delta) * 100:.1f}".removesuffix(".0")
    return f"{text} point{'' if text == '1' else 's'}"


def _headline(pairs, *, alpha, n_resamples, seed) -> Headline | None:
    graded = [(b, h) for b, h in pairs if b.graded and h.graded]
    if not graded:
        return None
    base_v = verdict_lists(b for b, _ in graded)
    head_v = verdict_lists(h for _, h in graded)
    # Exact enumeration convolves one kernel per case (~1 s at 2,000 cases); above
    # EXACT_CASE_LIMIT cases the grouped Monte Carlo (~0.2 s, p = (b+1)/(m+1)) is used.
    method = "auto" if len(graded) <= EXACT_CASE_LIMIT else "monte-carlo"
    test = stratified_permutation_test(
        base_v, head_v, n_resamples=n_resamples, seed=seed, method=method
    )
    confidence = 1 - alpha
    low, high = within_case_interval(base_v, head_v, confidence=confidence)
    clustered = clustered_paired_interval(base_v, head_v, confidence=confidence)
    base_rate = float(np.mean([b.passed / b.graded for b, _ in graded]))
    head_rate = float(np.mean([h.passed / h.graded for _, h in graded]))
    delta = test.delta
    p_text = pvalue_format(test.p_value, alpha)
    significant = test.p_value < alpha
    if abs(delta) < 1e-12:
        size = "head and base have the same pass rate"
    else:
        size = f"head is {_points(delta)} {'higher' if delta > 0 else 'lower'}"
    if significant:
        sentence = (
            f"{size}; this is larger than the pipeline's own randomness, {pvalue_phrase(p_text)}"
        )
    else:
        sentence = f"{size}; this is within the pipeline's own randomness ({pvalue_phrase(p_text)})"
    ci_has_zero = low <= 0 <= high
    disagreement = ""
    if significant == ci_has_zero:
        ci = f"[{low * 100:+.1f}, {high * 100:+.1f}] points"
        disagreement = (
            f"the permutation test ({pvalue_phrase(p_text)}) and the {confidence:.0%} "
            f"interval on this suite "
            f"{ci} disagree near the boundary: the interval "
            f"{'contains' if ci_has_zero else 'excludes'} 0"
        )
    return Headline(
        n_cases=len(graded),
        base_rate=base_rate,
        head_rate=head_rate,
        delta=delta,
        p_value=test.p_value,
        p_exact=test.exact,
        n_resamples=test.n_resamples,
        bootstrap_low=low,
        bootstrap_high=high,
        confidence=confidence,
        clustered=clustered,
        significant=significant,
        sentence=sentence,
        disagreement=disagreement,
    )


def _usage(cases: list[CaseData]) -> Usage:
    finished = sum(c.finished for c in cases)
    known = sum((c.cost_known_usd for c in cases), Decimal(0))
    unknown = sum(c.cost_unknown for c in cases)
    cost = known if finished and not unknown else None
    tok_unknown = sum(c.tokens_unknown for c in cases)
    tokens = sum(c.input_tokens + c.output_tokens for c in cases) if not tok_unknown else None
    lat_n = sum(c.latency_n for c in cases)
    graded = [c for c in cases if c.graded]
    rate = clustered_rate_interval([c.passed for c in graded], [c.graded for c in graded])
    quality = cost_quality(
        finished=finished,
        cost_known_usd=known,
        cost_unknown=unknown,
        passed=sum(c.passed for c in cases),
        pass_rate=rate.mean,
        pass_rate_low=rate.ci_low,
        pass_rate_high=rate.ci_high,
    )
    return Usage(
        finished=finished,
        cost_usd=cost,
        cost_known_usd=known,
        cost_unknown=unknown,
        cost_per_trial_usd=(cost / finished).quantize(PER_TRIAL_QUANTUM)
        if cost is not None
        else None,
        tokens=tokens if finished else None,
        tokens_unknown=tok_unknown,
        tokens_per_trial=tokens / finished if tokens is not None and finished else None,
        latency_mean_ms=sum(c.latency_sum_ms for c in cases) / lat_n if lat_n else None,
        quality=quality,
    )


def _minus(a, b):
    return None if a is None or b is None else a - b


def _pass_k_delta(k: int, base: tuple, head: tuple) -> PassHatKDelta:
    """One k's base, head and head − base, each (mean, low, high), the difference's interval
    by ``stats.passk.difference_interval``."""
    low, high = difference_interval(*base, *head)
    return PassHatKDelta(
        k,
        base[0],
        head[0],
        _minus(head[0], base[0]),
        base[1],
        base[2],
        head[1],
        head[2],
        low,
        high,
    )


def _pass_1_paired(rows: list[PassHatKDelta], headline: Headline) -> list[PassHatKDelta]:
    """``rows`` with k = 1's delta and interval taken from ``headline``: over the same cases
    pass@1 (= pass^1) is the headline's mean of per-case differences, so it shows the
    headline's delta and its paired "in general" interval (``clustered``), not a second,
    wider MOVER interval for the same quantity. The caller checks the cases are the same."""
    if not rows or rows[0].k != 1 or rows[0].delta is None:
        return rows
    first = replace(
        rows[0],
        delta=headline.delta,
        delta_low=headline.clustered.low,
        delta_high=headline.clustered.high,
        delta_method="paired",
    )
    return [first, *rows[1:]]


def _pass_k(pairs, k_max: int) -> tuple[list[PassHatKDelta], list[PassHatKDelta]]:
    """(pass@k deltas, pass^k deltas) for k = 1..k_max over the shared cases."""
    at, out = [], []
    if not pairs or k_max < 1:
        return at, out
    sides = []
    for side in (0, 1):
        passed = np.array([p[side].passed for p in pairs], dtype=np.int64)
        graded = np.array([p[side].graded for p in pairs], dtype=np.int64)
        sides.append(pass_k_table(passed, graded, k_max))
    for b, h in zip(*sides, strict=True):
        cases = {"base_cases": b.n_cases, "head_cases": h.n_cases}
        at.append(
            replace(
                _pass_k_delta(
                    b.k,
                    (b.pass_at_k, b.pass_at_k_low, b.pass_at_k_high),
                    (h.pass_at_k, h.pass_at_k_low, h.pass_at_k_high),
                ),
                **cases,
            )
        )
        out.append(
            replace(
                _pass_k_delta(
                    b.k,
                    (b.pass_hat_k, b.pass_hat_k_low, b.pass_hat_k_high),
                    (h.pass_hat_k, h.pass_hat_k_low, h.pass_hat_k_high),
                ),
                **cases,
            )
        )
    return at, out


def _side(run: RunData) -> SideCounts:
    return SideCounts(
        cases=len(run.cases),
        trials=run.trials_total,
        pipeline_errored=run.pipeline_errored,
        grade_errored=run.grade_errored,
        provisional=run.provisional,
    )


def base_detectable_drop(base: RunData, *, alpha: float = 0.05) -> DetectableDrop | None:
    """``stats.power.min_detectable_drop`` from the base's per-case rates (graded cases)
    and its trials per case; None when nothing was graded."""
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
    """Compare ``head`` with ``base`` (pure; the rules are in the module docstring).

    ``alpha``: two-sided level of the test, and 1 − the intervals' confidence;
    ``n_resamples``/``seed``: Monte Carlo draws of the permutation test (when exact
    enumeration does not fit); ``detectable``: a precomputed
    ``base_detectable_drop`` (computed here when None and ``with_power``).
    Raises ValueError unless 0 < alpha < 1.
    """
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
                delta=_minus(hr, br),
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
    base_usage = _usage([b for b, _ in pairs])
    head_usage = _usage([h for _, h in pairs])
    notes = []
    if counts[NO_VERDICT]:
        notes.append(
            f"{counts[NO_VERDICT]} shared case(s) have no graded trial on a side and "
            "are left out of the test"
        )
    if detectable is None and with_power:
        detectable = base_detectable_drop(base, alpha=alpha)
    headline = _headline(pairs, alpha=alpha, n_resamples=n_resamples, seed=seed)
    pass_at, pass_hat = _pass_k(pairs, min(base.trials_per_case, head.trials_per_case))
    if (
        headline is not None
        and all(bool(b.graded) == bool(h.graded) for b, h in pairs)
        and pass_at
        and pass_at[0].base_cases == pass_at[0].head_cases == headline.n_cases
    ):  # k = 1 is over the headline's cases: one quantity, one interval
        pass_at, pass_hat = _pass_1_paired(pass_at, headline), _pass_1_paired(pass_hat, headline)
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
        usage=UsageDelta(
            base=base_usage,
            head=head_usage,
            cost_per_trial_usd=_minus(head_usage.cost_per_trial_usd, base_usage.cost_per_trial_usd),
            tokens_per_trial=_minus(head_usage.tokens_per_trial, base_usage.tokens_per_trial),
            latency_mean_ms=_minus(head_usage.latency_mean_ms, base_usage.latency_mean_ms),
        ),
        pass_at_k=pass_at,
        pass_hat_k=pass_hat,
        broken_regressions=broken,
        detectable=detectable,
        suite_kind=kind,
        notes=notes,
    )


POWER_CACHE_SECONDS = 24 * 3600


def detectable_drop_get(
    *, run: Any, alpha: float = 0.05, data: RunData | None = None
) -> DetectableDrop | None:
    """The smallest drop ``run`` (as a baseline) can detect with 80% power at ``alpha``
    (``base_detectable_drop``; None when it graded nothing), without simulating on every
    view (~110 ms at 2,000 cases).

    A finished run's value has one home, its stored summary
    (``evals.comparison.summary.run_summaries_get``: read while the run's key holds,
    computed and stored there on first need for this alpha; ``data`` is not used, the
    summary reads the run after its key). A run that is not finished is computed from
    ``data`` (else the run loader) and cached in Django's cache for a day under its
    fingerprint's ``state`` and judge trust (``evals.fingerprint``), so any new trial or
    grade, a regrade in place included, misses it. Queries: four for a finished run whose
    summary holds the value; two for a cached unfinished one; plus the loader's otherwise.
    """
    from evals.comparison.summary import run_summaries_get  # noqa: PLC0415 - it imports this

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


@gc_paused_call
def comparison_get(
    *, base: Any, head: Any, alpha: float = 0.05, keys: dict[int, str | None] | None = None
) -> Comparison:
    """Load two runs and compare them (``comparison_compute``). Finished runs are read from
    their stored summaries (``evals.comparison.summary.run_summaries_get``: the ``RunData``
    and the base's detectable drop, computed and stored on first need), others through the
    run loader with the detectable drop from ``detectable_drop_get``. ``keys``: the runs'
    ``run_summary_keys`` when already read. About ten queries, none per case or trial."""
    from evals.comparison.summary import run_summaries_get  # noqa: PLC0415 - it imports this

    reads = run_summaries_get(runs=[base, head], keys=keys, detectable_for=[base], alpha=alpha)
    return comparison_compute(
        base=reads[base.id].data,
        head=reads[head.id].data,
        alpha=alpha,
        detectable=reads[base.id].detectable[alpha],
        with_power=False,
    )
