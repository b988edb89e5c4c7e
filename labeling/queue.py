"""Reads for the reviewer's labeling queue: which item to show, and the reviewer's progress.

The queue is blind: nothing here reads a grade, a judge verdict or another reviewer's
label; a reviewer sees only the case, the output and their own current label.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from evals.trajectory.timeline import Timeline, trajectory_timeline
from labeling.freeze import flagged_revision_get, trial_revealed
from labeling.models import CalibrationItem, CalibrationSet, Label, LabelRevision
from labeling.selectors import label_version_get


@dataclass(frozen=True)
class QueueItem:
    """One item of a calibration set as a reviewer sees it in the queue.

    ``index`` is 0-based in queue order (``CalibrationItem.position``), shown as index + 1;
    ``total`` items in the set; ``labeled`` of them carry a current label by this reviewer;
    ``label`` is this reviewer's current label on the item's trial (None when unlabeled);
    ``version`` the version of this reviewer's label history on it (0: never labeled; a
    label cleared by an undo keeps its clearing's version), what the form sends back;
    ``prev_uuid``/``next_uuid`` the neighbouring items' trial uuids (None at the ends);
    ``timeline`` the trial's trajectory rows (an agent's trial), None without one;
    ``frozen``: the label is frozen (``labeling.freeze``: the reviewer finished a set holding
    the trial and may have seen the judge's verdicts), so a change is recorded as a flagged
    revision and ``label`` stays the label of record; ``flagged`` the newest flagged
    revision when it is the reviewer's latest change (None otherwise).
    """

    item: CalibrationItem
    index: int
    total: int
    labeled: int
    label: Label | None
    version: int
    prev_uuid: str | None
    next_uuid: str | None
    frozen: bool = False
    flagged: LabelRevision | None = None

    @property
    def timeline(self) -> Timeline | None:
        """The trial's trajectory as the trial page shows it (``evals.trajectory.timeline``;
        None for a trial without one): a reviewer of an agent's trial judges its path too."""
        return trajectory_timeline(self.item.trial.trajectory)


@dataclass(frozen=True)
class QueueState:
    """The queue for one reviewer: the item to show (None when the set is empty or the
    reviewer has labeled every item and asked for no particular one), and the counts."""

    calibration_set: CalibrationSet
    current: QueueItem | None
    total: int
    labeled: int
    first_uuid: str | None = None


def _ordered_items(calibration_set: CalibrationSet) -> list[tuple[int, int, str]]:
    """``(item id, trial id, trial uuid)`` in queue order: ids only, so finding the position
    never loads the set's outputs (a save renders one item, not thirty)."""
    return [
        (item_id, trial_id, str(trial_uuid))
        for item_id, trial_id, trial_uuid in calibration_set.items.order_by(
            "position", "id"
        ).values_list("id", "trial_id", "trial__uuid")
    ]


def queue_state_get(
    *,
    calibration_set: CalibrationSet,
    reviewer,
    trial_uuid: uuid.UUID | str | None = None,
    after_uuid: uuid.UUID | str | None = None,
) -> QueueState:
    """The queue position for ``reviewer`` on ``calibration_set``.

    1. ``trial_uuid`` given and in the set: that item (j/k navigation, revisiting a label).
    2. ``after_uuid`` given (just saved that item): the first item after it, in queue order
       and wrapping round, that this reviewer has not labeled.
    3. Otherwise (resume): the first item in queue order this reviewer has not labeled.
    When every item is labeled, cases 2 and 3 give ``current = None`` (the queue is done).
    Queries: 3, whatever the size of the set (positions, this reviewer's labels, the item),
    and a fourth when the item shown has no current label (its version, for the form); a
    labeled item adds up to 4 (is it frozen, its flagged revision).
    """
    items = _ordered_items(calibration_set)
    labels = {
        lab.trial_id: lab
        for lab in Label.objects.filter(
            reviewer=reviewer, trial_id__in=[trial_id for _, trial_id, _ in items]
        )
    }
    total = len(items)
    labeled = sum(1 for _, trial_id, _ in items if trial_id in labels)
    uuids = [trial_uuid for _, _, trial_uuid in items]
    index: int | None = None
    if trial_uuid is not None and str(trial_uuid) in uuids:
        index = uuids.index(str(trial_uuid))
    else:
        start = 0
        if after_uuid is not None and str(after_uuid) in uuids:
            start = uuids.index(str(after_uuid)) + 1
        for offset in range(total):
            candidate = (start + offset) % total
            if items[candidate][1] not in labels:
                index = candidate
                break
    if index is None:
        return QueueState(calibration_set, None, total, labeled, uuids[0] if uuids else None)
    item = CalibrationItem.objects.select_related("trial__case", "trial__run").get(
        id=items[index][0]
    )
    label = labels.get(item.trial_id)
    frozen = label is not None and trial_revealed(trial_id=item.trial_id, reviewer=reviewer)
    current = QueueItem(
        item=item,
        index=index,
        total=total,
        labeled=labeled,
        label=label,
        version=label.version
        if label
        else label_version_get(trial_id=item.trial_id, reviewer=reviewer),
        prev_uuid=uuids[index - 1] if index > 0 else None,
        next_uuid=uuids[index + 1] if index + 1 < total else None,
        frozen=frozen,
        flagged=flagged_revision_get(
            trial_id=item.trial_id, reviewer=reviewer, version=label.version
        )
        if frozen and label is not None
        else None,
    )
    return QueueState(calibration_set, current, total, labeled, uuids[0])


def queue_last_labeled_get(*, calibration_set: CalibrationSet, reviewer) -> Label | None:
    """The reviewer's most recently saved label on a trial of ``calibration_set`` (what the
    queue's ``u`` undoes), or None when they have labeled nothing in it."""
    return (
        Label.objects.filter(
            reviewer=reviewer, trial__calibration_items__calibration_set=calibration_set
        )
        .select_related("trial")
        .order_by("-updated_at", "-id")
        .first()
    )
