"""Who labels what in a calibration set: a lead gives a set a target overlap ``k`` and a list
of reviewers; each item gets ``k`` distinct reviewers, balanced (counts per reviewer differ by
at most one), the same for the same seed. Without an assignment every reviewer sees every item.

A reviewer's queue holds only their items (``labeling.queue``, a join on ``ItemAssignment``);
a label on an item of an assigned set that is not theirs is refused (``assignment_check``,
from ``label_submit`` and so from every path: queue, htmx, API, a stale tab). Every change is
an ``AssignmentChange`` (who, when, what). Leads only.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from core.bounds import SEED_MAX
from core.errors import DomainError
from core.roles import LEAD, REVIEWER, role_require, user_has_role
from evals.models import Trial
from labeling.models import (
    AssignmentChange,
    CalibrationItem,
    CalibrationSet,
    ItemAssignment,
    Label,
    SetAssignment,
)


def assignment_plan(
    *,
    item_ids: Sequence[int],
    reviewer_ids: Sequence[int],
    overlap: int,
    seed: int,
    fixed: dict[int, set[int]] | None = None,
) -> dict[int, list[int]]:
    """``{item id: [reviewer id, ...]}``: ``overlap`` distinct reviewers per item, greedy on the
    least loaded reviewer (ties broken by a ``seed``-ed draw), items in a seeded order. Counts
    per reviewer differ by at most one (each step takes the lowest counts, so they stay within
    one of each other). ``fixed``: reviewers an item keeps first, least loaded of them first
    (they labeled it already).
    Pure; raises nothing (callers check ``1 <= overlap <= len(reviewer_ids)``).
    """
    rng = random.Random(seed)
    reviewers = sorted(set(reviewer_ids))
    order = sorted(item_ids)
    rng.shuffle(order)
    load: Counter[int] = Counter(dict.fromkeys(reviewers, 0))
    plan: dict[int, list[int]] = {}
    for item_id in order:
        kept = [r for r in sorted((fixed or {}).get(item_id, ())) if r in load]
        chosen = sorted(kept, key=lambda r: (load[r], rng.random()))[:overlap]
        ranked = sorted(
            (r for r in reviewers if r not in chosen), key=lambda r: (load[r], rng.random())
        )
        chosen += ranked[: overlap - len(chosen)]
        for r in chosen:
            load[r] += 1
        plan[item_id] = chosen
    return plan


def _reviewers_check(reviewers: Sequence) -> list:
    users = list({u.pk: u for u in reviewers}.values())
    for user in users:
        if not user_has_role(user, REVIEWER):
            raise DomainError(
                f"{user.get_username()} does not have the role reviewer", field="reviewers"
            )
    return users


def _labeled_pairs(calibration_set: CalibrationSet) -> set[tuple[int, int]]:
    """``{(item id, reviewer id)}`` of the set's items with a label by that reviewer."""
    rows = CalibrationItem.objects.filter(
        calibration_set=calibration_set, trial__labels__reviewer__isnull=False
    ).values_list("id", "trial__labels__reviewer_id")
    return set(rows)


@transaction.atomic
def assignment_set(
    *, calibration_set: CalibrationSet, reviewers: Sequence, overlap: int, by, seed: int = 0
) -> SetAssignment:
    """Give ``calibration_set`` an assignment (replacing any): every item gets ``overlap``
    distinct of ``reviewers`` (users with the role reviewer), balanced (``assignment_plan``).
    A listed reviewer who already labeled an item keeps it. Recorded as an ``AssignmentChange``
    ("assign"). Raises PermissionDenied (leads only); DomainError for no reviewers, a user
    without the role, ``overlap`` outside 1..len(reviewers), a seed outside 0..SEED_MAX.
    """
    role_require(by, LEAD, action="assigning reviewers")
    users = _reviewers_check(reviewers)
    if not users:
        raise DomainError("choose at least one reviewer", field="reviewers")
    if not 1 <= overlap <= len(users):
        raise DomainError(
            f"must be between 1 and the number of reviewers ({len(users)}), got {overlap}",
            field="overlap",
        )
    if not 0 <= seed <= SEED_MAX:
        raise DomainError(f"must be between 0 and {SEED_MAX}", field="seed")
    CalibrationSet.objects.select_for_update().filter(pk=calibration_set.pk).first()
    now = timezone.now()
    ids = [u.pk for u in users]
    fixed: dict[int, set[int]] = {}
    for item_id, reviewer_id in _labeled_pairs(calibration_set):
        if reviewer_id in ids:
            fixed.setdefault(item_id, set()).add(reviewer_id)
    item_ids = list(calibration_set.items.values_list("id", flat=True))
    plan = assignment_plan(
        item_ids=item_ids, reviewer_ids=ids, overlap=overlap, seed=seed, fixed=fixed
    )
    assignment, _ = SetAssignment.objects.update_or_create(
        calibration_set=calibration_set,
        defaults={"overlap": overlap, "seed": seed, "updated_by": by, "updated_at": now},
    )
    assignment.reviewers.set(users)
    ItemAssignment.objects.filter(item__calibration_set=calibration_set).delete()
    ItemAssignment.objects.bulk_create(
        ItemAssignment(item_id=item_id, reviewer_id=r, assigned_by=by, assigned_at=now)
        for item_id, chosen in plan.items()
        for r in chosen
    )
    AssignmentChange.objects.create(
        calibration_set=calibration_set,
        action="assign",
        by=by,
        at=now,
        details={
            "overlap": overlap,
            "seed": seed,
            "reviewers": sorted(u.get_username() for u in users),
            "items": len(item_ids),
        },
    )
    return assignment


def _pick(candidates: list[int], load: Counter[int], rng: random.Random) -> int:
    return min(candidates, key=lambda r: (load[r], rng.random()))


@transaction.atomic
def assignment_reassign(
    *, calibration_set: CalibrationSet, from_reviewer, to_reviewers: Sequence | None = None, by
) -> int:
    """Move ``from_reviewer``'s unlabeled items of ``calibration_set`` to ``to_reviewers``
    (default: the set's other reviewers), each item keeping ``overlap`` distinct reviewers,
    then even the loads of those reviewers by moving unlabeled items from the most loaded to
    the least (counts within one when single moves allow it). Their labeled items and labels
    stay; they leave the set's reviewers. Returns the items moved; recorded as an
    ``AssignmentChange`` ("reassign"). Raises PermissionDenied (leads only); DomainError when
    the set has no assignment, ``from_reviewer`` is not in it, a target lacks the role, or an
    item could not get ``overlap`` distinct reviewers (nothing changed).
    """
    role_require(by, LEAD, action="reassigning reviewers")
    CalibrationSet.objects.select_for_update().filter(pk=calibration_set.pk).first()
    assignment = SetAssignment.objects.filter(calibration_set=calibration_set).first()
    if assignment is None:
        raise DomainError("this set has no assignment; assign reviewers first", field="")
    current = list(assignment.reviewers.all())
    if from_reviewer.pk not in {u.pk for u in current}:
        raise DomainError(
            f"{from_reviewer.get_username()} is not a reviewer of this set", field="from_reviewer"
        )
    targets = _reviewers_check(
        to_reviewers if to_reviewers else [u for u in current if u.pk != from_reviewer.pk]
    )
    targets = [u for u in targets if u.pk != from_reviewer.pk]
    if not targets:
        raise DomainError("no reviewer left to take the items", field="to_reviewers")
    target_ids = {u.pk for u in targets}
    labeled = _labeled_pairs(calibration_set)
    rows = list(
        ItemAssignment.objects.filter(item__calibration_set=calibration_set).values_list(
            "id", "item_id", "reviewer_id"
        )
    )
    on_item: dict[int, set[int]] = {}
    for _, item_id, reviewer_id in rows:
        on_item.setdefault(item_id, set()).add(reviewer_id)
    load: Counter[int] = Counter(dict.fromkeys(target_ids, 0))
    load.update(r for _, _, r in rows if r in target_ids)
    leaving = [
        (row_id, item_id)
        for row_id, item_id, r in rows
        if r == from_reviewer.pk and (item_id, r) not in labeled
    ]
    rng = random.Random(assignment.seed)
    moves: dict[int, int] = {}  # assignment row id -> new reviewer id
    # Most constrained first: the items with the fewest possible takers.
    leaving.sort(key=lambda pair: (len(target_ids - on_item[pair[1]]), pair[1]))
    for row_id, item_id in leaving:
        candidates = sorted(target_ids - on_item[item_id])
        if not candidates:
            position, trial_uuid = CalibrationItem.objects.values_list(
                "position", "trial__uuid"
            ).get(pk=item_id)
            raise DomainError(
                detail=f"the item at position {position + 1} (trial {trial_uuid}) cannot keep "
                f"{assignment.overlap} distinct reviewers: every remaining reviewer has it "
                "already; add a reviewer (nothing was changed)",
                field="to_reviewers",
                record=str(trial_uuid),
            )
        chosen = _pick(candidates, load, rng)
        moves[row_id] = chosen
        on_item[item_id] = (on_item[item_id] - {from_reviewer.pk}) | {chosen}
        load[chosen] += 1
    owner = {row_id: r for row_id, _, r in rows} | moves
    item_of = {row_id: item_id for row_id, item_id, _ in rows}
    for _ in range(len(rows)):  # evening pass: each move narrows the spread
        heavy = max(sorted(target_ids), key=lambda r: load[r])
        light = min(sorted(target_ids), key=lambda r: load[r])
        if load[heavy] - load[light] <= 1:
            break
        movable = [
            row_id
            for row_id, r in sorted(owner.items())
            if r == heavy
            and (item_of[row_id], heavy) not in labeled
            and light not in on_item[item_of[row_id]]
        ]
        if not movable:
            break
        row_id = movable[0]
        owner[row_id] = moves[row_id] = light
        on_item[item_of[row_id]] = (on_item[item_of[row_id]] - {heavy}) | {light}
        load[heavy] -= 1
        load[light] += 1
    now = timezone.now()
    for row_id, reviewer_id in moves.items():
        ItemAssignment.objects.filter(pk=row_id).update(
            reviewer_id=reviewer_id, assigned_by=by, assigned_at=now
        )
    assignment.reviewers.remove(from_reviewer)
    assignment.reviewers.add(*targets)
    assignment.updated_by, assignment.updated_at = by, now
    assignment.save(update_fields=["updated_by", "updated_at"])
    AssignmentChange.objects.create(
        calibration_set=calibration_set,
        action="reassign",
        by=by,
        at=now,
        details={
            "from": from_reviewer.get_username(),
            "to": sorted(u.get_username() for u in targets),
            "moved": len(moves),
        },
    )
    return len(leaving)


def assignment_items_extend(*, calibration_set: CalibrationSet, by) -> int:
    """Give the items of an assigned set that lack reviewers (added by a top-up or by hand after
    the assignment) their ``overlap`` distinct reviewers, least loaded first, the draw seeded
    by the set's seed and size; recorded as an ``AssignmentChange`` ("extend"). Returns the
    items completed (0 without an assignment). Called by the services that add items, in their
    transaction and under their role check; raises nothing.
    """
    assignment = SetAssignment.objects.filter(calibration_set=calibration_set).first()
    if assignment is None:
        return 0
    reviewer_ids = sorted(assignment.reviewers.values_list("pk", flat=True))
    rows = ItemAssignment.objects.filter(item__calibration_set=calibration_set)
    on_item: dict[int, set[int]] = {}
    for item_id, reviewer_id in rows.values_list("item_id", "reviewer_id"):
        on_item.setdefault(item_id, set()).add(reviewer_id)
    load: Counter[int] = Counter(dict.fromkeys(reviewer_ids, 0))
    load.update(r for taken in on_item.values() for r in taken if r in load)
    item_ids = list(calibration_set.items.order_by("position", "id").values_list("id", flat=True))
    rng = random.Random(f"{assignment.seed}:{len(item_ids)}")
    now, added, completed = timezone.now(), [], 0
    for item_id in item_ids:
        taken = on_item.get(item_id, set())
        free = [r for r in reviewer_ids if r not in taken]
        need = min(assignment.overlap - len(taken), len(free))
        if need <= 0:
            continue
        chosen = sorted(free, key=lambda r: (load[r], rng.random()))[:need]
        for r in chosen:
            load[r] += 1
            added.append(
                ItemAssignment(item_id=item_id, reviewer_id=r, assigned_by=by, assigned_at=now)
            )
        completed += 1
    if added:
        ItemAssignment.objects.bulk_create(added)
        AssignmentChange.objects.create(
            calibration_set=calibration_set,
            action="extend",
            by=by,
            at=now,
            details={"items": completed},
        )
    return completed


def items_for_reviewer(items: QuerySet[CalibrationItem], reviewer) -> QuerySet[CalibrationItem]:
    """``items`` a reviewer labels: all of a set without an assignment, else only theirs (in
    SQL: a left join on the set's assignment and an indexed EXISTS on (item, reviewer)).
    """
    mine = ItemAssignment.objects.filter(item=OuterRef("pk"), reviewer=reviewer)
    return items.filter(Q(calibration_set__assignment__isnull=True) | Exists(mine))


def assignment_check(*, trial: Trial, reviewer, calibration_set: CalibrationSet | None = None):
    """Refuse ``reviewer``'s label on ``trial`` when it is an item of an assigned set
    (``calibration_set`` when given, else any set holding it) and none of those items is
    theirs, nor in a set without an assignment. One query when allowed. Raises DomainError
    (field "trial", code "conflict") naming the trial and case.
    """
    items = CalibrationItem.objects.filter(trial_id=trial.pk)
    if calibration_set is not None:
        items = items.filter(calibration_set=calibration_set)
    if items_for_reviewer(items, reviewer).exists() or not items.exists():
        return
    case_key = Trial.objects.filter(pk=trial.pk).values_list("case__key", flat=True).first()
    raise DomainError(
        detail=f"trial {trial.uuid} (case {case_key}) is not assigned to you"
        + (f" in calibration set {calibration_set.name}" if calibration_set else "")
        + "; the lead assigned it to other reviewers (nothing was saved)",
        field="trial",
        record=str(trial.uuid),
        code="conflict",
    )


@dataclass(frozen=True)
class ReviewerProgress:
    """One reviewer's share: items ``assigned``, ``labeled`` by them, ``remaining``."""

    reviewer: object
    assigned: int
    labeled: int

    @property
    def remaining(self) -> int:
        return self.assigned - self.labeled


@dataclass(frozen=True)
class AssignmentProgress:
    """A set's assignment as the lead sees it: ``reviewers`` (``ReviewerProgress``, by name),
    ``items``: ``{item id: (labels by its assigned reviewers, k)}``, ``changes`` newest first.
    """

    assignment: SetAssignment
    reviewers: list[ReviewerProgress]
    items: dict[int, tuple[int, int]]
    changes: list[AssignmentChange]


def assignment_progress_get(
    *, calibration_set: CalibrationSet, reviewer=None
) -> AssignmentProgress | None:
    """The set's assignment progress (None without one); ``reviewer``: only their own row and
    no per-item figures (what a reviewer sees). Three or four queries.
    """
    assignment = SetAssignment.objects.filter(calibration_set=calibration_set).first()
    if assignment is None:
        return None
    rows = ItemAssignment.objects.filter(item__calibration_set=calibration_set)
    if reviewer is not None:
        rows = rows.filter(reviewer=reviewer)
    done = Label.objects.filter(trial_id=OuterRef("item__trial_id"), reviewer=OuterRef("reviewer"))
    triples = list(rows.annotate(done=Exists(done)).values_list("item_id", "reviewer_id", "done"))
    assigned: Counter[int] = Counter(r for _, r, _ in triples)
    labeled: Counter[int] = Counter(r for _, r, d in triples if d)
    reviewer_ids = set(assigned) | (
        {reviewer.pk}
        if reviewer is not None
        else set(assignment.reviewers.values_list("pk", flat=True))
    )
    users = get_user_model().objects.filter(pk__in=reviewer_ids).order_by("username")
    per_item: dict[int, tuple[int, int]] = {}
    if reviewer is None:
        got: Counter[int] = Counter(i for i, _, d in triples if d)
        per_item = {i: (got[i], assignment.overlap) for i, _, _ in triples}
    return AssignmentProgress(
        assignment=assignment,
        reviewers=[ReviewerProgress(u, assigned[u.pk], labeled[u.pk]) for u in users],
        items=per_item,
        changes=list(calibration_set.assignment_changes.select_related("by")[:20])
        if reviewer is None
        else [],
    )
