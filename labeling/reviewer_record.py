"""A reviewer's record (docs/labeling.md, "A reviewer's record"): how their labels of record
agree with the leads' decisions of record and with each other reviewer, how fast they label,
and how many items a day. Aggregated in SQL: a record takes 3 queries whatever the number of
labels (one more, the blind trials, for a reviewer reading their own).

Definitions:

- *agreement with adjudication*: over the trials they hold a label of record on that a lead
  adjudicated, the share whose verdict equals the newest ``Adjudication`` (the decision of
  record), with a Wilson 95% interval (``stats.intervals.wilson_interval``).
- *agreement with another reviewer*: over the trials both hold a label of record on, the
  share of equal verdicts (Wilson 95%) and Cohen's kappa with its 95% interval
  (``stats.agreement.cohens_kappa``: Fleiss, Cohen & Everitt's SE; undefined when every
  verdict is one class).
- *time per item*: the gap between two consecutive saves of theirs (``LabelRevision`` rows
  that are not undos, over every trial, in time order); a gap over ``SESSION_GAP_SECONDS``
  (10 minutes) is a break, not time on an item, and is left out. The first save of each
  session has no measured time. The median of the gaps, in seconds.
- *items per day*: labels of record by the UTC day they were first given (``Label.created_at``),
  with how many of those a lead adjudicated and how many agree with that decision.

Blindness: a lead reads every reviewer's record whole. A reviewer reads their own, without
the trials still blind for them (``evals.blindness.blind_for``: sets they have not finished),
since agreement figures over few items would tell them others' verdicts.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import date

from django.contrib.auth import get_user_model
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import TruncDate

from evals.blindness import NOT_BLIND, Blind, blind_for, sees_everything
from labeling.models import Adjudication, CalibrationSet, Label, LabelRevision
from stats.agreement import KappaResult, RateResult, cohens_kappa
from stats.intervals import wilson_interval

SESSION_GAP_SECONDS = 600


@dataclass(frozen=True)
class PairAgreement:
    """Agreement of the reviewer with ``other`` (a username) on ``n`` trials both labeled."""

    other: str
    n: int
    agreement: RateResult
    kappa: KappaResult


@dataclass(frozen=True)
class DayCount:
    """Labels of record first given on ``day`` (UTC); ``adjudicated`` of them decided by a
    lead, ``agreeing`` with that decision."""

    day: date
    labeled: int
    adjudicated: int
    agreeing: int


@dataclass(frozen=True)
class ReviewerRecord:
    """One reviewer's record (the module's definitions): ``median_seconds`` None when no gap
    was measured, ``n_timed`` the gaps behind it; ``days`` oldest first."""

    username: str
    labeled: int
    adjudication: RateResult
    pairs: list[PairAgreement]
    median_seconds: float | None
    n_timed: int
    days: list[DayCount]


def rate(numerator: int, denominator: int, reason: str) -> RateResult:
    """``numerator / denominator`` with its Wilson 95% interval; None (``reason``) at 0."""
    if denominator == 0:
        return RateResult(None, 0, 0, None, None, reason)
    low, high = wilson_interval(numerator, denominator)
    return RateResult(numerator / denominator, numerator, denominator, low, high)


def _scoped(qs: QuerySet, calibration_set: CalibrationSet | None, blind: Blind) -> QuerySet:
    """``qs`` (rows with a ``trial``) within the set, without the viewer's blind trials."""
    if calibration_set is not None:
        qs = qs.filter(trial__calibration_items__calibration_set=calibration_set)
    return qs.exclude(blind.trials_q("trial__")) if blind else qs


def _decided() -> Subquery:
    newest = Adjudication.objects.filter(trial_id=OuterRef("trial_id")).order_by("-version")
    return Subquery(newest.values("verdict")[:1])


def _days(labels: QuerySet[Label]) -> list[DayCount]:
    rows = (
        labels.annotate(decided=_decided(), day=TruncDate("created_at"))
        .order_by()
        .values("day")
        .annotate(
            labeled=Count("id"),
            adjudicated=Count("id", filter=Q(decided__isnull=False)),
            agreeing=Count("id", filter=Q(decided=F("verdict"))),
        )
        .order_by("day")
    )
    return [DayCount(r["day"], r["labeled"], r["adjudicated"], r["agreeing"]) for r in rows]


def _pairs(labels: QuerySet[Label], reviewer) -> list[PairAgreement]:
    mine = Label.objects.filter(trial_id=OuterRef("trial_id"), reviewer=reviewer)
    trial_ids = labels.values("trial_id")
    rows = (
        Label.objects.filter(trial_id__in=trial_ids, reviewer__isnull=False)
        .exclude(reviewer=reviewer)
        .annotate(mine=Subquery(mine.values("verdict")[:1]))
        .order_by()
        .values("reviewer__username", "verdict", "mine")
        .annotate(n=Count("id"))
    )
    tables: dict[str, list[tuple[str, str, int]]] = {}
    for r in rows:
        tables.setdefault(r["reviewer__username"], []).append((r["mine"], r["verdict"], r["n"]))
    pairs = []
    for other, cells in sorted(tables.items()):
        a = [m for m, _, n in cells for _ in range(n)]
        b = [o for _, o, n in cells for _ in range(n)]
        agree = sum(n for m, o, n in cells if m == o)
        pairs.append(
            PairAgreement(
                other=other,
                n=len(a),
                agreement=rate(agree, len(a), "no trial labeled by both"),
                kappa=cohens_kappa(a, b),
            )
        )
    return pairs


def _gaps(saves: QuerySet[LabelRevision]) -> list[float]:
    times = list(saves.order_by("created_at", "id").values_list("created_at", flat=True))
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    return [g for g in gaps if g <= SESSION_GAP_SECONDS]


def reviewer_record_get(
    *, reviewer, viewer, calibration_set: CalibrationSet | None = None
) -> ReviewerRecord:
    """``reviewer``'s record as ``viewer`` may read it (the caller checks that ``viewer`` is
    a lead or ``reviewer`` themselves), over every label or those of ``calibration_set``."""
    blind = NOT_BLIND if sees_everything(viewer) else blind_for(viewer)
    labels = _scoped(Label.objects.filter(reviewer=reviewer), calibration_set, blind)
    days = _days(labels)
    saves = LabelRevision.objects.filter(reviewer=reviewer, undoes__isnull=True)
    gaps = _gaps(_scoped(saves, calibration_set, blind))
    adjudicated = sum(d.adjudicated for d in days)
    return ReviewerRecord(
        username=reviewer.get_username(),
        labeled=sum(d.labeled for d in days),
        adjudication=rate(
            sum(d.agreeing for d in days), adjudicated, "no label of theirs was adjudicated"
        ),
        pairs=_pairs(labels, reviewer),
        median_seconds=statistics.median(gaps) if gaps else None,
        n_timed=len(gaps),
        days=days,
    )


def reviewers_get() -> list[tuple[str, int]]:
    """``(username, labels of record)`` of every user holding a label, by username (1 query)."""
    rows = (
        get_user_model()
        .objects.annotate(n=Count("labels"))
        .filter(n__gt=0)
        .order_by("username")
        .values_list("username", "n")
    )
    return list(rows)
