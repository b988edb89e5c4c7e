"""Pairwise judging: a pair of trials shown to a pairwise judge version in both orders
(A first, then B first), each verdict stored in the original A/B naming, and the tally of
a head run against a base run case by case."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from core.errors import DomainError
from evals.models import Run, Trial, TrialPair
from judges import kinds
from judges.calling import calls_send
from judges.claims import (
    claim_renew_every_s,
    holder_new,
    judge_claims_release,
    judge_claims_renew,
    presentation_claims_take,
)
from judges.grading import (
    Checkpoint,
    JudgeCall,
    Sleep,
    Verdict,
    _build,
    call_answered,
    template_refusal,
    verdict_read,
)
from judges.ledger import CallNotes, CallOpened, judge_calls_close
from judges.models import Judge, JudgeVersion, PairwiseVerdict


@dataclass(frozen=True)
class PairOutcome:
    """``winner`` in the original naming: "A", "B", "tie" (the orders disagree) or None (a
    presentation errored)."""

    winner: str | None
    original: str | None
    swapped: str | None


def pair_outcome(rows: dict[str, PairwiseVerdict]) -> PairOutcome:
    """A pair's outcome from its stored presentations by position (``PairOutcome``)."""
    orig, swap = rows.get("original"), rows.get("swapped")
    a = orig.preferred if orig and orig.status == PairwiseVerdict.Status.OK else None
    b = swap.preferred if swap and swap.status == PairwiseVerdict.Status.OK else None
    if a is None or b is None:
        return PairOutcome(None, a, b)
    return PairOutcome(a if a == b else "tie", a, b)


def pair_judge(
    *, pair: TrialPair, judge_version: JudgeVersion, sleep: Sleep | None = None
) -> PairOutcome:
    """Judge one pair in both orders (``pairs_judge`` of a single pair)."""
    return pairs_judge(pairs=[pair], judge_version=judge_version, sleep=sleep)[pair.id]


def pairs_judge(
    *,
    pairs: list[TrialPair],
    judge_version: JudgeVersion,
    sleep: Sleep | None = None,
    checkpoint: Checkpoint | None = None,
    judge_run_id: int | None = None,
) -> dict[int, PairOutcome]:
    """Judge pairs as A/B ("original") then B/A ("swapped"), ``concurrency`` calls in flight.
    Each answer is mapped to a slot (``kinds.pairwise_slot``; none: an errored verdict), back to
    the original naming, and stored as a ``PairwiseVerdict``; a side wins only when both orders
    agree. Returns each pair's outcome by pair id.

    Idempotent as ``judges.grading.judge_grade_trials`` (claims per presentation, the ledger,
    ``checkpoint``). Raises ``DomainError`` for a version that is not pairwise."""
    if judge_version.judge.kind != Judge.Kind.PAIRWISE:
        raise DomainError("not a pairwise judge", field="judge_version")
    existing: dict[int, set[str]] = {p.id: set() for p in pairs}
    for pair_id, position in PairwiseVerdict.objects.filter(
        pair__in=pairs, judge_version=judge_version
    ).values_list("pair_id", "position"):
        existing[pair_id].add(position)
    refusal = template_refusal(judge_version)
    todo: list[tuple[TrialPair, str]] = [
        (pair, position)
        for pair in pairs
        for position in PairwiseVerdict.Position.values
        if position not in existing[pair.id]
    ]
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
                for pair, position in todo
            ],
            ignore_conflicts=True,
        )
        todo = []
    if todo:
        _presentations_judge(
            todo=todo,
            judge_version=judge_version,
            sleep=sleep,
            checkpoint=checkpoint,
            judge_run_id=judge_run_id,
        )
    stored: dict[int, dict[str, PairwiseVerdict]] = {p.id: {} for p in pairs}
    for v in PairwiseVerdict.objects.filter(pair__in=pairs, judge_version=judge_version):
        stored[v.pair_id][v.position] = v
    return {pair_id: pair_outcome(rows_) for pair_id, rows_ in stored.items()}


def _presentations_judge(
    *,
    todo: list[tuple[TrialPair, str]],
    judge_version: JudgeVersion,
    sleep: Sleep | None,
    checkpoint: Checkpoint | None,
    judge_run_id: int | None,
) -> None:
    """Claim, call and store the presentations ``todo`` (``pairs_judge``)."""
    holder = holder_new()
    held = presentation_claims_take(
        presentations=[(pair.id, position) for pair, position in todo],
        judge_version_id=judge_version.id,
        holder=holder,
        judge_run_id=judge_run_id,
    )
    todo = [(pair, position) for pair, position in todo if (pair.id, position) in held]
    try:
        texts = {p.id: (p.trial_a.output or "", p.trial_b.output or "") for p, _ in todo}
        calls = []
        for pair, position in todo:
            a_text, b_text = texts[pair.id]
            first, second = (a_text, b_text) if position == "original" else (b_text, a_text)
            material = kinds.Material(
                input=pair.case.input_text, response_a=first, response_b=second
            )
            calls.append(JudgeCall(built=_build(judge_version, material)))

        notes = CallNotes(judge_version=judge_version, judge_run_id=judge_run_id)

        def permit(indexes: list[int]) -> bool:
            if checkpoint is not None and not checkpoint():
                return False
            notes.permitted(
                CallOpened(
                    nonce=calls[i].built.prompt.nonce,
                    run_id=todo[i][0].trial_b.run_id,
                    pair_id=todo[i][0].id,
                    position=todo[i][1],
                )
                for i in indexes
            )
            return True

        def record(answers: list[tuple[int, JudgeCall]]) -> None:
            notes.flush()
            if not answers:
                return
            _verdicts_store(
                judge_version=judge_version,
                holder=holder,
                answered=[
                    (
                        todo[i][0],
                        todo[i][1],
                        call,
                        verdict_read(
                            version=judge_version, call=call, untrusted=list(texts[todo[i][0].id])
                        ),
                    )
                    for i, call in answers
                ],
            )

        calls_send(
            version=judge_version,
            calls=calls,
            record=record,
            permit=permit,
            sending=lambda indexes: notes.sent(calls[i].built.prompt.nonce for i in indexes),
            renew=lambda: judge_claims_renew(holder=holder),
            renew_every_s=claim_renew_every_s(),
            sleep=sleep,
        )
    finally:
        judge_claims_release(holder=holder)


def _verdicts_store(
    *,
    judge_version: JudgeVersion,
    holder,
    answered: list[tuple[TrialPair, str, JudgeCall, Verdict]],
) -> None:
    """Store answered presentations' verdicts, close their ledger rows (``lost`` when another
    call's verdict came first) and release their claims, in one transaction."""
    rows = []
    for pair, position, call, v in answered:
        slot = kinds.pairwise_slot(judge_version.params, v.preferred) if v.status == "ok" else None
        preferred = ""
        if slot:
            preferred = slot if position == "original" else {"A": "B", "B": "A"}[slot]
        if slot:
            reason = f"{position} order: the judge chose slot {slot}"
        elif v.status == "ok":
            reason = f"invalid_verdict: {v.preferred!r} names no slot"
        else:
            reason = v.reason
        rows.append(
            PairwiseVerdict(
                pair=pair,
                judge_version=judge_version,
                position=position,
                status=PairwiseVerdict.Status.OK if preferred else PairwiseVerdict.Status.ERROR,
                preferred=preferred,
                reason=reason,
                nonce=call.built.prompt.nonce,
            )
        )
    keys = [(pair.id, position) for pair, position, _, _ in answered]
    with transaction.atomic():
        PairwiseVerdict.objects.bulk_create(rows, ignore_conflicts=True)
        kept = {
            (pair_id, position): nonce
            for pair_id, position, nonce in PairwiseVerdict.objects.filter(
                pair_id__in=[p for p, _ in keys], judge_version=judge_version
            ).values_list("pair_id", "position", "nonce")
        }
        judge_calls_close(
            answers=[
                call_answered(
                    call, v, stored=kept.get((pair.id, position)) == call.built.prompt.nonce
                )
                for pair, position, call, v in answered
            ]
        )
        judge_claims_release(holder=holder, presentations=keys)


@dataclass(frozen=True)
class PairwiseTally:
    """Head against base over cases: wins, ties (order-inconsistent) and errors."""

    head_wins: int = 0
    base_wins: int = 0
    ties: int = 0
    errors: int = 0


def run_pairs_build(*, base: Run, head: Run) -> tuple[list[int], int]:
    """Pair attempt i of each case in ``base`` (A) with attempt i in ``head`` (B), both ok,
    creating missing ``TrialPair`` rows; a trial without such a counterpart is unpaired, never
    paired with another attempt.

    Returns ``(pair ids by case and attempt, unpaired ok trials of either run)``. Raises
    ``DomainError`` when the runs are one run or of different suites."""
    if base.id == head.id:
        raise DomainError("compare two different runs", field="head_run")
    if base.suite_id != head.suite_id:
        raise DomainError(
            f"run {head.name!r} is not of the suite of run {base.name!r}: "
            "a pairwise judge compares runs of one suite",
            field="head_run",
        )
    ok = Trial.Status.OK
    base_trials = {(t.case_id, t.attempt): t for t in base.trials.filter(status=ok)}
    head_trials = {(t.case_id, t.attempt): t for t in head.trials.filter(status=ok)}
    keys = sorted(base_trials.keys() & head_trials.keys())
    unpaired = len(base_trials.keys() ^ head_trials.keys())
    wanted = [(base_trials[k].id, head_trials[k].id) for k in keys]

    def stored() -> dict[tuple[int, int], int]:
        rows = TrialPair.objects.filter(
            trial_a_id__in=[a for a, _ in wanted], trial_b__run=head
        ).values_list("trial_a_id", "trial_b_id", "id")
        return {(a, b): pair_id for a, b, pair_id in rows}

    existing = stored()
    TrialPair.objects.bulk_create(
        [
            TrialPair(case_id=k[0], trial_a_id=a, trial_b_id=b)
            for k, (a, b) in zip(keys, wanted, strict=True)
            if (a, b) not in existing
        ],
        ignore_conflicts=True,
    )
    ids = stored()
    return [ids[w] for w in wanted], unpaired


def runs_pair_judge(
    *, base: Run, head: Run, judge_version: JudgeVersion, sleep: Sleep | None = None
) -> PairwiseTally:
    """Compare head against base in this process; the judge run
    (``judges.runs.pairwise_judge_run_start``) does the same in Celery tasks."""
    pair_ids, _ = run_pairs_build(base=base, head=head)
    pairs = list(
        TrialPair.objects.filter(id__in=pair_ids).select_related("case", "trial_a", "trial_b")
    )
    outcomes = pairs_judge(pairs=pairs, judge_version=judge_version, sleep=sleep)
    return pairwise_tally(outcomes.values())


def pairwise_tally(outcomes) -> PairwiseTally:
    """Count ``PairOutcome`` winners: B is the head, A the base."""
    counts = {"A": 0, "B": 0, "tie": 0, None: 0}
    for outcome in outcomes:
        counts[outcome.winner] += 1
    return PairwiseTally(
        head_wins=counts["B"], base_wins=counts["A"], ties=counts["tie"], errors=counts[None]
    )
