"""Calibration-set writes: building, topping up, adding and removing items (engineers and
leads). Membership is frozen once labeling starts, except for a top-up.
"""

from __future__ import annotations

import random
from collections import defaultdict

from django.db import transaction
from django.db.models import F, Max

from core.bounds import seed_problem
from core.errors import DomainError
from core.roles import ENGINEER, LEAD, role_require
from evals.models import Run, Trial
from judges.models import JudgeVersion
from labeling.assignment import assignment_items_extend
from labeling.models import CalibrationItem, CalibrationSet
from labeling.sampling import (
    design_build,
    draw_initial,
    inclusion_probabilities_set,
    judged_strata,
    set_plan_get,
)


def _strata_pick(groups: dict[tuple[str, str], list[int]], size: int, seed: int) -> list[int]:
    """Balanced pick: alternate judge verdicts, tags round-robin within each; each stratum
    shuffled with ``random.Random(seed)`` from a sorted start.
    """
    rng = random.Random(seed)
    by_verdict: dict[str, list[list[int]]] = defaultdict(list)
    for (verdict, _tag), ids in sorted(groups.items()):
        ids = sorted(ids)
        rng.shuffle(ids)
        by_verdict[verdict].append(ids)
    # One queue per verdict: round-robin over its tags.
    queues: list[list[int]] = []
    for verdict in sorted(by_verdict):
        strata = by_verdict[verdict]
        queue: list[int] = []
        depth = max(len(s) for s in strata)
        for i in range(depth):
            queue.extend(s[i] for s in strata if i < len(s))
        queues.append(queue)
    picked: list[int] = []
    i = 0
    while len(picked) < size and any(i < len(q) for q in queues):
        picked.extend(q[i] for q in queues if i < len(q))
        i += 1
    picked = picked[:size]
    rng.shuffle(picked)  # queue order does not reveal the strata
    return picked


def _judged_check(run: Run, judge_version: JudgeVersion) -> dict[str, list[int]]:
    strata = judged_strata(run=run, judge_version=judge_version)
    if not strata:
        raise DomainError(
            f"it has no successful verdict on run {run.name!r} (not-judged and errored "
            "grades do not count); grade the run with it first",
            field="judge_version",
        )
    return strata


@transaction.atomic
def calibration_set_build(
    *,
    run: Run,
    name: str,
    by,
    judge_version: JudgeVersion | None = None,
    size: int = 30,
    seed: int = 0,
) -> CalibrationSet:
    """Pick ``size`` ok trials of ``run`` into a new set (engineers and leads): planned for the
    judge version's FAR (``labeling.sampling``), else by the case's first tag, round-robin;
    the same inputs, the same trials. Raises PermissionDenied; DomainError for size < 1, a
    seed outside 0 to 2**63 - 1, no ok trial, or none judged by the version.
    """
    role_require(by, ENGINEER, LEAD, action="building a calibration set")
    if size < 1:
        raise DomainError(f"must be at least 1, got {size}", field="size")
    if problem := seed_problem(seed):
        raise DomainError(problem, field="seed")
    if not name.strip():
        raise DomainError("must not be empty", field="name")
    trials = list(
        Trial.objects.filter(run=run, status=Trial.Status.OK).values_list("id", "case__tags")
    )
    if not trials:
        raise DomainError(f"run {run.name!r} has no ok trial to calibrate on")
    design: dict = {}
    if judge_version is not None:
        design = design_build(_judged_check(run, judge_version))
        picked_with = draw_initial(design, size, seed)
    else:
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for tid, tags in trials:
            tag = tags[0] if isinstance(tags, list) and tags and isinstance(tags[0], str) else ""
            groups[("none", tag)].append(tid)
        picked_with = [(tid, "") for tid in _strata_pick(groups, size, seed)]
    cset = CalibrationSet.objects.create(
        name=name.strip(),
        suite_id=run.suite_id,
        run=run,
        judge_version=judge_version,
        size=len(picked_with),
        seed=seed,
        created_by=by,
        design=design,
    )
    CalibrationItem.objects.bulk_create(
        CalibrationItem(calibration_set=cset, trial_id=tid, position=i, stratum=key)
        for i, (tid, key) in enumerate(picked_with)
    )
    if design:
        inclusion_probabilities_set(cset)
    return cset


@transaction.atomic
def calibration_set_top_up(*, calibration_set: CalibrationSet, by) -> int:
    """Draw into a planned set the items its plan asks for (``set_plan_get``; engineers and
    leads); returns how many (0: none asked). Allowed after labeling started. Raises
    PermissionDenied; DomainError for a set without a design or an unreachable plan.
    """
    role_require(by, ENGINEER, LEAD, action="topping up a calibration set")
    cset = CalibrationSet.objects.select_for_update().get(pk=calibration_set.pk)
    plan = set_plan_get(calibration_set=cset)
    if plan is None:
        raise DomainError(
            f"calibration set {cset.name!r} has no sampling design (built without a judge "
            "version, or before planning existed): build a new set for the judge"
        )
    if not plan.plan.reachable:
        raise DomainError(plan.message)
    present = set(cset.items.values_list("trial_id", flat=True))
    rng = random.Random(f"{cset.seed}:{cset.size}")
    new: list[tuple[int, str]] = []
    for key, count in sorted(plan.plan.add.items()):
        pool = [t for t in cset.design["strata"][key]["trials"] if t not in present]
        rng.shuffle(pool)
        new.extend((tid, key) for tid in pool[:count])
    if not new:
        return 0
    rng.shuffle(new)
    last = cset.items.aggregate(m=Max("position"))["m"]
    start = 0 if last is None else last + 1
    CalibrationItem.objects.bulk_create(
        CalibrationItem(calibration_set=cset, trial_id=tid, position=start + i, stratum=key)
        for i, (tid, key) in enumerate(new)
    )
    CalibrationSet.objects.filter(pk=cset.pk).update(size=F("size") + len(new))
    inclusion_probabilities_set(cset)
    assignment_items_extend(calibration_set=cset, by=by)  # new items get their reviewers
    return len(new)


def _editable_set(calibration_set: CalibrationSet) -> CalibrationSet:
    locked = CalibrationSet.objects.select_for_update().get(pk=calibration_set.pk)
    if locked.frozen_at is not None:
        raise DomainError(
            f"calibration set {locked.name!r} is frozen: labeling started "
            f"at {locked.frozen_at:%Y-%m-%d %H:%M} UTC"
        )
    return locked


@transaction.atomic
def calibration_item_add(*, calibration_set: CalibrationSet, trial: Trial, by) -> CalibrationItem:
    """Append a trial of the set's suite to the set (engineers and leads); idempotent.
    Raises DomainError once labeling started, or for another suite's trial."""
    role_require(by, ENGINEER, LEAD, action="editing a calibration set")
    cset = _editable_set(calibration_set)
    if trial.run.suite_id != cset.suite_id:
        raise DomainError(f"trial {trial.uuid} belongs to another suite")
    existing = CalibrationItem.objects.filter(calibration_set=cset, trial=trial).first()
    if existing:
        return existing
    last = cset.items.aggregate(m=Max("position"))["m"]
    item = CalibrationItem.objects.create(
        calibration_set=cset, trial=trial, position=0 if last is None else last + 1
    )
    CalibrationSet.objects.filter(pk=cset.pk).update(size=F("size") + 1)
    assignment_items_extend(calibration_set=cset, by=by)
    return item


@transaction.atomic
def calibration_item_remove(*, calibration_set: CalibrationSet, trial: Trial, by) -> bool:
    """Remove a trial from the set (engineers and leads); False when it was not in it.
    Raises DomainError once labeling started."""
    role_require(by, ENGINEER, LEAD, action="editing a calibration set")
    cset = _editable_set(calibration_set)
    deleted, _ = CalibrationItem.objects.filter(calibration_set=cset, trial=trial).delete()
    if deleted:
        CalibrationSet.objects.filter(pk=cset.pk).update(size=F("size") - 1)
    return bool(deleted)
