"""Blind reviewing: what a reviewer may not see while they still have labeling to do.

The one home of the rule every surface applies (trial page, run-case page, comparison case
view, run and labels exports, ``/api/grades/``, ``/api/trials/``, ``/api/labels/``):

1. Engineers and leads (and superusers) see everything (``sees_everything``).
2. Anyone else sees only their own labels and critiques, never another reviewer's nor an
   imported ("dataset gold") label (``labels_visible_to``).
3. While such a user has an unlabeled item in a calibration set, every trial of that set is
   *blind* for them (``blind_trial_ids``): its judge verdicts (grades by a judge version,
   recorded judge verdicts included) and its gold grade (``GOLD_GRADER``, the imported human
   label kept as a grade) are hidden (``grades_visible_to``). Once they have labeled every
   item of the set, its trials are no longer blind for them.

Calibration sets and labels are labeling's models: evals reaches them through the trial's
relations (``Trial.calibration_items``, ``Trial.labels``) and never imports labeling
(docs/architecture.md); labeling's own selectors call this module.
"""

from __future__ import annotations

from django.db import models

from core.roles import ENGINEER, LEAD, user_has_role
from evals.models import Grade, Trial

# The grader key under which an import stores a record's human (gold) label as a grade
# (``interop.importers.labeled``): a gold label, hidden like one.
GOLD_GRADER = "human-label"


def sees_everything(user) -> bool:
    """True for engineers, leads and superusers: they see every verdict and label."""
    return user_has_role(user, ENGINEER, LEAD)


def _related(name: str) -> type[models.Model]:
    return Trial._meta.get_field(name).related_model


def blind_trial_ids(user) -> frozenset[int]:
    """Ids of the trials whose judge verdicts and gold labels ``user`` may not see: every
    trial of each calibration set in which ``user`` has not labeled every item (empty for
    engineers and leads). One query."""
    if sees_everything(user):
        return frozenset()
    item_model, label_model = _related("calibration_items"), _related("labels")
    mine = label_model.objects.filter(reviewer_id=user.pk, trial_id=models.OuterRef("trial_id"))
    open_sets = (
        item_model.objects.annotate(done=models.Exists(mine))
        .filter(done=False)
        .values("calibration_set_id")
    )
    return frozenset(
        item_model.objects.filter(calibration_set_id__in=open_sets).values_list(
            "trial_id", flat=True
        )
    )


def hidden_grade_q() -> models.Q:
    """The grades blindness hides on a blind trial: a judge version's (run or recorded) and
    the gold grade."""
    return models.Q(judge_version__isnull=False) | models.Q(grader=GOLD_GRADER)


def grade_is_hidden_kind(grade: Grade) -> bool:
    """Python form of ``hidden_grade_q`` for a loaded grade."""
    return grade.judge_version_id is not None or grade.grader == GOLD_GRADER


def grades_visible_to(
    qs: models.QuerySet, user, *, blind: frozenset[int] | None = None
) -> models.QuerySet:
    """``qs`` (Grades) without the judge verdicts and gold grades on ``user``'s blind
    trials (``blind``, when the caller already has ``blind_trial_ids(user)``); unchanged
    for engineers and leads."""
    blind = blind_trial_ids(user) if blind is None else blind
    if not blind:
        return qs
    return qs.exclude(hidden_grade_q() & models.Q(trial_id__in=blind))


def labels_visible_to(qs: models.QuerySet, user) -> models.QuerySet:
    """``qs`` (Labels) as ``user`` may read it: every label for engineers and leads, only
    their own for anyone else (a reviewer labels blind)."""
    if sees_everything(user):
        return qs
    return qs.filter(reviewer_id=user.pk)


def grades_prefetch(user, *, blind: frozenset[int] | None = None) -> models.Prefetch:
    """Prefetch of a trial's grades (judge version and judge joined, by grader) as ``user``
    may see them (``blind`` as in ``grades_visible_to``)."""
    qs = Grade.objects.select_related("judge_version__judge").order_by("grader")
    return models.Prefetch("grades", queryset=grades_visible_to(qs, user, blind=blind))


def labels_prefetch(user) -> models.Prefetch:
    """Prefetch of a trial's labels (reviewer joined, oldest first) as ``user`` may see
    them."""
    qs = _related("labels").objects.select_related("reviewer").order_by("created_at")
    return models.Prefetch("labels", queryset=labels_visible_to(qs, user))


# The parts of a run report (``evals.report``) that show single trials' verdicts or a
# grader's reasons: a run with a blind trial leaves them out for that user.
REPORT_PER_TRIAL_PARTS = (
    "cases",
    "slices",
    "failure_reasons",
    "grade_error_reasons",
    "agents",  # per-case 2 x 2 and the disagreeing trials with their reasons
)


def run_is_blind(user, run) -> bool:
    """True when ``run`` holds a trial that is blind for ``user`` (``blind_trial_ids``): its
    report's per-case rows, slices and reasons (``REPORT_PER_TRIAL_PARTS``) would show those
    trials' judge verdicts or gold labels, so they are not shown to that user."""
    return comparison_is_blind(user, run)


BLIND_COMPARISON = (
    "hidden while you label: a trial of this comparison is in a calibration set you have "
    "not finished labeling, and its per-case figures would show judge verdicts or gold "
    "labels; it is back once you have labeled every item of the set"
)


def comparison_is_blind(user, *runs) -> bool:
    """True when any of ``runs`` holds a trial that is blind for ``user``: a comparison's
    decision, per-case rows and exports name each case's pass counts, which repeat those
    trials' judge verdicts or gold labels (``BLIND_COMPARISON`` says so to the user)."""
    blind = blind_trial_ids(user)
    return bool(blind) and Trial.objects.filter(run__in=runs, id__in=blind).exists()
