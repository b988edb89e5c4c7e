"""Labels frozen once their reviewer saw the judge's verdicts: after labeling every item of a
set (a ``SetReveal``), a change to their labels there is a flagged ``LabelRevision``,
never the label of record, and undo is refused. Users who see every verdict
(``evals.blindness.sees_everything``) are never frozen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from evals.blindness import sees_everything
from labeling.models import CalibrationItem, Label, LabelRevision, SetReveal

FROZEN_TEXT = (
    "you have labeled every item of this calibration set, so the judge's verdicts are "
    "visible to you: your label is frozen"
)


def _finished_set_ids(*, set_ids: Iterable[int], reviewer) -> set[int]:
    """Of ``set_ids``, the sets where ``reviewer`` has a current label on every item. One query."""
    set_ids = set(set_ids)
    if not set_ids:
        return set()
    mine = Label.objects.filter(reviewer_id=reviewer.pk, trial_id=OuterRef("trial_id"))
    open_ids = set(
        CalibrationItem.objects.filter(calibration_set_id__in=set_ids)
        .annotate(done=Exists(mine))
        .filter(done=False)
        .values_list("calibration_set_id", flat=True)
    )
    return set_ids - open_ids


def set_finished(*, calibration_set, reviewer) -> bool:
    """Whether ``reviewer`` has a current label on every item of ``calibration_set`` (an empty
    set is not finished). One query.
    """
    if not calibration_set.items.exists():
        return False
    return bool(_finished_set_ids(set_ids=[calibration_set.pk], reviewer=reviewer))


def reveals_record(*, trial_id: int, reviewer, now) -> set[int]:
    """Record a ``SetReveal`` at ``now`` for each set holding ``trial_id`` that ``reviewer`` has
    finished; returns every revealed set's id. Idempotent (the first reveal kept). Queries: 3
    at most.
    """
    set_ids = set(
        CalibrationItem.objects.filter(trial_id=trial_id).values_list(
            "calibration_set_id", flat=True
        )
    )
    if not set_ids:
        return set()
    revealed = set(
        SetReveal.objects.filter(
            reviewer_id=reviewer.pk, calibration_set_id__in=set_ids
        ).values_list("calibration_set_id", flat=True)
    )
    finished = _finished_set_ids(set_ids=set_ids - revealed, reviewer=reviewer)
    if finished:
        SetReveal.objects.bulk_create(
            [
                SetReveal(calibration_set_id=sid, reviewer_id=reviewer.pk, revealed_at=now)
                for sid in sorted(finished)
            ],
            ignore_conflicts=True,
        )
    return revealed | finished


def trial_revealed(*, trial_id: int, reviewer) -> bool:
    """Read-only ``label_is_frozen``, for pages. Queries: 3 at most."""
    if sees_everything(reviewer):
        return False
    set_ids = set(
        CalibrationItem.objects.filter(trial_id=trial_id).values_list(
            "calibration_set_id", flat=True
        )
    )
    if not set_ids:
        return False
    if SetReveal.objects.filter(reviewer_id=reviewer.pk, calibration_set_id__in=set_ids).exists():
        return True
    return bool(_finished_set_ids(set_ids=set_ids, reviewer=reviewer))


def label_is_frozen(*, trial_id: int, reviewer, now) -> bool:
    """Whether ``reviewer``'s label on ``trial_id`` is frozen (a set holding it is revealed to
    them; finished now records the reveal).
    """
    if sees_everything(reviewer):
        return False
    return bool(reveals_record(trial_id=trial_id, reviewer=reviewer, now=now))


@dataclass(frozen=True)
class RevisionsAfterReveal:
    """Flagged revisions in a scope: ``by_label`` maps (trial id, reviewer id) to the newest."""

    by_label: dict[tuple[int, int], LabelRevision]

    @property
    def n(self) -> int:
        """How many labels (one per trial and reviewer) have a flagged revision."""
        return len(self.by_label)

    @property
    def text(self) -> str:
        """The count as the calibration page says it."""
        if not self.by_label:
            return "no label revised after the reviewer saw the judge's verdicts"
        noun = "label" if self.n == 1 else "labels"
        return f"{self.n} {noun} revised after the reviewer saw the judge's verdicts"


def revisions_after_reveal(*, trial_ids: Iterable[int]) -> RevisionsAfterReveal:
    """The newest flagged revision per (trial, reviewer) on ``trial_ids``, reviewer joined;
    figures never read them. One query.
    """
    rows = LabelRevision.objects.filter(trial_id__in=list(trial_ids), after_reveal=True)
    by_label: dict[tuple[int, int], LabelRevision] = {}
    for rev in rows.select_related("reviewer").order_by("trial_id", "reviewer_id", "version"):
        by_label[(rev.trial_id, rev.reviewer_id)] = rev
    return RevisionsAfterReveal(by_label)


def flagged_revision_get(*, trial_id: int, reviewer, version: int) -> LabelRevision | None:
    """The reviewer's flagged revision on ``trial_id`` at ``version``, or None."""
    return LabelRevision.objects.filter(
        trial_id=trial_id, reviewer_id=reviewer.pk, version=version, after_reveal=True
    ).first()
