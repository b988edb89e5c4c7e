"""The lead's adjudication queue: trials where human reviewers disagree.

A trial is *disagreeing* when it has two or more current labels with different verdicts
(the same rule as ``reference_labels``' "unresolved" and ``human_agreement``'s
``n_disagreeing``). The lead's newest ``Adjudication`` becomes the reference label.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.db import transaction

from core.errors import DomainError
from core.roles import LEAD, role_require
from evals.models import Trial
from labeling.models import Adjudication, CalibrationSet, Label
from labeling.services import verdict_check


@dataclass(frozen=True)
class ReviewerVerdict:
    """One reviewer's current label: ``reviewer`` (username, or the importer's name),
    ``verdict`` "pass"/"fail", ``critique`` (untrusted text, escaped when shown)."""

    reviewer: str
    verdict: str
    critique: str


@dataclass(frozen=True)
class HumanDisagreement:
    """A disagreeing trial with its labels (oldest first) and the lead's newest decision
    (``decision`` None while unresolved)."""

    trial: Trial
    labels: list[ReviewerVerdict]
    decision: Adjudication | None

    @property
    def n_pass(self) -> int:
        return sum(1 for lab in self.labels if lab.verdict == Label.Verdict.PASS)

    @property
    def n_fail(self) -> int:
        return len(self.labels) - self.n_pass


def human_disagreements(
    *, calibration_set: CalibrationSet | None = None, suite=None
) -> list[HumanDisagreement]:
    """Disagreeing trials in ``calibration_set`` (else in ``suite``, else everywhere),
    unresolved first, then by case key and attempt.

    Queries: 3 whatever the number of trials (labels with reviewers, the disagreeing
    trials with their case and run, their adjudications).
    """
    labels = Label.objects.select_related("reviewer").order_by("trial_id", "created_at", "id")
    if calibration_set is not None:
        labels = labels.filter(trial__calibration_items__calibration_set=calibration_set)
    elif suite is not None:
        labels = labels.filter(trial__run__suite=suite)
    by_trial: dict[int, list[Label]] = defaultdict(list)
    for lab in labels:
        by_trial[lab.trial_id].append(lab)
    ids = [
        tid
        for tid, labs in by_trial.items()
        if len(labs) >= 2 and len({lab.verdict for lab in labs}) > 1
    ]
    if not ids:
        return []
    trials = Trial.objects.select_related("case", "run__suite").in_bulk(ids)
    decisions: dict[int, Adjudication] = {}
    for adj in (
        Adjudication.objects.filter(trial_id__in=ids)
        .select_related("decided_by")
        .order_by("trial_id", "created_at", "id")
    ):
        decisions[adj.trial_id] = adj  # the newest wins, as in reference_labels
    out = [
        HumanDisagreement(
            trial=trials[tid],
            labels=[
                ReviewerVerdict(
                    lab.reviewer.username if lab.reviewer_id else lab.reviewer_name,
                    lab.verdict,
                    lab.critique,
                )
                for lab in by_trial[tid]
            ],
            decision=decisions.get(tid),
        )
        for tid in ids
    ]
    out.sort(key=lambda d: (d.decision is not None, d.trial.case.key, d.trial.attempt, d.trial.id))
    return out


@transaction.atomic
def adjudication_record(*, trial: Trial, lead, verdict: str, reason: str) -> Adjudication:
    """Record a lead's decision on a trial; the newest decision is the trial's reference
    label. Raises PermissionDenied (not a lead), DomainError (bad verdict, empty reason)."""
    role_require(lead, LEAD, action="adjudicating")
    verdict_check(verdict)
    if not (reason or "").strip():
        raise DomainError("an adjudication needs a reason", field="reason")
    return Adjudication.objects.create(
        trial=trial, decided_by=lead, verdict=verdict, reason=reason.strip()
    )
