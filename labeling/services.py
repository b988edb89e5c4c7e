"""Writes for labeling: calibration sets, labels with revisions, adjudication, trust.

Permissions are checked here (views and API call these), raising
``django.core.exceptions.PermissionDenied``: reviewers and leads label; engineers and leads
build and edit calibration sets; leads adjudicate, approve and revoke trust.
Domain refusals raise ``DomainError`` naming the field; its text is shown to the user.
"""

from __future__ import annotations

import random
from collections import defaultdict

from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from core.bounds import TEXT_MAX_CHARS, seed_problem
from core.errors import DomainError
from core.roles import ENGINEER, LEAD, REVIEWER, role_require
from evals.models import Run, Trial
from judges.models import JudgeVersion
from labeling.approval import judge_trust_approve  # noqa: F401 - re-exported: the approval
from labeling.decision_history import (
    REVIEW_KEY,
    decision_before,
    decision_transition_record,
    details_with_review,
)
from labeling.freeze import FROZEN_TEXT, label_is_frozen
from labeling.guidelines import (  # noqa: F401 - re-exported: the guidelines' writes
    INSTRUCTIONS_MAX,
    calibration_set_instructions_set,
    guidelines_current_id,
)
from labeling.models import CalibrationItem, CalibrationSet, Label, LabelRevision
from labeling.sampling import (
    design_build,
    draw_initial,
    inclusion_probabilities_set,
    judged_strata,
    set_plan_get,
)
from labeling.trust_recheck import trust_recheck

VERDICTS = tuple(Label.Verdict.values)
CRITIQUE_MAX = TEXT_MAX_CHARS["critique"]  # core.bounds: the one table of text limits


def verdict_check(verdict: str) -> str:
    if verdict not in VERDICTS:
        raise DomainError(f"expected 'pass' or 'fail', got {verdict!r}", field="verdict")
    return verdict


# --- calibration sets -------------------------------------------------------------------


def _strata_pick(groups: dict[tuple[str, str], list[int]], size: int, seed: int) -> list[int]:
    """Balanced pick: alternate judge verdicts, within each alternate tags (round-robin),
    each stratum shuffled with ``random.Random(seed)`` from a sorted start."""
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
    """Pick ``size`` ok trials of ``run`` into a new calibration set (engineers and leads).

    With a judge version (the usual case) the set is planned for its false-accept rate
    (``labeling.sampling``): only trials the judge actually judged are eligible (an ok
    judge grade: never a rung the ladder skipped, never an errored call); they are
    stratified by the judge's verdict and the signals that a human would fail them, drawn
    likely fails first with every stratum kept sampled, and each item records its stratum
    and inclusion probability (so the population estimate can be weighted). The design is
    stored on the set (``design``) for its plan and top-ups. Without a judge version:
    strata are the case's first tag, picked round-robin. Same run, judge, size and seed ->
    the same trials in the same order. Raises PermissionDenied, or DomainError when size <
    1, the seed is outside 0 to 2**63 - 1, the run has no ok trial, or the judge version
    judged none of it.
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
    """Add to a planned set the items its plan asks for (``labeling.sampling.set_plan_get``;
    engineers and leads); returns how many were added (0 when the plan asks for none).

    Allowed after labeling started (adding items changes no label). New items are drawn at
    random from the not-yet-drawn trials of each stratum (seeded by the set's seed and its
    size), appended to the queue, and the inclusion probabilities of their strata are
    rewritten (drawn / population). Raises PermissionDenied, or DomainError for a set
    without a sampling design or when no draw can reach the false-accept threshold.
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


# --- labels -------------------------------------------------------------------------------


def _freeze_sets_of(trial: Trial, now) -> None:
    CalibrationSet.objects.filter(items__trial=trial, frozen_at__isnull=True).update(frozen_at=now)


def _last_revision(trial: Trial, reviewer) -> LabelRevision | None:
    return LabelRevision.objects.filter(trial=trial, reviewer=reviewer).order_by("-version").first()


def _stale(expected_version: int, latest: int, *, undone: bool = False) -> DomainError:
    now = f"revision {latest}" if latest else "no label"
    return DomainError(
        detail=f"this label changed since you opened it (now {now}, your form had "
        f"{expected_version or 'none'}); reload it — nothing was "
        + ("undone" if undone else "saved"),
        field="expected_version",
        code="conflict",
        current_version=latest,
    )


def _is_resubmission(last: LabelRevision, expected_version: int | None) -> bool:
    """An identical save is a no-op when the form saw the current version, or is the retry
    of the save that made it (sent from the version just before, and not an undo)."""
    return expected_version in (None, last.version) or (
        expected_version == last.version - 1 and last.undoes is None
    )


def _change_text(user, trial: Trial) -> str:
    return f"{user.get_username()}'s label on trial {trial.uuid}"


def label_submit(
    *,
    trial: Trial,
    reviewer,
    verdict: str,
    critique: str = "",
    expected_version: int | None = None,
    calibration_set: CalibrationSet | None = None,
    review: dict | None = None,
) -> Label:
    """Save ``reviewer``'s label on ``trial`` (reviewers and leads); returns the current label.

    Versions count every change of the reviewer's label on the trial (saves and undos) and
    only grow: a label saved again after an undo cleared it continues the count.
    - ``expected_version`` is the version the form was loaded with (0: never labeled; a
      cleared label keeps the version of its clearing; None skips the check). Any other
      version than the current one is a DomainError (code "conflict", with
      ``current_version``) and nothing is written, so a form loaded before any later change
      (a save, an undo, a save again: A-B-A) can never overwrite it.
    - First label (or first after a clearing): creates the Label at the next version and its
      LabelRevision; freezes every calibration set holding the trial; records the reveal of
      each set the reviewer has now labeled completely (``labeling.freeze``).
    - Revision: only the reviewer's own label; each change adds a LabelRevision.
    - Frozen label (a set holding the trial is revealed to the reviewer: they finished it, so
      the judge's verdicts are visible to them; never a lead's, who sees them anyway): the
      change is written as a flagged LabelRevision (``after_reveal``) and the label keeps its
      verdict and critique (the label of record); only its version moves. Outcome "flagged".
    - Identical resubmission (same verdict and critique as the newest change, from the
      current version or as the retry of the save that made it) changes nothing.
    - The label and its revision record the guidelines version given
      (``labeling.guidelines.guidelines_current_id``: ``calibration_set``'s, the queue's).
    - ``review`` (``labeling.review``: a contract review's ``{"output_hash", "dimensions"}``)
      is the label's ``details.contract_review`` and its revision's; a change without one
      removes the review from the label of record. The trial's contract decision, derived
      from the labels of record, is recomputed in the same transaction and a move recorded
      (``labeling.decision_history``).
    Concurrency: the label row is updated with a compare-and-set on ``version`` and
    revisions are unique per (trial, reviewer, version); two reviewers never touch each
    other's rows, so both keep their labels.
    Returns the label, carrying ``outcome``: "created", "revised", "flagged" or "unchanged"
    (the API's 201 or 200) and ``flagged_revision`` (the newest flagged revision or None).
    A change of the label of record rechecks the trust of every judge approval resting on
    the trial, in the same transaction (``labeling.trust_recheck``: an approval whose rule
    no longer holds lapses).
    Raises PermissionDenied; DomainError for a bad verdict, a critique too long (field
    named) or a stale form (code "conflict").
    """
    role_require(reviewer, REVIEWER, LEAD, action="labeling")
    verdict_check(verdict)
    critique = critique or ""
    if len(critique) > CRITIQUE_MAX:
        raise DomainError(f"longer than {CRITIQUE_MAX} characters", field="critique")
    now = timezone.now()
    with transaction.atomic():
        before = decision_before(trial_id=trial.id)
        current = Label.objects.filter(trial=trial, reviewer=reviewer).first()
        last = _last_revision(trial, reviewer)
        # The label row's version too: a label written without revisions (by hand, by an
        # older import) still counts, so versions never go back.
        latest = max(last.version if last else 0, current.version if current else 0)
        frozen = current is not None and label_is_frozen(
            trial_id=trial.id, reviewer=reviewer, now=now
        )
        # The newest change: a frozen label's flagged revision, else the label itself.
        flagged = frozen and last is not None and last.after_reveal and last.version == latest
        newest = last if flagged else current
        same = newest is not None and (newest.verdict, newest.critique) == (verdict, critique)
        if same and review is not None and newest is not None:  # another output's: a change
            same = (newest.details or {}).get(REVIEW_KEY) == review
        if same and (
            expected_version in (None, latest)
            or (
                last is not None
                and last.version == latest
                and _is_resubmission(last, expected_version)
            )
        ):
            assert current is not None  # same: the newest change is it or its revision
            current.outcome = "unchanged"  # identical resubmission
            current.flagged_revision = (
                last if frozen and last is not None and last.after_reveal else None
            )
            return current
        if expected_version is not None and expected_version != latest:
            raise _stale(expected_version, latest)
        new_version = latest + 1
        guidelines_id = guidelines_current_id(trial=trial, calibration_set=calibration_set)
        if current is None:
            try:
                with transaction.atomic():
                    label = Label.objects.create(
                        trial=trial,
                        reviewer=reviewer,
                        reviewer_name=reviewer.get_username(),
                        verdict=verdict,
                        critique=critique,
                        source=Label.Source.REVIEWER,
                        version=new_version,
                        guidelines_id=guidelines_id,
                        details=details_with_review(None, review),
                        created_at=now,
                        updated_at=now,
                    )
                    LabelRevision.objects.create(
                        label=label,
                        trial=trial,
                        reviewer=reviewer,
                        version=new_version,
                        verdict=verdict,
                        critique=critique,
                        guidelines_id=guidelines_id,
                        details=details_with_review(None, review),
                        created_at=now,
                    )
            except IntegrityError:
                raise DomainError(
                    detail="you labeled this item in another tab a moment ago; reload it "
                    "(nothing was saved)",
                    field="expected_version",
                    code="conflict",
                    current_version=None,
                ) from None
            _freeze_sets_of(trial, now)
            label_is_frozen(trial_id=trial.id, reviewer=reviewer, now=now)  # records reveals
            label.outcome, label.flagged_revision = "created", None
            decision_transition_record(
                trial_id=trial.id,
                before=before,
                reviewer=reviewer,
                label_version=new_version,
                cause="created",
            )
            trust_recheck(trial_ids=[trial.id], by=reviewer, change=_change_text(reviewer, trial))
            return label
        changes: dict[str, object] = (
            {"version": new_version}
            if frozen
            else {
                "verdict": verdict,
                "critique": critique,
                "version": new_version,
                "guidelines_id": guidelines_id,
                "details": details_with_review(current.details, review),
                "updated_at": now,
            }
        )
        updated = Label.objects.filter(pk=current.pk, version=current.version).update(**changes)
        if not updated:
            raise DomainError(
                detail="this label changed while saving; reload it — nothing was saved",
                field="expected_version",
                code="conflict",
                current_version=None,
            )
        revision = LabelRevision.objects.create(
            label=current,
            trial=trial,
            reviewer=reviewer,
            version=new_version,
            verdict=verdict,
            critique=critique,
            after_reveal=frozen,
            guidelines_id=guidelines_id,
            details=details_with_review(None, review),
            created_at=now,
        )
        for name, value in changes.items():
            setattr(current, name, value)
        current.outcome = "flagged" if frozen else "revised"
        current.flagged_revision = revision if frozen else None
        decision_transition_record(
            trial_id=trial.id,
            before=before,
            reviewer=reviewer,
            label_version=new_version,
            cause=current.outcome,
        )
        if not frozen:  # the label of record moved
            trust_recheck(trial_ids=[trial.id], by=reviewer, change=_change_text(reviewer, trial))
        return current


def _undo_stack(revisions: list[LabelRevision]) -> list[LabelRevision]:
    """The saves still in effect, oldest first: each save pushes, each undo pops."""
    stack: list[LabelRevision] = []
    for rev in revisions:
        if rev.undoes is None:
            stack.append(rev)
        elif stack:
            stack.pop()
    return stack


@transaction.atomic
def label_undo(*, trial: Trial, reviewer, expected_version: int | None = None) -> Label | None:
    """Undo the reviewer's last change on ``trial`` (the queue's ``u`` key).

    Policy: the newest save still in effect is taken back and the label returns to the
    save before it; when there is none (a first label), the label is cleared (the item is
    unlabeled again; sets stay frozen). Either way the undo is written as a new revision at
    the next version (``undoes`` naming the version taken back; a clearing has verdict ""):
    nothing is deleted from the history and versions never go back, so a form loaded before
    the undo is stale. Undoing again walks further back. Returns the label after the undo,
    or None when it was cleared or there was nothing to undo. ``expected_version`` as in
    ``label_submit`` (DomainError (code "conflict") when it differs). A frozen label
    (``labeling.freeze``: the reviewer saw the judge's verdicts) is never undone: DomainError
    (code "conflict", field ``trial``). Raises PermissionDenied.
    """
    role_require(reviewer, REVIEWER, LEAD, action="labeling")
    label = Label.objects.select_for_update().filter(trial=trial, reviewer=reviewer).first()
    if label is None:
        return None
    if expected_version is not None and expected_version != label.version:
        raise _stale(expected_version, label.version, undone=True)
    now = timezone.now()
    before = decision_before(trial_id=trial.id)
    if label_is_frozen(trial_id=trial.id, reviewer=reviewer, now=now):
        raise DomainError(
            f"{FROZEN_TEXT} and cannot be undone; save a new verdict to record a flagged "
            "revision (nothing was undone)",
            field="trial",
            code="conflict",
            current_version=label.version,
        )
    stack = _undo_stack(list(LabelRevision.objects.filter(trial=trial, reviewer=reviewer)))
    undone = stack.pop() if stack else None
    new_version = label.version + 1
    restored = stack[-1] if stack else None
    LabelRevision.objects.create(
        label=label if restored else None,
        trial=trial,
        reviewer=reviewer,
        version=new_version,
        verdict=restored.verdict if restored else "",
        critique=restored.critique if restored else "",
        undoes=undone.version if undone else label.version,
        details=restored.details if restored else {},
        created_at=now,
    )
    if restored is None:
        label.delete()
    else:
        label.verdict, label.critique = restored.verdict, restored.critique
        label.details = details_with_review(label.details, restored.details.get(REVIEW_KEY))
        label.version, label.updated_at = new_version, now
        label.save(update_fields=["verdict", "critique", "details", "version", "updated_at"])
    decision_transition_record(
        trial_id=trial.id, before=before, reviewer=reviewer, label_version=new_version, cause="undo"
    )
    trust_recheck(
        trial_ids=[trial.id], by=reviewer, change=f"an undo of {_change_text(reviewer, trial)}"
    )
    return label if restored is not None else None
