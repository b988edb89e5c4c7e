"""Label writes: a reviewer's label on a trial, its revisions and its undo (reviewers and
leads). Versions only grow; a frozen label (``labeling.freeze``) takes a flagged revision.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.bounds import TEXT_MAX_CHARS
from core.errors import DomainError, value_shown
from core.roles import LEAD, REVIEWER, role_require
from evals.models import Trial
from labeling.assignment import assignment_check
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
        raise DomainError(f'expected "pass" or "fail", got {value_shown(verdict)}', field="verdict")
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
    """An identical save is a no-op from the current version, or as the retry of the save that
    made it (sent from the version before, not an undo).
    """
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
    """Save ``reviewer``'s label on ``trial``; returns the current label.

    ``expected_version``: the version the form loaded (0: never labeled; None skips the
    check); another is a DomainError (code "conflict", ``current_version``), nothing written.
    A first label freezes the sets holding the trial and records reveals; a frozen label gets
    a flagged revision and keeps its verdict; an identical resubmission changes nothing.
    ``review`` becomes ``details.contract_review``. The label carries ``outcome`` ("created",
    "revised", "flagged", "unchanged") and ``flagged_revision``. Trust and the contract
    decision are rechecked in the same transaction, hence one long function. Raises
    PermissionDenied; DomainError for a bad verdict, a critique too long, a stale form, an
    item assigned to others (``labeling.assignment.assignment_check``, code "conflict").
    """
    role_require(reviewer, REVIEWER, LEAD, action="labeling")
    verdict_check(verdict)
    assignment_check(trial=trial, reviewer=reviewer, calibration_set=calibration_set)
    critique = critique or ""
    if len(critique) > CRITIQUE_MAX:
        raise DomainError(f"longer than {CRITIQUE_MAX} characters", field="critique")
    now = timezone.now()
    with transaction.atomic():
        before = decision_before(trial_id=trial.id)
        current = Label.objects.filter(trial=trial, reviewer=reviewer).first()
        last = _last_revision(trial, reviewer)
        # The label row's version too: a label written without revisions (by hand, by an
        # import) still counts, so versions never go back.
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
    """Undo the reviewer's newest save still in effect (the queue's ``u``), restoring the save
    before it or clearing the label, as a new revision (``undoes``). Returns the label, None
    when cleared or nothing to undo. Raises PermissionDenied; DomainError (code "conflict")
    for a stale ``expected_version`` or a frozen label (field ``trial``).
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
