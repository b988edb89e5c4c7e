"""Reads of the judges app: position bias of pairwise judges, judge runs, judge costs.

Position bias (per judge version, over ``PairwiseVerdict`` rows):
- position consistency = pairs whose two ok presentations name the same response / pairs
  with both presentations ok (others counted in ``pairs_errored``);
- first-slot wins = ok presentations won by the response shown first / ok presentations;
  50% is no position bias.
Both are ``Fraction``-exact; an empty denominator gives None.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Count, Prefetch, Q

from core.errors import DomainError
from core.ids import uuid_parse
from evals.grading.rungs import Spend
from evals.models import Grade
from judges.ledger import spend_get
from judges.models import (
    Judge,
    JudgeApproval,
    JudgeCallRecord,
    JudgeRun,
    JudgeVersion,
    PairwiseVerdict,
    ProbeRun,
)
from judges.pairwise import PairwiseTally, pair_outcome, pairwise_tally


@dataclass(frozen=True)
class PositionBias:
    """One pairwise judge version's position figures (see the module docstring)."""

    judge_version_id: int
    label: str
    pairs_both: int
    pairs_consistent: int
    pairs_errored: int
    presentations: int
    first_slot_wins: int

    @property
    def consistency_rate(self) -> float | None:
        return self.pairs_consistent / self.pairs_both if self.pairs_both else None

    @property
    def first_slot_rate(self) -> float | None:
        return self.first_slot_wins / self.presentations if self.presentations else None


def position_bias_list(*, judge_version_ids: list[int] | None = None) -> list[PositionBias]:
    """Position figures per judge version with pairwise verdicts, by label; one query."""
    rows = PairwiseVerdict.objects.all()
    if judge_version_ids is not None:
        rows = rows.filter(judge_version_id__in=judge_version_ids)
    by_version: dict[int, dict[int, dict[str, str | None]]] = defaultdict(dict)
    labels: dict[int, str] = {}
    for version_id, name, number, pair_id, position, status, preferred in rows.values_list(
        "judge_version_id",
        "judge_version__judge__name",
        "judge_version__number",
        "pair_id",
        "position",
        "status",
        "preferred",
    ):
        labels[version_id] = f"{name} v{number}"
        ok = status == PairwiseVerdict.Status.OK and preferred in ("A", "B")
        by_version[version_id].setdefault(pair_id, {})[position] = preferred if ok else None
    out = []
    for version_id, pairs in by_version.items():
        both = consistent = errored = presentations = first = 0
        for verdicts in pairs.values():
            for position, slot in verdicts.items():
                if slot is None:
                    continue
                presentations += 1
                first += (position == "original" and slot == "A") or (
                    position == "swapped" and slot == "B"
                )
            orig, swap = verdicts.get("original"), verdicts.get("swapped")
            if orig is None or swap is None:
                errored += 1
                continue
            both += 1
            consistent += orig == swap
        out.append(
            PositionBias(
                version_id, labels[version_id], both, consistent, errored, presentations, first
            )
        )
    return sorted(out, key=lambda b: b.label)


@dataclass(frozen=True)
class JudgeCost:
    """Judge calls' cost on one version: ``known_usd`` (USD; None when no cost is known),
    ``unknown`` counting grades of unknown cost."""

    grades: int
    known_usd: Decimal | None
    unknown: int


def judge_cost_get(*, judge_version: JudgeVersion) -> JudgeCost:
    """Cost so far of ``judge_version``'s calls (USD, from ``details.cost_usd``; "not judged"
    grades made no call)."""
    values = [
        d.get("cost_usd") if isinstance(d, dict) else None
        for d in Grade.objects.filter(judge_version=judge_version)
        .exclude(status=Grade.Status.NOT_JUDGED)
        .values_list("details", flat=True)
        if not (isinstance(d, dict) and d.get("skipped"))
    ]
    known = [Decimal(str(v)) for v in values if v is not None]
    return JudgeCost(
        grades=len(values),
        known_usd=sum(known, Decimal(0)) if known else None,
        unknown=len(values) - len(known),
    )


def probe_spend_get(*, probe_run: ProbeRun) -> Spend | None:
    """A probe run's judge calls and cost from the ledger (None before its first call)."""
    return spend_get(records=JudgeCallRecord.objects.filter(probe_run=probe_run))


def judge_costs_get(*, judge_version_ids: list[int]) -> dict[int, JudgeCost]:
    """``judge_cost_get`` for many versions in one query."""
    values: dict[int, list] = {vid: [] for vid in judge_version_ids}
    rows = (
        Grade.objects.filter(judge_version_id__in=judge_version_ids)
        .exclude(status=Grade.Status.NOT_JUDGED)
        .values_list("judge_version_id", "details")
    )
    for vid, d in rows:
        if not (isinstance(d, dict) and d.get("skipped")):
            values[vid].append(d.get("cost_usd") if isinstance(d, dict) else None)
    out = {}
    for vid, costs in values.items():
        known = [Decimal(str(v)) for v in costs if v is not None]
        out[vid] = JudgeCost(
            grades=len(costs),
            known_usd=sum(known, Decimal(0)) if known else None,
            unknown=len(costs) - len(known),
        )
    return out


@dataclass(frozen=True)
class JudgeListRow:
    """A judge version on the judge list: active ``approval`` (None: not trusted), calibration
    ``sets``, ``cost``, and position ``bias`` (None unless pairwise with verdicts)."""

    version: JudgeVersion
    approval: JudgeApproval | None
    sets: list
    cost: JudgeCost
    bias: PositionBias | None


def judge_list_get() -> list[tuple[Judge, list[JudgeListRow]]]:
    """Every judge with its versions' rows, judges by name, versions by number, in a fixed number
    of queries."""
    judges = list(
        Judge.objects.prefetch_related(
            Prefetch("versions", queryset=JudgeVersion.objects.order_by("number")),
            "versions__calibration_sets",
        )
    )
    versions = [v for judge in judges for v in judge.versions.all()]
    active = {
        a.judge_version_id: a for a in JudgeApproval.objects.active().select_related("approved_by")
    }
    costs = judge_costs_get(judge_version_ids=[v.id for v in versions])
    bias = {b.judge_version_id: b for b in position_bias_list()}
    return [
        (
            judge,
            [
                JudgeListRow(
                    version=v,
                    approval=active.get(v.id),
                    sets=list(v.calibration_sets.all()),
                    cost=costs[v.id],
                    bias=bias.get(v.id),
                )
                for v in judge.versions.all()
            ],
        )
        for judge in judges
    ]


_VERSION_NAME = re.compile(r"^(?:judge:)?(?P<name>.+):v(?P<number>[1-9][0-9]{0,8})$")


def judge_version_resolve(*, ref: str, field: str = "judge") -> JudgeVersion:
    """The judge version named by ``ref``: its UUID; ``JUDGE:vN`` (or the grader key
    ``judge:JUDGE:vN``); or ``JUDGE``, its newest version. Names are exact.

    Raises ``DomainError(field=field)``: ``not_found`` when nothing matches; ``conflict`` when
    the text names two versions (a judge named ``a:v2`` and version 2 of ``a``)."""
    text = (ref or "").strip()
    hint = "give a judge version UUID, JUDGE:vN or a judge name"
    if not text:
        raise DomainError(f"expected a judge version: {hint}", field=field)
    versions = JudgeVersion.objects.select_related("judge")
    value = uuid_parse(text)
    if value is not None:
        version = versions.filter(uuid=value).first()
        if version is None:
            raise DomainError(f"no judge version with id {value}", field=field, code="not_found")
        return version
    found: dict[int, JudgeVersion] = {}
    match = _VERSION_NAME.match(text)
    if match:
        for name in {match["name"], text.removesuffix(f":v{match['number']}")}:
            for version in versions.filter(judge__name=name, number=int(match["number"])):
                found[version.id] = version
    newest = versions.filter(judge__name=text).order_by("-number").first()
    if newest is not None:
        found[newest.id] = newest
    if not found:
        raise DomainError(f"no judge version {text!r}: {hint}", field=field, code="not_found")
    if len(found) > 1:
        names = " and ".join(sorted(str(v) for v in found.values()))
        raise DomainError(
            f"{text!r} is ambiguous: it names {names}; give the judge version UUID",
            field=field,
            code="conflict",
        )
    return next(iter(found.values()))


def pairwise_tally_get(*, judge_run: JudgeRun) -> PairwiseTally:
    """A pairwise judge run's tally so far: head wins (B preferred in both orders), base wins,
    ties (the orders disagree), errors; pairs not yet judged in both orders are not counted."""
    rows: dict[int, dict[str, PairwiseVerdict]] = defaultdict(dict)
    for v in PairwiseVerdict.objects.filter(
        pair_id__in=judge_run.trial_ids, judge_version_id=judge_run.judge_version_id
    ).only("pair_id", "position", "status", "preferred"):
        rows[v.pair_id][v.position] = v
    return pairwise_tally(
        pair_outcome(seen) for seen in rows.values() if len(seen) == len(PairwiseVerdict.Position)
    )


@dataclass(frozen=True)
class PairwiseJudging:
    """The comparison page's pairwise section: startable pairwise versions and the judge runs on
    (head, base), newest first, with their tallies."""

    versions: list[JudgeVersion]
    judge_runs: list[tuple[JudgeRun, PairwiseTally]]


def pairwise_judging_get(*, base, head) -> PairwiseJudging:
    """``PairwiseJudging`` for head ``head`` against base ``base`` (``evals.Run``)."""
    versions = list(
        JudgeVersion.objects.filter(judge__kind=Judge.Kind.PAIRWISE)
        .select_related("judge")
        .with_trust()
    )
    judge_runs = JudgeRun.objects.filter(run=head, base_run=base).select_related(
        "judge_version__judge"
    )
    return PairwiseJudging(
        versions=versions,
        judge_runs=[(jr, pairwise_tally_get(judge_run=jr)) for jr in judge_runs],
    )


@dataclass(frozen=True)
class JudgeRunVerdicts:
    """A judge run's verdicts under its grader key (``passed``, ``failed``, ``errored``,
    ``not_judged``) and ``spend`` from the ledger (None when no call was recorded)."""

    passed: int
    failed: int
    errored: int
    not_judged: int
    spend: Spend | None

    @property
    def graded(self) -> int:
        """passed + failed: the denominator of the judge's pass rate."""
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float | None:
        """passed / graded; None when nothing was graded (errored and not judged left out)."""
        return self.passed / self.graded if self.graded else None


def judge_run_verdicts_get(*, judge_run: JudgeRun) -> JudgeRunVerdicts:
    """``JudgeRunVerdicts`` as they stand (partial while running); two queries."""
    ok, err, skipped = Grade.Status.OK, Grade.Status.ERROR, Grade.Status.NOT_JUDGED
    counts = Grade.objects.filter(
        trial_id__in=judge_run.trial_ids,
        grader=judge_run.grader,
        judge_version_id=judge_run.judge_version_id,
    ).aggregate(
        n_passed=Count("id", filter=Q(status=ok, passed=True)),
        n_failed=Count("id", filter=Q(status=ok, passed=False)),
        n_errored=Count("id", filter=Q(status=err)),
        n_not_judged=Count("id", filter=Q(status=skipped)),
    )
    return JudgeRunVerdicts(
        passed=counts["n_passed"],
        failed=counts["n_failed"],
        errored=counts["n_errored"],
        not_judged=counts["n_not_judged"],
        spend=spend_get(records=JudgeCallRecord.objects.filter(judge_run=judge_run)),
    )
