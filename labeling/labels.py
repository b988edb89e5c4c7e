"""Label writes: a reviewer's label on a trial, its revisions and its undo.

Reviewers and leads only (``PermissionDenied`` otherwise). Every change is a new
``LabelRevision`` and versions only grow; a frozen label (``labeling.freeze``) takes a
flagged revision instead. A change of the label of record rechecks the trial's judge
approvals (``labeling.trust_recheck``) and its contract decision
(``labeling.decision_history``) in the same transaction.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.bounds import TEXT_MAX_CHARS
from core.errors import DomainError
from core.roles import LEAD, REVIEWER, role_require
from evals.models import Trial
from labeling.decision_history import (
    REVIEW_KEY,
    decision_before,
    decision_transition_record,
    details_with_review,
)
from labeling.freeze import FROZEN_TEXT, label_is_frozen
from labeling.guidelines import guidelines_current_id
from labeling.models import CalibrationSet, Label, LabelRevision
from labeling.trust_recheck import trust_recheck

VERDICTS = tuple(Label.Verdict.values)
CRITIQUE_MAX = TEXT_MAX_CHARS["critique"]  # core.bounds: the one table of text limits


def verdict_check(verdict: str) -> str:
    if verdict not in VERDICTS:
        raise DomainError(f"expected 'pass' or 'fail', got {verdict!r}", field="verdict")
    return verdict


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
