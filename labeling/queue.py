"""Reads for the reviewer's labeling queue: which item to show, and the reviewer's progress.
Blind: nothing here reads a grade, a judge verdict or another reviewer's label.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from evals.trajectory.timeline import Timeline, trajectory_timeline
from labeling.assignment import items_for_reviewer
from labeling.freeze import flagged_revision_get, trial_revealed
from labeling.models import CalibrationItem, CalibrationSet, Label, LabelRevision
from labeling.selectors import label_version_get


@dataclass(frozen=True)
class QueueItem:
    """One item as a reviewer sees it: ``index`` 0-based, ``labeled`` of ``total``, ``version``
    (what the form sends back), neighbours' trial uuids, ``frozen`` (``labeling.freeze``),
    ``flagged``: the newest flagged revision when it is their latest change.
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
        """The trial's trajectory (``evals.trajectory.timeline``; None without one): an agent's path
        is judged too.
        """
        return trajectory_timeline(self.item.trial.trajectory)


@dataclass(frozen=True)
class QueueState:
    """The queue for one reviewer: the item to show (None when done or empty) and the counts."""

    calibration_set: CalibrationSet
    current: QueueItem | None
    total: int
    labeled: int
    first_uuid: str | None = None


def _ordered_items(calibration_set: CalibrationSet, reviewer) -> list[tuple[int, int, str]]:
    """``(item id, trial id, trial uuid)`` of ``reviewer``'s items (``labeling.assignment``) in
    queue order: ids only, so a save never loads the set's outputs.
    """
    return [
        (item_id, trial_id, str(trial_uuid))
        for item_id, trial_id, trial_uuid in items_for_reviewer(
            calibration_set.items.all(), reviewer
        )
        .order_by("position", "id")
        .values_list("id", "trial_id", "trial__uuid")
    ]


def queue_state_get(
    *,
    calibration_set: CalibrationSet,
    reviewer,
    trial_uuid: uuid.UUID | str | None = None,
    after_uuid: uuid.UUID | str | None = None,
) -> QueueState:
    """The item for ``reviewer`` among their items (all of a set without an assignment:
    ``labeling.assignment``): ``trial_uuid`` when one of them; else the next unlabeled after
    ``after_uuid``, wrapping; else the first unlabeled; None when all are labeled. Queries: 3,
    up to 4 more for the item's version and freeze state.
    """
    items = _ordered_items(calibration_set, reviewer)
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
    """The reviewer's most recently saved label in ``calibration_set`` (what ``u`` undoes), or
    None.
    """
    return (
        Label.objects.filter(
            reviewer=reviewer, trial__calibration_items__calibration_set=calibration_set
        )
        .select_related("trial")
        .order_by("-updated_at", "-id")
        .first()
    )
