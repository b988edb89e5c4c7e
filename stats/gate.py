"""The regression gate's decision from per-case counts: ``gate_decide``, for the command,
page, API, benchmark and adaptive runs. Its whole false-alarm rate is at most
``plan.alpha`` for any cases, trials and pass rates (the argument: ``stats.sequential``;
simulations: ``stats/gate_simulations.md``, ``bench/bench_gate.py``).

At each look r (0 = the runs as compared; 1..R = top-ups):

1. Test the active cases (all at look 0; later, those ``stats.sequential`` kept).
2. Per case, the exact one-sided selective p-value of "head lower" (Fisher's at look 0).
3. Regression suites: discrete Holm over them at ``case_share · alpha_r``; its exact size
   ``ε_r`` is what it spent.
4. The stratified suite test at ``alpha_r − ε_r`` (capability suites: alone at ``alpha_r``).
5. Block on a drop or a suite rejection; else "undecided" while a case continues and a
   round is left (``next_round``); else pass."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from stats.discrete import FamilyResult, discrete_holm
from stats.sequential import (
    CaseLooks,
    SelectiveTest,
    SuiteTest,
    TopUpPlan,
    continues,
    is_suspect,
    selective_case_test,
    selective_suite_test,
)

BLOCK = "block"
PASS = "pass"
UNDECIDED = "undecided"


@dataclass(frozen=True)
class LookResult:
    """One look: ``look``; ``alpha`` (alpha_r); ``active`` case indices; ``p_values`` (selective,
    shape (len(active),)); ``adjusted`` (None for capability); ``case_level``; ``case_size``
    (ε_r); ``suite``; ``suite_level``; ``drops``; ``suite_rejected``."""

    look: int
    alpha: float
    active: tuple[int, ...]
    p_values: np.ndarray
    adjusted: np.ndarray | None
    case_level: float
    case_size: float
    suite: SuiteTest
    suite_level: float
    drops: tuple[int, ...]
    suite_rejected: bool


@dataclass(frozen=True)
class CaseResult:
    """``status``: "drop", "suspect" (worse, not significant), "cleared" (suspect, then no
    worse), "clean"; ``look``; ``p_value``/``adjusted``; cumulative ``base``/``head``
    (passed, graded); ``active``."""

    index: int
    status: str
    look: int
    p_value: float
    adjusted: float | None
    base: tuple[int, int]
    head: tuple[int, int]
    active: bool


@dataclass(frozen=True)
class GateDecision:
    """``verdict``: "block", "pass" or "undecided" (run the round due and decide again);
    ``exit_code`` 1 for block, else 0; ``reason``; ``drops``; ``suite_p`` (look 0); ``looks``;
    ``cases``; ``next_round``: the look due and per case (base, head) trials, empty unless
    undecided; ``alpha_spent``: Σ alpha_r over the looks run."""

    verdict: str
    reason: str
    drops: tuple[int, ...]
    suite_p: float
    looks: tuple[LookResult, ...]
    cases: tuple[CaseResult, ...]
    next_round: dict[int, tuple[int, int]]
    next_look: int | None
    alpha_spent: float

    @property
    def exit_code(self) -> int:
        return 1 if self.verdict == BLOCK else 0

    @property
    def final(self) -> bool:
        """True when no further trial can change the decision."""
        return self.verdict != UNDECIDED

    @property
    def suspects(self) -> tuple[int, ...]:
        return tuple(c.index for c in self.cases if c.status == "suspect")


def _look(
    cases: Sequence[CaseLooks], active: list[int], look: int, alpha_r: float, plan: TopUpPlan
) -> tuple[LookResult, list[SelectiveTest]]:
    tests = [selective_case_test(cases[i], look=look, plan=plan) for i in active]
    p = np.array([t.p_value for t in tests])
    adjusted = None
    case_level = 0.0
    case_size = 0.0
    drops: tuple[int, ...] = ()
    if plan.suite_kind == "regression" and plan.share(look) > 0 and tests:
        case_level = plan.share(look) * alpha_r
        family: FamilyResult = discrete_holm(
            p_values=p, supports=[t.support for t in tests], alpha=case_level
        )
        adjusted = family.adjusted
        case_size = family.size
        drops = tuple(i for i, r in zip(active, family.rejected.tolist(), strict=True) if r)
    suite = selective_suite_test(tests)
    suite_level = max(0.0, alpha_r - case_size)
    suite_rejected = bool(tests) and suite.p_value <= suite_level * (1 + 1e-12)
    result = LookResult(
        look,
        alpha_r,
        tuple(active),
        p,
        adjusted,
        case_level,
        case_size,
        suite,
        suite_level,
        drops,
        suite_rejected,
    )
    return result, tests


def gate_decide(*, cases: Sequence[CaseLooks], plan: TopUpPlan) -> GateDecision:
    """Block / pass / undecided (module docstring, steps 1–5). ``cases``: per case its counts
    per look, paired with the caller's cases; ``plan``: fixed before the data
    (``round_sizes=()``: no top-up). Raises ``ValueError`` for no cases or looks the plan's
    rule would not have selected. ~2–3 ms for 100 cases of 5 + 5 trials once caches are warm.
    Long by design: the steps share the per-look arrays."""
    if not cases:
        raise ValueError("no cases to decide on")
    spending = plan.spending()
    n_looks = max(c.looks for c in cases)
    if n_looks > len(spending):
        raise ValueError(f"the plan has {len(spending) - 1} round(s); a case has {n_looks - 1}")
    active = list(range(len(cases)))
    looks: list[LookResult] = []
    last: dict[int, tuple[int, SelectiveTest, float | None]] = {}
    ever_suspect: set[int] = set()
    drops: tuple[int, ...] = ()
    reason = ""
    verdict = PASS
    look = 0
    while True:
        missing = [i for i in active if cases[i].looks <= look]
        if missing and len(missing) < len(active):
            raise ValueError(f"look {look}: some active cases have its trials and some do not")
        if missing:
            break
        result, tests = _look(cases, active, look, spending[look], plan)
        looks.append(result)
        for k, (i, t) in enumerate(zip(active, tests, strict=True)):
            adj = None if result.adjusted is None else float(result.adjusted[k])
            last[i] = (look, t, adj)
            b, nb = t.base
            h, nh = t.head
            if is_suspect(base_passed=b, base_graded=nb, head_passed=h, head_graded=nh):
                ever_suspect.add(i)
        if result.drops or result.suite_rejected:
            verdict = BLOCK
            drops = result.drops
            reason = _block_reason(result, plan)
            break
        nxt = [i for i in active if continues(cases[i], look=look, plan=plan)]
        stray = [i for i in range(len(cases)) if i not in nxt and cases[i].looks > look + 1]
        if stray:
            raise ValueError(
                f"case {stray[0]} has trials at look {look + 1} the rule did not ask for"
            )
        active = nxt
        look += 1
        if not active:
            break
    next_round: dict[int, tuple[int, int]] = {}
    next_look = None
    if verdict != BLOCK and active:
        verdict = UNDECIDED
        next_look = look
        m = plan.sizes[look - 1]
        next_round = dict.fromkeys(active, (m if plan.base_replayed else 0, m))
        reason = f"{len(active)} suspect case(s) need round {look} ({m} more trials a side)"
    elif verdict == PASS:
        reason = "no significant drop at any look"
    case_results = []
    pending = set(next_round)
    for i in range(len(cases)):
        lk, t, adj = last[i]
        b, nb = t.base
        h, nh = t.head
        worse = is_suspect(base_passed=b, base_graded=nb, head_passed=h, head_graded=nh)
        if i in drops:
            status = "drop"
        elif worse:
            status = "suspect"
        elif i in ever_suspect:
            status = "cleared"
        else:
            status = "clean"
        case_results.append(CaseResult(i, status, lk, t.p_value, adj, t.base, t.head, i in pending))
    return GateDecision(
        verdict=verdict,
        reason=reason,
        drops=drops,
        suite_p=looks[0].suite.p_value,
        looks=tuple(looks),
        cases=tuple(case_results),
        next_round=next_round,
        next_look=next_look,
        alpha_spent=float(sum(spending[: len(looks)])),
    )


def _block_reason(result: LookResult, plan: TopUpPlan) -> str:
    where = "first comparison" if result.look == 0 else f"top-up round {result.look}"
    parts = []
    if result.drops:
        parts.append(
            f"{len(result.drops)} case(s) dropped significantly (discrete Holm at "
            f"{result.case_level:.4g})"
        )
    if result.suite_rejected:
        parts.append(
            f"the suite's pass rate dropped (stratified p = {result.suite.p_value:.3g} "
            f"<= {result.suite_level:.4g})"
        )
    return f"{where}: " + "; ".join(parts)


def no_top_up(*, alpha: float = 0.05, suite_kind: str = "regression") -> TopUpPlan:
    """The plan of a gate that cannot add trials: look 0 only, with all of ``alpha``."""
    return TopUpPlan(alpha=alpha, round_sizes=(), suite_kind=suite_kind)


def worst_head(*, cases: Sequence[CaseLooks]) -> list[CaseLooks]:
    """Look 0 with the base as observed and every head trial failing (head graded as observed)."""
    return [
        CaseLooks(
            base_passed=(c.base_passed[0],),
            base_graded=(c.base_graded[0],),
            head_passed=(0,),
            head_graded=(c.head_graded[0],),
        )
        for c in cases
    ]


def block_attainable(*, cases: Sequence[CaseLooks], plan: TopUpPlan) -> bool:
    """Whether any head could make the design block here: the worst head, topped up with failing
    head trials and the base at its look-0 rate, until the design ends. False: a "pass"
    carries no information. At most ``len(plan.sizes) + 1`` decisions."""
    worst = worst_head(cases=cases)
    looks = [([(c.base_passed[0], c.base_graded[0])], [(0, c.head_graded[0])]) for c in worst]
    while True:
        decided = gate_decide(
            cases=[
                CaseLooks(
                    base_passed=tuple(p for p, _ in b),
                    base_graded=tuple(g for _, g in b),
                    head_passed=tuple(p for p, _ in h),
                    head_graded=tuple(g for _, g in h),
                )
                for b, h in looks
            ],
            plan=plan,
        )
        if decided.verdict != UNDECIDED:
            return decided.verdict == BLOCK
        for i, (mb, mh) in decided.next_round.items():
            b0, nb0 = looks[i][0][0]
            rate = b0 / nb0 if nb0 else 0.0
            looks[i][0].append((round(rate * mb), mb))
            looks[i][1].append((0, mh))


def trials_to_attain(*, cases: Sequence[CaseLooks], plan: TopUpPlan, max_trials: int) -> int | None:
    """The fewest trials per case a side N' in (N, ``max_trials``] with which the design (rounds
    scaled) could block, bases at their observed rates, heads failing; None when none would."""
    n = max(max(c.base_graded[0], c.head_graded[0]) for c in cases)
    rates = [c.base_passed[0] / c.base_graded[0] if c.base_graded[0] else 0.0 for c in cases]
    if not any(rates):
        return None
    for m in range(n + 1, max_trials + 1):
        sizes = tuple(max(1, round(s * m / plan.first_trials)) for s in plan.sizes)
        scaled = replace(plan, first_trials=m, round_sizes=sizes)
        trial = [
            CaseLooks(
                base_passed=(round(r * m),),
                base_graded=(m,),
                head_passed=(0,),
                head_graded=(m,),
            )
            for r in rates
        ]
        if block_attainable(cases=trial, plan=scaled):
            return m
    return None
