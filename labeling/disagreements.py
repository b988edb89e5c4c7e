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


def disagreement_queue_create(
    *, run: Run, by, kind: str = "", label: str = ""
) -> tuple[CalibrationSet, bool]:
    """A review queue of ``run``'s disagreeing agent trials: all of them, those of one
    ``kind`` (``right_outcome_wrong_path`` or ``wrong_outcome_expected_path``), or one group
    (``kind`` and the group's ``label`` as the report shows it), in trial order.
    Returns ``(queue, created)``: a queue of this run for the same kind and group holding
    exactly these trials is reused (``created`` False), so a double-clicked button or a
    second engineer sending the same group gives the reviewers one queue, not two (the run
    row is locked while looking, so two requests at once make one queue).
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
    design = {"kind": DISAGREEMENT_QUEUE_KIND, "disagreement": kind, "group": label}
    wanted = sorted(trial_ids)
    with transaction.atomic():
        Run.objects.select_for_update().filter(id=run.id).first()
        sets = CalibrationSet.objects.filter(run=run, design__kind=DISAGREEMENT_QUEUE_KIND)
        for existing in sets.order_by("id"):
            if existing.design != design:
                continue
            held = sorted(existing.items.values_list("trial_id", flat=True))
            if held == wanted:
                return existing, False
        cset = CalibrationSet.objects.create(
            name=f"disagreements: {run.name}: {name}"[:200],
            suite=run.suite,
            run=run,
            size=len(trial_ids),
            design=design,
            created_by=by,
        )
        CalibrationItem.objects.bulk_create(
            CalibrationItem(calibration_set=cset, trial_id=tid, position=i)
            for i, tid in enumerate(wanted)
        )
    return cset, True
