"""Reviewing a contract's ``review`` trials (docs/contracts.md) in a review queue, a
calibration set of ``design`` ``{"kind": "contract_review", "dimensions": [...]}``. A review
is a label (``label_submit``), ``pass`` only when every dimension passed, with
``details.contract_review``; it holds only for the output whose SHA-256 it names.
"""

from __future__ import annotations

from django.db import transaction

from core.errors import DomainError
from core.roles import ENGINEER, LEAD, REVIEWER, role_require
from evals.grading.contract.decisions import REVIEW, output_hash, run_decisions
from evals.models import Grade, Run, Trial
from labeling.labels import CRITIQUE_MAX, label_submit
from labeling.models import CalibrationItem, CalibrationSet, Label

REVIEW_KIND = "contract_review"
VERDICTS = ("pass", "fail")


def review_dimensions(calibration_set: CalibrationSet) -> list[str]:
    """The review dimensions of a review queue; ``[]`` for any other calibration set."""
    design = calibration_set.design or {}
    if design.get("kind") != REVIEW_KIND:
        return []
    return [str(d) for d in design.get("dimensions") or []]


def review_set_create(*, run: Run, by) -> CalibrationSet:
    """A review queue of ``run``'s trials in ``review``, by case and attempt; its dimensions are
    the open ones of their contract grades (engineers and leads). Raises PermissionDenied;
    DomainError (field ``run``) when none is in review.
    """
    role_require(by, ENGINEER, LEAD, action="starting a review")
    decisions = run_decisions(run=run)
    trial_ids = [t.trial_id for t in decisions.trials.values() if t.decision == REVIEW]
    if not trial_ids:
        raise DomainError(f"run {run.name!r} has no trial in review", field="run")
    dimensions: list[str] = []
    for details in Grade.objects.filter(
        trial_id__in=trial_ids, grader__in=decisions.keys
    ).values_list("details", flat=True):
        for name in (details or {}).get("review") or []:
            if name not in dimensions:
                dimensions.append(name)
    if not dimensions:
        raise DomainError("the contract names no review dimension", field="run")
    with transaction.atomic():
        cset = CalibrationSet.objects.create(
            name=f"review: {run.name}",
            suite=run.suite,
            run=run,
            size=len(trial_ids),
            design={"kind": REVIEW_KIND, "dimensions": dimensions},
            created_by=by,
        )
        CalibrationItem.objects.bulk_create(
            CalibrationItem(calibration_set=cset, trial_id=tid, position=i)
            for i, tid in enumerate(trial_ids)
        )
    return cset


def review_submit(
    *,
    calibration_set: CalibrationSet,
    trial: Trial,
    reviewer,
    dimensions: dict[str, dict[str, str]],
    reviewed_hash: str,
) -> Label:
    """Save ``reviewer``'s review: ``dimensions`` maps each dimension to ``{"verdict",
    "critique"}``; ``reviewed_hash`` is the output hash shown. Raises PermissionDenied;
    DomainError on ``dimensions.<name>`` (missing, unknown, bad verdict),
    ``dimensions.<name>.critique`` (too long; a fail needs one), ``output_hash`` (code
    ``conflict``).
    """
    role_require(reviewer, REVIEWER, LEAD, action="reviewing")
    expected = review_dimensions(calibration_set)
    if not expected:
        raise DomainError("not a review queue", field="calibration_set")
    for name in dimensions:
        if name not in expected:
            raise DomainError(f"unknown dimension (known: {expected})", field=f"dimensions.{name}")
    answers: dict[str, dict[str, str]] = {}
    for name in expected:
        answer = dimensions.get(name)
        verdict = answer.get("verdict") if isinstance(answer, dict) else None
        if not isinstance(answer, dict) or verdict not in VERDICTS:
            raise DomainError("answer pass or fail", field=f"dimensions.{name}")
        critique = str(answer.get("critique") or "").strip()
        if len(critique) > CRITIQUE_MAX:
            raise DomainError(
                f"longer than {CRITIQUE_MAX} characters", field=f"dimensions.{name}.critique"
            )
        if verdict == "fail" and not critique:
            raise DomainError("say why it fails", field=f"dimensions.{name}.critique")
        answers[name] = {"verdict": verdict, "critique": critique}
    with transaction.atomic():
        current = Trial.objects.select_for_update().only("id", "output").get(pk=trial.pk)
        if output_hash(current.output) != reviewed_hash:
            raise DomainError(
                "the output changed since it was shown; review it again",
                field="output_hash",
                code="conflict",
            )
        if not CalibrationItem.objects.filter(
            calibration_set=calibration_set, trial=current
        ).exists():
            raise DomainError("the trial is not in this review queue", field="trial")
        passed = all(a["verdict"] == "pass" for a in answers.values())
        critique = "\n".join(
            f"{name}: {a['verdict']}" + (f" — {a['critique']}" if a["critique"] else "")
            for name, a in answers.items()
        )
        # The review is the label's: written with it (and with each revision, so an undo
        # restores the review of the save it goes back to). A frozen label (the reviewer
        # finished the queue) keeps its review: the new one is the flagged revision's.
        return label_submit(
            trial=current,
            reviewer=reviewer,
            verdict="pass" if passed else "fail",
            critique=critique[:CRITIQUE_MAX],
            calibration_set=calibration_set,
            review={"output_hash": reviewed_hash, "dimensions": answers},
        )
