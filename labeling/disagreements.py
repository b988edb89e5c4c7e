"""Agent trials whose outcome and path disagree, sent to the reviewers' queue (docs/agents.md).

The run report lists the trials where the ``state`` graders (outcome) and the ``trajectory``
graders (path) disagree, grouped by reason (``evals.report.agents``). One click sends them,
all or one group, to a new labeling queue: a calibration set whose ``design`` says
``{"kind": "agent_disagreements", "disagreement": <kind or "">, "group": <label or "">}``.
Reviewers label each trial pass or fail with a critique in the ordinary queue (blind, as
every queue): the human answer to "is the spec incomplete, or the agent wrong?".
"""

from __future__ import annotations

from django.db import transaction

from core.errors import DomainError
from core.roles import ENGINEER, LEAD, role_require
from evals.models import Run
from evals.report.agents import DISAGREEMENT_KINDS, disagreement_trial_ids, run_disagreements
from labeling.models import CalibrationItem, CalibrationSet

DISAGREEMENT_QUEUE_KIND = "agent_disagreements"
_NAMES = {
    "right_outcome_wrong_path": "right outcome, wrong path",
    "wrong_outcome_expected_path": "wrong outcome, expected path",
}


def disagreement_queue_create(*, run: Run, by, kind: str = "", label: str = "") -> CalibrationSet:
    """A new review queue of ``run``'s disagreeing agent trials: all of them, those of one
    ``kind`` (``right_outcome_wrong_path`` or ``wrong_outcome_expected_path``), or one group
    (``kind`` and the group's ``label`` as the report shows it), in trial order.
    Engineers and leads. Raises PermissionDenied, or ``DomainError``: ``kind`` (unknown,
    or a label without a kind), ``run`` (no ``state`` and ``trajectory`` graders, or no
    disagreement of that kind or group)."""
    role_require(by, ENGINEER, LEAD, action="sending disagreements to review")
    if kind and kind not in DISAGREEMENT_KINDS:
        raise DomainError(f"unknown disagreement kind {kind!r}", field="kind")
    if label and not kind:
        raise DomainError("a group needs its kind", field="kind")
    report = run_disagreements(run=run)
    if report is None:
        raise DomainError(
            f"run {run.name!r} has no state and trajectory graders: no disagreements",
            field="run",
        )
    trial_ids = disagreement_trial_ids(report, kind=kind, label=label)
    if not trial_ids:
        what = f"in group {label!r}" if label else _NAMES.get(kind, "of any kind")
        raise DomainError(f"run {run.name!r} has no disagreement {what}", field="run")
    name = label or _NAMES.get(kind, "outcome and path disagree")
    with transaction.atomic():
        cset = CalibrationSet.objects.create(
            name=f"disagreements: {run.name}: {name}"[:200],
            suite=run.suite,
            run=run,
            size=len(trial_ids),
            design={"kind": DISAGREEMENT_QUEUE_KIND, "disagreement": kind, "group": label},
            created_by=by,
        )
        CalibrationItem.objects.bulk_create(
            CalibrationItem(calibration_set=cset, trial_id=tid, position=i)
            for i, tid in enumerate(sorted(trial_ids))
        )
    return cset
