"""Labels frozen once the reviewer has seen the judge's verdicts.

A reviewer labels a calibration set blind (``evals.blindness``): the judge's verdicts on its
trials are hidden from them until they have a label on every item. From that moment (a
``SetReveal``, recorded here) their labels on the set's trials are frozen: a later change is
written by ``labeling.labels.label_submit`` as a flagged ``LabelRevision``
(``after_reveal``) and never replaces the label of record, so calibration keeps the verdict
given blind and counts the revisions apart (``revisions_after_reveal``); an undo is refused.

Only users who label blind are frozen: engineers and leads see every verdict at any time
(``evals.blindness.sees_everything``), so no moment reveals anything to them.
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
    """Of ``set_ids``, the sets where ``reviewer`` has a current label on every item. One
    query."""
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
    """Whether ``reviewer`` has a current label on every item of ``calibration_set`` (an
    empty set is not finished): the moment the judge's verdicts on its trials become
    visible to them. One query."""
    if not calibration_set.items.exists():
        return False
    return bool(_finished_set_ids(set_ids=[calibration_set.pk], reviewer=reviewer))


def reveals_record(*, trial_id: int, reviewer, now) -> set[int]:
    """Record a ``SetReveal`` (at ``now``) for each calibration set holding ``trial_id``
    that ``reviewer`` has now finished; returns the ids of every set holding the trial that
    is revealed to them (recorded before or now). Idempotent (one reveal per set and
    reviewer, the first kept). Queries: 3 at most."""
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
    """Read-only form of ``label_is_frozen`` (for pages): whether a calibration set holding
    ``trial_id`` is revealed to ``reviewer`` (recorded, or finished now); False for users who
    see every verdict anyway. Queries: 3 at most."""
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
    """Whether ``reviewer``'s label on ``trial_id`` is frozen: a calibration set holding the
    trial is revealed to them (recorded, or finished now, which records it). Never for users
    who see every verdict anyway (``evals.blindness.sees_everything``: leads)."""
    if sees_everything(reviewer):
        return False
    return bool(reveals_record(trial_id=trial_id, reviewer=reviewer, now=now))


@dataclass(frozen=True)
class RevisionsAfterReveal:
    """Labels revised after their reviewer saw the judge's verdicts, in a scope:
    ``by_label`` maps (trial id, reviewer id) to the newest flagged revision."""

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
    """The flagged revisions (``LabelRevision.after_reveal``) on ``trial_ids``, the newest
    per (trial, reviewer), with the reviewer joined. Calibration figures never read them:
    they are counted apart. One query."""
    rows = LabelRevision.objects.filter(trial_id__in=list(trial_ids), after_reveal=True)
    by_label: dict[tuple[int, int], LabelRevision] = {}
    for rev in rows.select_related("reviewer").order_by("trial_id", "reviewer_id", "version"):
        by_label[(rev.trial_id, rev.reviewer_id)] = rev
    return RevisionsAfterReveal(by_label)


def flagged_revision_get(*, trial_id: int, reviewer, version: int) -> LabelRevision | None:
    """The reviewer's flagged revision on ``trial_id`` at ``version`` (their label's current
    version), or None when the newest change was not a revision after the reveal."""
    return LabelRevision.objects.filter(
        trial_id=trial_id, reviewer_id=reviewer.pk, version=version, after_reveal=True
    ).first()
