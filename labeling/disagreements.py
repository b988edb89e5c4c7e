"""Agent trials whose outcome (``state`` graders) and path (``trajectory`` graders) disagree
(``evals.report.agents``, docs/agents.md), sent to a labeling queue: a calibration set
whose ``design`` is ``{"kind": "agent_disagreements", "disagreement", "group"}``.
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
    """A review queue of ``run``'s disagreeing agent trials: all, one ``kind`` or one group
    (``kind`` and ``label``); returns ``(queue, created)``, reusing an equal queue (run row
    locked). Engineers and leads: PermissionDenied; DomainError on ``kind`` or ``run``.
    """
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
