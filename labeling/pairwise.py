"""Pairwise judge calibration: order-consistent verdicts against human preferences."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from judges.models import Judge, JudgeVersion, PairwiseVerdict
from labeling.figures import PairwiseCalibration, PositionFigures, Thresholds
from labeling.models import PreferenceLabel
from labeling.trust_rule import pairwise_trust_checks, trust_reasons, trust_thresholds
from stats.agreement import RateResult, cohens_kappa
from stats.intervals import wilson_interval

FIRST_SLOT = {PairwiseVerdict.Position.ORIGINAL: "A", PairwiseVerdict.Position.SWAPPED: "B"}


def _rate(numerator: int, denominator: int, empty_reason: str) -> RateResult:
    if denominator == 0:
        return RateResult(None, 0, 0, None, None, empty_reason)
    low, high = wilson_interval(numerator, denominator)
    return RateResult(numerator / denominator, numerator, denominator, low, high)


def is_pairwise(judge_version: JudgeVersion) -> bool:
    """Whether ``judge_version`` is calibrated as pairwise: its judge's kind, or its verdicts
    (imported judges are of kind "recorded"). At most one query.
    """
    return (
        judge_version.judge.kind == Judge.Kind.PAIRWISE or judge_version.pairwise_verdicts.exists()
    )


def pairwise_calibration_compute(*, judge_version: JudgeVersion, suite=None) -> PairwiseCalibration:
    """A pairwise judge version against human preferences on ``suite``'s pairs (or all).

    A pair's two presentations, in the original naming, answered and equal give a verdict;
    unequal, a tie (never a vote); errored or missing, a judge error. The reference: the
    pair's agreeing preferences (all ``tie``: left out). Queries: 2.
    """
    verdicts = PairwiseVerdict.objects.filter(judge_version=judge_version)
    if suite is not None:
        verdicts = verdicts.filter(pair__case__suite=suite)
    by_pair: dict[int, dict[str, str | None]] = defaultdict(dict)
    for v in verdicts.only("pair_id", "position", "status", "preferred"):
        ok = v.status == PairwiseVerdict.Status.OK and v.preferred in ("A", "B")
        by_pair[v.pair_id][v.position] = v.preferred if ok else None
    prefs: dict[int, set[str]] = defaultdict(set)
    first = ordered = 0
    for pair_id, preferred, swapped in PreferenceLabel.objects.filter(
        pair_id__in=list(by_pair)
    ).values_list("pair_id", "preferred", "shown_swapped"):
        prefs[pair_id].add(preferred)
        if swapped is not None and preferred in ("A", "B"):
            # ``preferred`` is in the pair's naming: the response shown as A was trial_b
            # when the pair was shown swapped.
            ordered += 1
            first += preferred == ("B" if swapped else "A")
    figures = pairwise_calibration_figures(
        by_pair=by_pair,
        prefs=prefs,
        th=trust_thresholds(suite=suite),
        judge_version_id=judge_version.id,
        judge_version_label=str(judge_version),
        suite_name=suite.name if suite is not None else None,
    )
    return replace(
        figures,
        suite_uuid=str(suite.uuid) if suite is not None else None,
        human_first_slot=_rate(
            first, ordered, "undefined (no human A/B preference with a recorded order)"
        ),
    )


def pairwise_calibration_figures(
    *,
    by_pair: dict,
    prefs: dict,
    th: Thresholds,
    judge_version_id: int = 0,
    judge_version_label: str = "",
    suite_name: str | None = None,
) -> PairwiseCalibration:
    """The figures from plain data (``bench/bench_trust.py``): ``by_pair``: pair id ->
    {"original", "swapped"}: "A"|"B"|None; ``prefs``: pair id -> set of human preferences.
    """
    first_slot = answered = 0
    for seen in by_pair.values():
        for position, preferred in seen.items():
            if preferred is not None:
                answered += 1
                first_slot += preferred == FIRST_SLOT[position]

    judge: list[str] = []
    human: list[str] = []
    consistent = inconsistent = errors = unresolved = human_ties = 0
    per_position: dict[str, tuple[list[str], list[str]]] = {
        p: ([], []) for p in PairwiseVerdict.Position.values
    }
    position_errors: dict[str, int] = defaultdict(int)
    for pair_id, seen in by_pair.items():
        ref = prefs.get(pair_id, set())
        human_tie = ref == {PreferenceLabel.Preferred.TIE}
        if len(ref) == 1 and not human_tie:
            h = next(iter(ref))
            for position in PairwiseVerdict.Position.values:
                if seen.get(position) is None:
                    position_errors[position] += 1
                else:
                    per_position[position][0].append(seen[position])
                    per_position[position][1].append(h)
        orig = seen.get(PairwiseVerdict.Position.ORIGINAL)
        swap = seen.get(PairwiseVerdict.Position.SWAPPED)
        if orig is None or swap is None:
            errors += 1
            continue
        if orig != swap:
            inconsistent += 1
            continue
        consistent += 1
        if len(ref) > 1:
            unresolved += 1
        elif human_tie:
            human_ties += 1
        elif ref:
            judge.append(orig)
            human.append(next(iter(ref)))
    agree = sum(1 for j, h in zip(judge, human, strict=True) if j == h)
    kappa = cohens_kappa(judge, human)
    position_consistency = _rate(
        consistent, consistent + inconsistent, "undefined (no pair answered in both orders)"
    )
    checks = pairwise_trust_checks(
        n=len(judge), kappa=kappa, position_consistency=position_consistency, th=th
    )
    by_position = []
    for position, (j, h) in per_position.items():
        hits = sum(1 for x, y in zip(j, h, strict=True) if x == y)
        by_position.append(
            PositionFigures(
                position,
                len(j),
                position_errors[position],
                hits / len(j) if j else None,
                cohens_kappa(j, h),
            )
        )
    return PairwiseCalibration(
        judge_version_id=judge_version_id,
        judge_version_label=judge_version_label,
        suite_name=suite_name,
        n_pairs=len(by_pair),
        n=len(judge),
        n_inconsistent=inconsistent,
        n_judge_errors=errors,
        n_unresolved=unresolved,
        agreement=agree / len(judge) if judge else None,
        agreement_numerator=agree,
        kappa=kappa,
        position_consistency=position_consistency,
        first_slot_preference=_rate(first_slot, answered, "undefined (no answered presentation)"),
        by_position=by_position,
        agreement_rate=_rate(agree, len(judge), "undefined (no order-consistent labeled pair)"),
        n_human_ties=human_ties,
        thresholds=th,
        trust_ok=all(c.ok for c in checks),
        trust_reasons=trust_reasons(checks, kappa=kappa),
        trust_checks=checks,
    )


def pairwise_calibration_judge_versions(*, suite=None) -> list[JudgeVersion]:
    """Judge versions with pairwise verdicts on a pair with a human preference (of ``suite``),
    by judge name and number. One query.
    """
    labeled = PreferenceLabel.objects.values("pair_id")
    verdicts = PairwiseVerdict.objects.filter(pair_id__in=labeled)
    if suite is not None:
        verdicts = verdicts.filter(pair__case__suite=suite)
    return list(
        JudgeVersion.objects.filter(id__in=verdicts.values("judge_version_id")).select_related(
            "judge"
        )
    )
