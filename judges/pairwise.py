"""Pairwise judging: a pair of trials shown to a pairwise judge version in both orders
(A first, then B first), each verdict stored in the original A/B naming, and the tally of
a head run against a base run case by case."""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import DomainError
from evals.models import Run, Trial, TrialPair
from judges import kinds
from judges.grading import JudgeCall, Sleep, _build, calls_run, template_refusal, verdict_read
from judges.models import Judge, JudgeVersion, PairwiseVerdict


@dataclass(frozen=True)
class PairOutcome:
    """A pair's judged outcome in the original naming: ``winner`` "A", "B", "tie" (the two
    orders disagree) or None (a presentation errored: no outcome, counted as an error)."""

    winner: str | None
    original: str | None
    swapped: str | None


def _pair_outcome(rows: dict[str, PairwiseVerdict]) -> PairOutcome:
    orig, swap = rows.get("original"), rows.get("swapped")
    a = orig.preferred if orig and orig.status == PairwiseVerdict.Status.OK else None
    b = swap.preferred if swap and swap.status == PairwiseVerdict.Status.OK else None
    if a is None or b is None:
        return PairOutcome(None, a, b)
    return PairOutcome(a if a == b else "tie", a, b)


def pair_judge(
    *, pair: TrialPair, judge_version: JudgeVersion, sleep: Sleep | None = None
) -> PairOutcome:
    """Judge a pair in both orders: A/B ("original"), then B/A ("swapped"), each answer mapped
    back to the original naming and stored as a ``PairwiseVerdict``; the pair counts for a
    side only when both orders agree, else it is a tie.

    Idempotent: presentations already stored are not called again (unique (pair, judge
    version, position)).
    """
    if judge_version.judge.kind != Judge.Kind.PAIRWISE:
        raise DomainError("not a pairwise judge", field="judge_version")
    existing = {v.position: v for v in pair.verdicts.filter(judge_version=judge_version)}
    case = pair.case
    a_text, b_text = pair.trial_a.output or "", pair.trial_b.output or ""
    orders = {"original": (a_text, b_text), "swapped": (b_text, a_text)}
    todo = [p for p in ("original", "swapped") if p not in existing]
    refusal = template_refusal(judge_version)
    if refusal:
        # A refused template is never sent: each presentation is an errored verdict saying why.
        PairwiseVerdict.objects.bulk_create(
            [
                PairwiseVerdict(
                    pair=pair,
                    judge_version=judge_version,
                    position=position,
                    status=PairwiseVerdict.Status.ERROR,
                    reason=refusal,
                )
                for position in todo
            ],
            ignore_conflicts=True,
        )
        todo = []
    calls = [
        JudgeCall(
            built=_build(
                judge_version,
                kinds.Material(
                    input=case.input_text, response_a=orders[p][0], response_b=orders[p][1]
                ),
            )
        )
        for p in todo
    ]
    rows = []
    replies = calls_run(version=judge_version, calls=calls, sleep=sleep)
    for position, call in zip(todo, replies, strict=True):
        v = verdict_read(version=judge_version, call=call, untrusted=[a_text, b_text])
        preferred = ""
        if v.status == "ok" and v.preferred:
            slot = v.preferred
            preferred = slot if position == "original" else {"A": "B", "B": "A"}[slot]
        rows.append(
            PairwiseVerdict(
                pair=pair,
                judge_version=judge_version,
                position=position,
                status=PairwiseVerdict.Status.OK if preferred else PairwiseVerdict.Status.ERROR,
                preferred=preferred,
                reason=(
                    f"{position} order: the judge chose slot {v.preferred}"
                    if preferred
                    else v.reason
                ),
            )
        )
    PairwiseVerdict.objects.bulk_create(rows, ignore_conflicts=True)
    stored = {v.position: v for v in pair.verdicts.filter(judge_version=judge_version)}
    return _pair_outcome(stored)


@dataclass(frozen=True)
class PairwiseTally:
    """Head against base over cases: wins, ties (order-inconsistent) and errors."""

    head_wins: int = 0
    base_wins: int = 0
    ties: int = 0
    errors: int = 0


def runs_pair_judge(
    *, base: Run, head: Run, judge_version: JudgeVersion, sleep: Sleep | None = None
) -> PairwiseTally:
    """Compare head against base case by case (attempt 1 of each, ok trials only): the base
    trial is A, the head trial is B, judged in both orders (``pair_judge``)."""
    base_trials = {t.case_id: t for t in base.trials.filter(attempt=1, status=Trial.Status.OK)}
    counts = {"A": 0, "B": 0, "tie": 0, None: 0}
    for head_trial in (
        head.trials.filter(attempt=1, status=Trial.Status.OK)
        .select_related("case")
        .order_by("case_id")
    ):
        base_trial = base_trials.get(head_trial.case_id)
        if base_trial is None:
            continue
        pair, _ = TrialPair.objects.get_or_create(
            trial_a=base_trial, trial_b=head_trial, defaults={"case": head_trial.case}
        )
        counts[pair_judge(pair=pair, judge_version=judge_version, sleep=sleep).winner] += 1
    return PairwiseTally(
        head_wins=counts["B"], base_wins=counts["A"], ties=counts["tie"], errors=counts[None]
    )
