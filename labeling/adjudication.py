"""The lead's adjudication queue: trials with two or more current labels that disagree (the
rule of ``reference_labels``' "unresolved"). The newest ``Adjudication`` is the reference.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import DomainError
from core.roles import LEAD, role_require
from evals.models import Trial
from labeling.labels import verdict_check
from labeling.models import Adjudication, CalibrationSet, Label
from labeling.trust_recheck import trust_recheck


@dataclass(frozen=True)
class ReviewerVerdict:
    """One reviewer's current label: ``reviewer`` (username, or the importer's name),
    ``verdict`` "pass"/"fail", ``critique`` (untrusted text, escaped when shown)."""

    reviewer: str
    verdict: str
    critique: str


@dataclass(frozen=True)
class HumanDisagreement:
    """A disagreeing trial: its labels (oldest first), the lead's newest ``decision`` (None:
    unresolved) and the ``replaced`` ones, newest first.
    """

    trial: Trial
    labels: list[ReviewerVerdict]
    decision: Adjudication | None
    replaced: list[Adjudication] = field(default_factory=list)

    @property
    def decision_version(self) -> int:
        """The version a decision form on this trial was shown (0: undecided)."""
        return self.decision.version if self.decision else 0

    @property
    def n_pass(self) -> int:
        return sum(1 for lab in self.labels if lab.verdict == Label.Verdict.PASS)

    @property
    def n_fail(self) -> int:
        return len(self.labels) - self.n_pass


def human_disagreements(
    *, calibration_set: CalibrationSet | None = None, suite=None
) -> list[HumanDisagreement]:
    """Disagreeing trials in ``calibration_set`` (else ``suite``, else everywhere), unresolved
    first, then by case key and attempt. Queries: 3.
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
    decisions: dict[int, list[Adjudication]] = defaultdict(list)
    for adj in (
        Adjudication.objects.filter(trial_id__in=ids)
        .select_related("decided_by")
        .order_by("trial_id", "-version")
    ):
        decisions[adj.trial_id].append(adj)  # the newest first: it wins, as in reference_labels
    out = [
        HumanDisagreement(
            trial=trials[tid],
            labels=[
                ReviewerVerdict(
                    lab.reviewer.username if lab.reviewer is not None else lab.reviewer_name,
                    lab.verdict,
                    lab.critique,
                )
                for lab in by_trial[tid]
            ],
            decision=decisions[tid][0] if decisions[tid] else None,
            replaced=decisions[tid][1:],
        )
        for tid in ids
    ]
    out.sort(key=lambda d: (d.decision is not None, d.trial.case.key, d.trial.attempt, d.trial.id))
    return out


@transaction.atomic
def adjudication_record(
    *, trial: Trial, lead, verdict: str, reason: str, expected_version: int | None = None
) -> Adjudication:
    """Record a lead's decision as a new row at the trial's next version; ``expected_version``
    (0: none; None skips) is a compare-and-set. Rechecks trust. Raises PermissionDenied;
    DomainError for a bad verdict, an empty ``reason``, or "conflict" with ``current_version``.
    """
    role_require(lead, LEAD, action="adjudicating")
    verdict_check(verdict)
    if not (reason or "").strip():
        raise DomainError("an adjudication needs a reason", field="reason")
    Trial.objects.select_for_update().filter(pk=trial.pk).exists()  # one decider at a time
    current = (
        Adjudication.objects.filter(trial=trial)
        .select_related("decided_by")
        .order_by("-version")
        .first()
    )
    latest = current.version if current else 0
    if expected_version is not None and expected_version != latest:
        raise _stale(current)
    try:
        with transaction.atomic():
            decision = Adjudication.objects.create(
                trial=trial,
                decided_by=lead,
                verdict=verdict,
                reason=reason.strip(),
                version=latest + 1,
            )
            trust_recheck(
                trial_ids=[trial.id],
                by=lead,
                change=f"{lead.get_username()}'s adjudication of trial {trial.uuid}",
            )
            return decision
    except IntegrityError:  # a concurrent decision took this version (no row lock: SQLite)
        current = Adjudication.objects.filter(trial=trial).order_by("-version").first()
        raise _stale(current) from None


def _stale(current: Adjudication | None) -> DomainError:
    """The refusal of a form that showed another decision than ``current`` (None: undecided)."""
    if current is None:
        now = "no decision"
    else:
        when = timezone.localtime(current.created_at).strftime("%Y-%m-%d %H:%M")
        now = f"{current.verdict} by {current.decided_by.get_username()} at {when}"
    return DomainError(
        detail=f"the decision on this trial changed since you opened it (now {now}); "
        "nothing was saved: your choice is kept below, record it again to replace that "
        "decision",
        field="expected_version",
        code="conflict",
        current_version=current.version if current else 0,
    )
