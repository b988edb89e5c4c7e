"""The regression gate's decision: block a change or let it through, from per-case counts.

Pure numpy. One entry point, ``gate_decide``, for the command, the page, the API, the
benchmark and adaptive runs. Its whole false-alarm rate (every rule that can block counted)
is at most ``plan.alpha`` when head and base are the same pipeline, for both suite kinds,
any number of cases, any trials per case and any per-case pass rates (pass rates of 1
included): see ``stats.sequential`` for the argument, ``stats/gate_simulations.md`` for the
design-time simulations and ``bench/bench_gate.py`` for the decision as users run it.

Procedure at each look r (look 0 = the runs as compared; rounds 1..R = top-ups):

1. The cases tested are the *active* ones: every case at look 0; at round r those the
   continuation rule kept (``stats.sequential``, step 2).
2. Per case, the one-sided exact p-value of "head lower" using every trial so far, exact
   given the case's total passes and the selection (Fisher's exact test at look 0).
3. Regression suites: the discrete Holm procedure over the active cases at
   ``case_share · alpha_r`` (``stats.discrete.discrete_holm``): cases with adjusted p <= that
   level are significant drops. Its exact size given the margins, ``ε_r``, is what it spent.
4. The stratified suite test (sum over active cases of base passes; at look 0 the exact
   one-sided case-stratified permutation test) at ``alpha_r − ε_r`` (capability suites: at
   ``alpha_r``, no per-case family: capability cases are expected to be flaky, and the
   question a capability suite asks is about the suite as a whole).
5. Block when step 3 finds a drop or step 4 rejects. Otherwise, if some case continues
   (a suspect, not futile, under the cap) and a round is left, the decision is
   "undecided": ``next_round`` says which cases need how many trials a side.

With ``alpha = 0.05`` and no top-up, look 0 has all of alpha: 0.025 offered to the cases,
the rest (0.05 minus what the cases really spent) to the suite test.
"""

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
    """One look's tests. ``look`` (0 = first comparison); ``alpha``: its budget alpha_r;
    ``active``: indices of the cases tested; ``p_values``: their selective p-values, shape
    (len(active),); ``adjusted``: discrete Holm adjusted p-values (None for capability
    suites); ``case_level``: the level the case family was tested at (0 for capability);
    ``case_size``: what it really spent (ε_r); ``suite``: the suite test; ``suite_level``:
    the level it was tested at; ``drops``: indices of cases significant at this look;
    ``suite_rejected``."""

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
    """One case's standing. ``status``: "drop" (significant drop), "suspect" (head worse,
    not significant: unresolved), "cleared" (was a suspect; more trials showed head no
    worse), "clean" (head never worse); ``look``: the last look it was tested at; ``p_value``
    / ``adjusted``: its p-values there (adjusted None for capability suites); ``base`` and
    ``head``: cumulative (passed, graded) at that look; ``active``: still to be topped up."""

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
    """``verdict``: "block", "pass" or "undecided" (a top-up round is due: run it and
    decide again); ``exit_code`` 1 for block, 0 otherwise (errored runs get the caller's
    own code before this is called); ``reason``: why, in a sentence; ``drops``: indices of
    significant cases; ``suite_p``: the suite test's p-value at look 0; ``looks``: per-look
    details; ``cases``: per case; ``next_round``: look number of the round due and, per case
    index, the trials a side it needs (base, head); empty unless undecided; ``alpha_spent``:
    Σ alpha_r over the looks run (the budget used, not the size)."""

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
    """Decide block / pass / undecided for a comparison (module docstring, steps 1–5).

    ``cases``: per case its counts per look (``CaseLooks``; one look when nothing was
    topped up), paired by position with the caller's case list; ``plan``: the design, fixed
    before the data (``TopUpPlan``; ``round_sizes=()`` for no top-up). A case's looks must
    match the plan's rule: a case has data at round r iff the rule kept it active (the
    function says so with a ValueError otherwise, so that a caller cannot test data the
    design did not select). Cost: about 2–3 ms for 100 cases of 5 + 5 trials once the
    per-count caches are warm (the first call of a process imports scipy.signal: ~0.15 s).
    Raises ValueError for no cases or looks inconsistent with the plan.
    Long by design: the numbered steps of the procedure share the per-look arrays; each is
    a few lines.
    """
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
    """The most damning head the design could meet on these cases: look 0 only, base as
    observed, every head trial failing (head graded as observed, so errored trials still
    count against what can be seen)."""
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
    """Whether any head could make the design block on these cases: the worst head
    (``worst_head``) is decided under ``plan``; while it is "undecided", each round the
    design asks for is added with the head failing every trial and the base passing at its
    observed look-0 rate (rounded), until the design ends. False means no outcome of the
    head reaches alpha: a "pass" on these cases would carry no information. At most
    ``len(plan.sizes) + 1`` calls of ``gate_decide``."""
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
    """The fewest trials per case a side, N' in (N, ``max_trials``] (N: the most graded on
    a side of any case at look 0), with which the same design (rounds scaled with N') could
    block on these cases: each case's base at its
    observed rate (``round(rate · N')`` passes), the head failing every trial. None when
    no N' up to ``max_trials`` would (for instance: the base passed nothing, so no head can
    do worse). Shape: ``cases`` as for ``gate_decide``; a plan's first N is
    ``plan.first_trials``."""
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
