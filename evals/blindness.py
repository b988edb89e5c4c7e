"""Blind reviewing: what a reviewer may not see while they still have labeling to do, the one
rule every page, export and API applies.

Engineers, leads and superusers see everything (``sees_everything``); anyone else sees only
their own labels (``labels_visible_to``), and while they have an unlabeled item in a
calibration set, every trial of that set's groups is blind for them (``blind_for``): no
grade at all (``grades_visible_to``). A group is every case with the same input and context
(``Case.input_hash``): other attempts, a pair's other side, edited versions, other runs.

Blindness is applied in SQL as a join on the trial's case (``Blind.trials_q``), never a list
of trial ids. evals reaches labels through ``Trial`` relations and never imports labeling."""

from __future__ import annotations

from dataclasses import dataclass

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
    model = Trial._meta.get_field(name).related_model
    assert isinstance(model, type)  # a relation of an installed model: resolved, a class
    return model


@dataclass(frozen=True)
class Blind:
    """The trials blind for one user: case ``input_hash`` in ``groups``; falsy when none."""

    groups: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.groups)

    def trials_q(self, path: str = "") -> models.Q:
        """Q matching the blind trials of a queryset reaching the trial by ``path``
        (``""`` on Trial, ``"trial__"`` on Grade or Label); matches nothing when empty."""
        return models.Q(**{f"{path}case__input_hash__in": sorted(self.groups)})

    def holds(self, case) -> bool:
        """True when the trials of ``case`` (a loaded ``Case``) are blind."""
        return case.input_hash in self.groups


NOT_BLIND = Blind()


def blind_for(user) -> Blind:
    """The input hashes of calibration sets ``user`` has not fully labeled; one query."""
    if sees_everything(user):
        return NOT_BLIND
    item_model, label_model = _related("calibration_items"), _related("labels")
    mine = label_model._default_manager.filter(
        reviewer_id=user.pk, trial_id=models.OuterRef("trial_id")
    )
    open_sets = (
        item_model._default_manager.annotate(done=models.Exists(mine))
        .filter(done=False)
        .values("calibration_set_id")
    )
    groups = (
        item_model._default_manager.filter(calibration_set_id__in=open_sets)
        .order_by()
        .values_list("trial__case__input_hash", flat=True)
        .distinct()
    )
    return Blind(frozenset(groups))


def blind_trial_ids(user) -> frozenset[int]:
    """Ids of every trial blind for ``user`` (one query); surfaces use ``trials_q()`` instead."""
    blind = blind_for(user)
    if not blind:
        return frozenset()
    return frozenset(Trial.objects.filter(blind.trials_q()).values_list("id", flat=True))


def grades_visible_to(qs: models.QuerySet, user, *, blind: Blind | None = None) -> models.QuerySet:
    """``qs`` (Grades) without any grade of ``user``'s blind trials (``blind``, when the
    caller already has ``blind_for(user)``); unchanged for engineers and leads."""
    blind = blind_for(user) if blind is None else blind
    if not blind:
        return qs
    return qs.exclude(blind.trials_q("trial__"))


def labels_visible_to(qs: models.QuerySet, user) -> models.QuerySet:
    """``qs`` (Labels) as ``user`` may read it: all for engineers and leads, else their own."""
    if sees_everything(user):
        return qs
    return qs.filter(reviewer_id=user.pk)


def grades_prefetch(user, *, blind: Blind | None = None) -> models.Prefetch:
    """Prefetch of a trial's grades (judge joined) as ``user`` may see them."""
    qs = Grade.objects.select_related("judge_version__judge").order_by("grader")
    return models.Prefetch("grades", queryset=grades_visible_to(qs, user, blind=blind))


def labels_prefetch(user) -> models.Prefetch:
    """Prefetch of a trial's labels (reviewer joined, oldest first) as ``user`` may see them."""
    qs = _related("labels")._default_manager.select_related("reviewer").order_by("created_at")
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


# Every figure computed from verdicts: with the rows a reviewer can see, a run total gives
# the hidden trials' verdicts by subtraction (9 gold passes in 12, 9 among the 11 visible).
REPORT_BLIND_PARTS = (
    *REPORT_PER_TRIAL_PARTS,
    "overall",  # pass rate, passed / graded, pass@k and pass^k
    "graders",
    "decisions",  # contract accept / reject / review counts
    "cost_quality",  # cost per passing trial, pass rate per dollar
)


def blind_run_ids(user, *, run_ids) -> frozenset[int]:
    """The ids among ``run_ids`` of runs holding a trial blind for ``user`` (their verdict totals
    are withheld: ``REPORT_BLIND_PARTS``). One query, none when nothing is blind."""
    blind = blind_for(user)
    if not blind:
        return frozenset()
    return frozenset(
        Trial.objects.filter(blind.trials_q(), run_id__in=list(run_ids))
        .order_by()
        .values_list("run_id", flat=True)
        .distinct()
    )


def run_is_blind(user, run) -> bool:
    """True when ``run`` holds a trial blind for ``user``: the parts of its report in
    ``REPORT_BLIND_PARTS`` would show that trial's verdicts."""
    return comparison_is_blind(user, run)


BLIND_COMPARISON = (
    "hidden while you label: a trial of this comparison shares its input with an item of a "
    "calibration set you have not finished labeling, and its per-case figures would show "
    "verdicts or gold labels; it is back once you have labeled every item of the set"
)


def comparison_is_blind(user, *runs) -> bool:
    """True when any of ``runs`` holds a trial blind for ``user``: a comparison's counts would
    repeat its verdicts (``BLIND_COMPARISON`` tells the user)."""
    blind = blind_for(user)
    return bool(blind) and Trial.objects.filter(blind.trials_q(), run__in=runs).exists()
