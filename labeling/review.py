"""Review as a first-class step after a contract (docs/contracts.md): the trials a contract
left in ``review`` join a review queue, which is a labeling queue (a calibration set whose
``design`` says ``{"kind": "contract_review", "dimensions": [...]}``), and a reviewer
answers every review dimension pass or fail with a critique.

A review is the reviewer's label on the trial (``labeling.labels.label_submit``: the same
versioning, revisions and blindness), its verdict ``pass`` only when every dimension
passed, and its ``details.contract_review`` = ``{"output_hash", "dimensions": {name:
{"verdict", "critique"}}}``. It attaches to the exact output reviewed (its SHA-256): the
decision (``evals.grading.contract.decisions``) reads ``accepted`` only while the output
still has that hash and every review of it (the labels of record) passes every dimension;
an undo or a relabel changes the label of record and so the decision, and the move is
recorded (``labeling.decision_history``).
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
    """A review queue of ``run``'s trials whose contract decision is ``review``, in case
    and attempt order; its dimensions are the open ones their contract grades name
    (engineers and leads). Raises PermissionDenied, or ``DomainError`` (field ``run``) when
    no trial is in review."""
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
    """Save ``reviewer``'s review of ``trial`` in the review queue ``calibration_set``:
    ``dimensions`` maps every dimension of the queue to ``{"verdict": "pass"|"fail",
    "critique": str}``; ``reviewed_hash`` is the output hash the reviewer was shown.

    Raises PermissionDenied (reviewers and leads), or ``DomainError``: a missing or unknown
    dimension or a bad verdict (field ``dimensions.<name>``), a critique too long, a fail
    without a critique (``dimensions.<name>.critique``), or an output that changed since it
    was shown (``output_hash``, code ``conflict``: a changed output needs a new review).
    Once the reviewer has reviewed every item of the queue their labels there are frozen
    (``labeling.freeze``): a later review is a flagged revision (outcome "flagged") and the
    label of record keeps its review.
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
