"""The CI gate as one plain function: load head and base, compare them, decide.

``manage.py gate`` and ``POST /api/gate`` both call ``gate_evaluate``, so the command's
exit code and the API's ``decision.exit_code`` cannot differ for the same runs. Parsing
references and file paths stays with the callers; this module takes runs (``Run`` rows) or
``RunData`` (read from an ``export_run`` file) and raises ``DomainError`` on bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.errors import DomainError, value_shown
from evals.baselines import baseline_current
from evals.comparison.compute import Comparison, comparison_compute
from evals.comparison.notes import decision_notes, interval_notes
from evals.comparison.pvalue import pvalue_format, pvalue_phrase
from evals.comparison.run_data import (
    RunData,
    run_data_get,
)
from evals.comparison.summary import detectable_drop_get
from evals.runner.replay import run_replay_refusal
from evals.runner.start import MAX_TRIALS_PER_CASE
from stats.gate import (
    BLOCK,
    UNDECIDED,
    block_attainable,
    no_top_up,
    trials_to_attain,
    worst_head,
)
from stats.gate import gate_decide as stats_gate_decide
from stats.sequential import CaseLooks, TopUpPlan, drop_missable, trials_to_settle


def _data(side: Any) -> RunData:
    return side if isinstance(side, RunData) else run_data_get(run=side)


# The supported test level, one rule for manage.py gate, POST /api/gate and GET
# /api/comparisons/: below 1e-6 the interval's confidence 1 - alpha rounds towards 1.0 in
# floating point (1 - 1e-20 == 1.0) and the intervals cannot honour it; above 0.5 a
# "two-sided test" would flag noise more often than not.
ALPHA_MIN = 1e-6
ALPHA_MAX = 0.5


def alpha_check(alpha: Any, *, option: str = "alpha") -> float:
    """``alpha`` as a float when 1e-6 <= alpha <= 0.5 (NaN and infinities refused); else
    ``DomainError`` (field ``alpha``) naming ``option`` (``--alpha`` or ``alpha``) and the value."""
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, int | float)
        or not (ALPHA_MIN <= alpha <= ALPHA_MAX)
    ):
        raise DomainError(
            detail=(
                f"{option} must be a number from {ALPHA_MIN:g} to {ALPHA_MAX:g}, "
                f"got {value_shown(alpha)}"
            ),
            field="alpha",
        )
    return float(alpha)


def gate_options_check(*, alpha: float, max_errored_fraction: float) -> None:
    """Raise ``DomainError`` unless ``alpha`` passes ``alpha_check`` (1e-6 .. 0.5) and
    0 <= ``max_errored_fraction`` <= 1 (both finite numbers: NaN fails both comparisons)."""
    alpha_check(alpha, option="--alpha")
    if not 0 <= max_errored_fraction <= 1:
        raise DomainError(
            detail="--max-errored-fraction must be in [0, 1]", field="max_errored_fraction"
        )


def gate_evaluate(
    *,
    head: Any,
    base: Any = None,
    alpha: float = 0.05,
    max_errored_fraction: float = 0.0,
    allow_untrusted: bool = False,
    allow_incomparable: bool = False,
    plan: TopUpPlan | None = None,
) -> tuple[Comparison, GateDecision]:
    """Compare ``head`` with ``base`` (a ``Run`` or a ``RunData`` each; ``base`` None: the head
    suite's baseline) and decide (``gate_decide``). Returns ``(comparison, decision)``. Raises
    ``DomainError`` for an alpha or fraction out of range, a file head without a base, or a
    suite without a baseline."""
    gate_options_check(alpha=alpha, max_errored_fraction=max_errored_fraction)
    if base is None:
        if isinstance(head, RunData):
            raise DomainError(detail="--base is required when --head is a file", field="base")
        baseline = baseline_current(suite=head.suite)
        if baseline is None:
            raise DomainError(
                detail=f"suite {head.suite.name!r} has no baseline: give --base", field="base"
            )
        base = baseline.run
    head_data, base_data = _data(head), _data(base)
    base_run = None if isinstance(base, RunData) else base
    detectable = (
        detectable_drop_get(run=base_run, alpha=alpha, data=base_data)
        if base_run is not None
        else None
    )
    comparison = comparison_compute(
        base=base_data,
        head=head_data,
        alpha=alpha,
        detectable=detectable,
        with_power=base_run is None,
    )
    if plan is None:
        plan = comparison_plan(base=base, head=head, alpha=alpha)[0]
    decision = gate_decide(
        comparison,
        alpha=alpha,
        max_errored_fraction=max_errored_fraction,
        allow_untrusted=allow_untrusted,
        allow_incomparable=allow_incomparable,
        plan=plan,
    )
    return comparison, decision


def comparison_plan(*, base: Any, head: Any, alpha: float) -> tuple[TopUpPlan, str | None]:
    """The design a comparison is decided under, and why it cannot be topped up (None when
    it can): a top-up plan when both runs can be replayed here (half of alpha held back for
    settling suspects with more trials), else all of alpha at the first look."""
    reason: str | None
    if isinstance(head, RunData) or isinstance(base, RunData):
        kind = head.suite_kind if isinstance(head, RunData) else head.suite.kind
        n = head.trials_per_case
        reason = "a run read from a file cannot be replayed"
        return gate_plan(alpha=alpha, trials_per_case=n, suite_kind=kind, top_up=False), reason
    reason = run_replay_refusal(run=head) or run_replay_refusal(run=base)
    plan = gate_plan(
        alpha=alpha,
        trials_per_case=head.trials_per_case,
        suite_kind=head.suite.kind,
        top_up=reason is None,
    )
    return plan, reason


@dataclass(frozen=True)
class CaseVerdict:
    """One case as the decision sees it: cumulative counts a side, ``status`` "drop" (blocks),
    "suspect" (worse, not significantly), "cleared" or "clean"; ``p_value`` (one-sided exact, at
    its last look) and ``adjusted`` (discrete Holm; None for capability suites);
    ``settle_trials``: trials a side a new run needs to detect its drop with 80% power (no
    top-up design only); ``missable``: for a suspect at its last look, the smallest pass-rate
    drop (0..1) that look detected with 80% power (None when not even a drop to 0)."""

    key: str
    base_passed: int
    base_graded: int
    head_passed: int
    head_graded: int
    status: str
    p_value: float
    adjusted: float | None
    look: int
    settle_trials: int | None = None
    missable: float | None = None

    @property
    def look_name(self) -> str:
        """ "the first look" or "top-up round r": where its p-value was taken."""
        return look_name(self.look)


def look_name(look: int) -> str:
    """ "the first look" (look 0) or "top-up round r"."""
    return "the first look" if look == 0 else f"top-up round {look}"


# The gate's exit code per verdict, the one mapping: ``manage.py gate`` exits with it,
# ``POST /api/gate`` returns it as ``decision.exit_code`` and ``assay-gate`` exits with that.
EXIT_CODES = {"pass": 0, "undecided": 0, "block": 1, "cannot decide": 2, "cannot decide yet": 2}
# Verdicts a top-up round follows (``next_round`` says which cases need how many trials).
TOP_UP_VERDICTS = ("undecided", "cannot decide yet")


def gate_exit_code(verdict: str) -> int:
    """The exit code of a gate ``verdict``: 0 "pass" or "undecided", 1 "block", 2 "cannot
    decide" or "cannot decide yet"; a ``KeyError`` for any other word."""
    return EXIT_CODES[verdict]


@dataclass(frozen=True)
class GateDecision:
    """The gate's decision: ``verdict`` "pass", "block", "undecided" (suspects a top-up round
    could settle; exit 0), "cannot decide yet" (the first look could not block any head; exit 2
    until a top-up settles it) or "cannot decide"; ``exit_code`` follows from it
    (``gate_exit_code``). ``sentence`` matches the figures; ``drops`` and ``suspects`` are
    ``CaseVerdict``; ``suite_p``: the stratified one-sided p at look 0; ``plan``: the design;
    ``next_round``: case key -> (base, head) trials the next round adds; ``notes``."""

    exit_code: int = field(init=False)
    title: str
    reasons: list[str]
    verdict: str = "pass"
    sentence: str = ""
    drops: list[CaseVerdict] = field(default_factory=list)
    suspects: list[CaseVerdict] = field(default_factory=list)
    suite_p: float | None = None
    plan: dict = field(default_factory=dict)
    next_round: dict[str, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        object.__setattr__(self, "exit_code", gate_exit_code(self.verdict))


SETTLE_POWER = 0.8


def gate_plan(
    *,
    alpha: float,
    trials_per_case: int,
    suite_kind: str,
    top_up: bool,
    base_replayed: bool = True,
    max_trials_per_case: int | None = None,
) -> TopUpPlan:
    """The design, fixed before any outcome: with ``top_up`` (both runs replayable, or the head
    alone) look 0 gets ``alpha_first`` and rounds of N then 2N trials a side the rest
    (``stats.sequential.TopUpPlan``), only whole rounds under ``max_trials_per_case``; without,
    look 0 has all of alpha. Raises ``DomainError`` for a cap below N."""
    n = max(1, int(trials_per_case))
    if not top_up:
        return no_top_up(alpha=alpha, suite_kind=suite_kind)
    sizes = [n, 2 * n]
    if max_trials_per_case is not None:
        if max_trials_per_case < n:
            raise DomainError(
                f"at least the first {n} trials per case, got {max_trials_per_case}",
                field="max_trials_per_case",
            )
        while sizes and n + sum(sizes) > max_trials_per_case:
            sizes.pop()
    if not sizes:
        return no_top_up(alpha=alpha, suite_kind=suite_kind)
    return TopUpPlan(
        alpha=alpha,
        first_trials=n,
        round_sizes=tuple(sizes),
        base_replayed=base_replayed,
        alpha_first=alpha / 2,
        suite_kind=suite_kind,
    )


def plan_json(plan: TopUpPlan) -> dict:
    """The design as data (the decision's JSON and ``TopUp.plan``)."""
    spending = plan.spending()
    return {
        "top_up": bool(plan.sizes),
        "alpha": plan.alpha,
        "alpha_first_look": spending[0],
        "rounds": list(plan.sizes),
        "alpha_per_round": list(spending[1:]),
        "cap_trials_per_case": plan.cap,
        "base_replayed": plan.base_replayed,
        "suite_kind": plan.suite_kind,
        "first_trials": plan.first_trials,
    }


def _ratio(passed: int, graded: int) -> str:
    return f"{passed}/{graded}"


def gate_decide(
    comparison: Comparison,
    *,
    alpha: float = 0.05,
    max_errored_fraction: float = 0.0,
    allow_untrusted: bool = False,
    allow_incomparable: bool = False,
    plan: TopUpPlan | None = None,
) -> GateDecision:
    """The CI gate's decision on a comparison.

    2 (cannot decide) when the runs are not comparable (unless ``allow_incomparable``), no
    shared case has a verdict on both sides, errored trials on a side exceed
    ``max_errored_fraction`` (default 0), gating grades come from an untrusted judge version
    (unless ``allow_untrusted``), or no head could be blocked under ``plan``
    (``stats.gate.block_attainable``; the sentence names the trials that would make it possible).

    Otherwise ``stats.gate.gate_decide`` on the shared graded cases: 1 when a case dropped
    significantly (one-sided exact test, discrete Holm) or the suite did (stratified test);
    false-alarm rate at most alpha (docs/statistics.md). A "broken" case never blocks by itself.
    Suspects are named with the trials that would settle them. Long: every reason and sentence
    of the decision is built here, so they cannot disagree with its figures."""
    cannot = []
    if comparison.problems and not allow_incomparable:
        cannot += comparison.problems
    h = comparison.headline
    if h is None:
        cannot.append("no overlapping cases with verdicts on both sides: nothing to compare")
    for side, counts in (("base", comparison.base_counts), ("head", comparison.head_counts)):
        if counts.errored and counts.errored_fraction > max_errored_fraction:
            cannot.append(
                f"{side} has {counts.errored} errored trial(s) of {counts.trials} "
                f"({counts.pipeline_errored} pipeline, {counts.grade_errored} with an errored "
                f"gating grade), over the allowed {max_errored_fraction:.1%}"
            )
        if counts.provisional and not allow_untrusted:
            cannot.append(
                f"{side} has {counts.provisional} provisional gating grade(s) from a judge "
                "version that is not trusted (use --allow-untrusted to gate on them)"
            )
    notes = decision_notes(comparison)
    if cannot:
        sentence = "Cannot decide: " + cannot[0] + "."
        return GateDecision("cannot decide", cannot, "cannot decide", sentence, notes=notes)
    if plan is None:
        plan = no_top_up(alpha=alpha, suite_kind=comparison.suite_kind)
    rows = [r for r in comparison.cases if r.base_graded and r.head_graded]
    cases = [_looks(r) for r in rows]
    decided = stats_gate_decide(cases=cases, plan=plan)
    verdicts = [_case_verdict(r, c, plan) for r, c in zip(rows, decided.cases, strict=True)]
    drops = [v for v in verdicts if v.status == "drop"]
    suspects = [v for v in verdicts if v.status == "suspect"]
    if decided.verdict != BLOCK and not block_attainable(cases=cases, plan=plan):
        sentence = _unattainable_sentence(cases, plan, alpha)
        return GateDecision(
            "cannot decide",
            [sentence[0].lower() + sentence[1:]],
            "cannot decide",
            sentence,
            suspects=suspects,
            suite_p=decided.suite_p,
            plan=plan_json(plan),
            notes=notes,
        )
    last = decided.looks[-1]
    suite = _suite_phrase(last, alpha)
    if decided.verdict == BLOCK:
        verdict, title = "block", "regression"
        if drops:
            d = min(drops, key=lambda v: v.adjusted if v.adjusted is not None else v.p_value)
            more = f" and {len(drops) - 1} more case(s)" if len(drops) > 1 else ""
            sentence = (
                f"Blocked: case {d.key} dropped from {_ratio(d.base_passed, d.base_graded)} "
                f"to {_ratio(d.head_passed, d.head_graded)} (one-sided, Holm-adjusted "
                f"{pvalue_phrase(pvalue_format(d.adjusted or d.p_value, alpha))} at "
                f"{d.look_name}){more}; {suite}."
            )
        else:
            sentence = (
                "Blocked: the suite as a whole dropped beyond the pipeline's own randomness "
                f"({_p_phrase(last.suite.p_value, alpha, last.look)}); no single case did "
                "significantly."
            )
    elif (
        decided.verdict == UNDECIDED
        and len(decided.looks) == 1
        and not _first_look_could_block(cases, plan)
    ):
        # Only the design's rounds could block here: without them a pass says nothing.
        verdict, title = "cannot decide yet", "cannot decide without a top-up"
        need = trials_to_attain(
            cases=cases,
            plan=no_top_up(alpha=alpha, suite_kind=plan.suite_kind),
            max_trials=MAX_TRIALS_PER_CASE,
        )
        fresh = f" (or a new run of about {need} trials per case a side)" if need else ""
        sentence = (
            f"Cannot decide yet: at the first look no head could be blocked on these "
            f"{len(cases)} case(s) — even every head trial failing stays within noise at that "
            f"look's level — and {len(suspects)} suspect case(s) "
            f"({', '.join(v.key for v in suspects[:5])}{'…' if len(suspects) > 5 else ''}) "
            f"did worse in head; gate --top-up adds trials to them and can settle it{fresh}; "
            f"{suite}."
        )
    elif decided.verdict == UNDECIDED:
        verdict, title = "undecided", "no measurable regression yet"
        sentence = (
            f"No measurable regression yet: {len(suspects)} suspect case(s) "
            f"({', '.join(v.key for v in suspects[:5])}"
            f"{'…' if len(suspects) > 5 else ''}) did worse in head, within noise so far; "
            "more trials would settle them; "
            f"{suite}."
        )
    else:
        verdict, title = "pass", "no significant regression"
        if suspects:
            sentence = (
                f"No measurable regression{_final_look(plan, last.look)}: {len(suspects)} "
                "case(s) did worse in head within the pipeline's own randomness "
                f"({', '.join(v.key for v in suspects[:5])}"
                f"{'…' if len(suspects) > 5 else ''}){_missable_phrase(suspects)}; {suite}."
            )
        else:
            sentence = f"No measurable regression: no case did worse in head; {suite}."
    reasons = [sentence[0].lower() + sentence[1:]]
    notes += interval_notes(comparison, blocked=decided.verdict == BLOCK)
    next_round = {rows[i].key: counts for i, counts in sorted(decided.next_round.items())}
    return GateDecision(
        title=title,
        reasons=reasons,
        verdict=verdict,
        sentence=sentence,
        drops=drops,
        suspects=suspects,
        suite_p=decided.suite_p,
        plan=plan_json(plan),
        next_round=next_round,
        notes=notes,
    )


def _unattainable_sentence(cases: list[CaseLooks], plan: TopUpPlan, alpha: float) -> str:
    """Why no head could have been blocked, and what would change that."""
    shape = f"{len(cases)} case(s) × {max(max(c.base_graded[0], c.head_graded[0]) for c in cases)}"
    if not any(c.base_passed[0] for c in cases):
        return (
            f"Cannot decide: the base passed no trial of these {shape} trial(s), so no head "
            "could do measurably worse; this gate cannot see a regression here."
        )
    need = trials_to_attain(cases=cases, plan=plan, max_trials=MAX_TRIALS_PER_CASE)
    settle = (
        f"about {need} trials per case a side would make a block possible"
        if need is not None
        else f"not even {MAX_TRIALS_PER_CASE} trials per case a side would make a block "
        "possible with these cases: add cases"
    )
    return (
        f"Cannot decide: with {shape} trial(s) no head could be blocked — even every head "
        "trial failing would stay within the pipeline's own randomness at alpha "
        f"{alpha:g} — so a pass here would say nothing; {settle}."
    )


def _looks(row) -> CaseLooks:
    n = max(len(row.base_looks), len(row.head_looks))
    base = list(row.base_looks) + [(0, 0)] * (n - len(row.base_looks))
    head = list(row.head_looks) + [(0, 0)] * (n - len(row.head_looks))
    return CaseLooks(
        base_passed=tuple(p for p, _ in base),
        base_graded=tuple(g for _, g in base),
        head_passed=tuple(p for p, _ in head),
        head_graded=tuple(g for _, g in head),
    )


def _case_verdict(row, decided, plan: TopUpPlan) -> CaseVerdict:
    (b, nb), (hp, nh) = decided.base, decided.head
    settle = missable = None
    if decided.status == "suspect" and not decided.active:
        # Its design's last look is taken: say what that look could miss; a design without
        # top-up also says what a new run would need.
        missable = drop_missable(
            base_rate=b / nb,
            trials=min(nb, nh),
            level=plan.share(decided.look) * plan.spending()[decided.look],
            power=SETTLE_POWER,
        )
        if not plan.sizes:
            estimate = trials_to_settle(
                base_passed=b,
                base_graded=nb,
                head_passed=hp,
                head_graded=nh,
                level=0.8 * plan.alpha / 2,
                power=SETTLE_POWER,
            )
            settle = estimate.trials
    return CaseVerdict(
        key=row.key,
        base_passed=b,
        base_graded=nb,
        head_passed=hp,
        head_graded=nh,
        status=decided.status,
        p_value=float(decided.p_value),
        adjusted=None if decided.adjusted is None else float(decided.adjusted),
        look=decided.look,
        settle_trials=settle,
        missable=missable,
    )


def _p_phrase(p: float, alpha: float, look: int) -> str:
    return f"one-sided {pvalue_phrase(pvalue_format(p, alpha))} at {look_name(look)}"


def _suite_phrase(look, alpha: float) -> str:
    """The suite test of the decision's last look (``stats.gate.LookResult``): over every
    case at the first look, over the topped-up cases in a round."""
    p = look.suite.p_value
    if look.look == 0:
        moved = "moved within noise" if not look.suite_rejected else "dropped"
        return f"the suite as a whole {moved} ({_p_phrase(p, alpha, 0)})"
    moved = "within noise" if not look.suite_rejected else "a drop"
    return (
        f"the {len(look.active)} topped-up case(s) together: {moved} "
        f"({_p_phrase(p, alpha, look.look)})"
    )


def _final_look(plan: TopUpPlan, look: int) -> str:
    if not plan.sizes:
        return ""
    if look == len(plan.sizes):
        return f" at the design's last look ({look_name(look)}: no trial can be added)"
    return (
        f" at {look_name(look)} (the design's rounds could not change it: no suspect could "
        "reach its level within the cap)"
    )


def _first_look_could_block(cases: list[CaseLooks], plan: TopUpPlan) -> bool:
    """Whether the worst head (``stats.gate.worst_head``) blocks at the first look itself,
    without the design's rounds: when it cannot, an "undecided" first look says nothing
    until a top-up has run."""
    return stats_gate_decide(cases=worst_head(cases=cases), plan=plan).verdict == BLOCK


def _missable_phrase(suspects: list[CaseVerdict]) -> str:
    """What the last look could miss in the suspects: drops below their largest
    ``missable`` (80% power), or that no drop was detectable in some."""
    blind = [v.key for v in suspects if v.missable is None]
    seen = [v.missable for v in suspects if v.missable is not None]
    parts = []
    if seen:
        parts.append(
            f"a drop smaller than about {100 * max(seen):.0f} points in such a case could "
            "have been missed (80% power)"
        )
    if blind:
        parts.append(f"no drop in {', '.join(blind[:5])} was detectable with 80% power")
    return "; " + "; ".join(parts) if parts else ""
