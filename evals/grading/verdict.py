"""The overall verdict of a trial, defined once: "every gating grader passed".

Codes: ``PASS``, ``FAIL``, ``ERRORED`` grade, ``MISSING`` grade, ``PIPELINE`` error,
``PENDING`` and ``CANCELLED`` trials. The rule is a three-valued AND over the gating graders:
FAIL if any failed; else ERRORED if any errored; else MISSING if one is absent; else PASS.
It has two forms that must agree (``tests/flows/test_verdict_rule.py``): numpy
(``grader_codes``, ``overall_codes``) and SQL (``trial_verdict_annotations``).
``case_tally`` counts only PASS and FAIL as graded; errored grades leave both sides and are
counted. A "not judged" grade (``Grade.Status.NOT_JUDGED``) is never a fail of the judge:
the trial fails through the gating deterministic grade that made the ladder skip."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from django.db import models
from django.db.models.expressions import BaseExpression
from django.db.models.functions import Coalesce

from evals.models import Grade

PASS, FAIL, ERRORED, MISSING, PIPELINE, PENDING = 1, 0, -1, -2, -3, -4
# A trial cancelled before it ran: not pending (nothing will run it), never graded.
CANCELLED = -5


@dataclass(frozen=True)
class CaseTally:
    """Per-case counts (numpy int arrays, one entry per case) for one grader or overall."""

    passed: np.ndarray
    graded: np.ndarray
    grade_errors: np.ndarray
    not_graded: np.ndarray
    pipeline_errors: np.ndarray
    pending: np.ndarray
    cancelled: np.ndarray


def case_tally(codes: np.ndarray, case_idx: np.ndarray, n_cases: int) -> CaseTally:
    """Count outcome codes per case: the one place where errored grades leave both the
    numerator and the denominator (``graded`` counts PASS and FAIL only)."""

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(case_idx[mask], minlength=n_cases)

    passed = count(codes == PASS)
    return CaseTally(
        passed=passed,
        graded=passed + count(codes == FAIL),
        grade_errors=count(codes == ERRORED),
        not_graded=count(codes == MISSING),
        pipeline_errors=count(codes == PIPELINE),
        pending=count(codes == PENDING),
        cancelled=count(codes == CANCELLED),
    )


def gating_keys(pairs: Iterable[tuple[str, bool]], seen: Mapping[str, bool]) -> list[str]:
    """The graders deciding a run's overall verdicts: those of its set (``pairs``: ``(key,
    gating)``) that gate, then graders outside the set (``seen``: key -> any gating grade on
    the run's ok trials) that gate, such as a labels import. The set alone decides its own keys."""
    by_set = dict(pairs)
    return [k for k, gates in by_set.items() if gates] + [
        k for k, gates in seen.items() if k not in by_set and gates
    ]


def grader_codes(
    *, trial_codes: np.ndarray, trial_pos: np.ndarray, grade_codes: np.ndarray
) -> np.ndarray:
    """One grader's code per trial: ``trial_pos`` is each grade's index into ``trial_codes``,
    ``grade_codes`` its stored code (1, 0, -1, -2). A trial not ok keeps its own code; an ok
    trial without a grade is MISSING; of several grades, the last wins."""
    code = np.where(trial_codes == PASS, MISSING, trial_codes)
    ok = trial_codes[trial_pos] == PASS
    pos, values = trial_pos[ok], grade_codes[ok]
    last = np.full(code.size, -1)  # per trial, the index of its last grade (-1: none)
    np.maximum.at(last, pos, np.arange(pos.size))
    graded = last >= 0
    code[graded] = values[last[graded]]
    return code


def overall_codes(gating: list[np.ndarray], trial_codes: np.ndarray) -> np.ndarray:
    """Overall code per trial from the gating graders' codes and ``trial_codes``."""
    if not gating:
        return np.where(trial_codes == PASS, MISSING, trial_codes)
    stacked = np.vstack(gating)
    out = np.full(trial_codes.shape, PASS)
    out[(stacked == MISSING).any(axis=0)] = MISSING
    out[(stacked == ERRORED).any(axis=0)] = ERRORED
    out[(stacked == FAIL).any(axis=0)] = FAIL
    return np.where(trial_codes == PASS, out, trial_codes)


def trial_verdict_annotations(keys: tuple[str, ...]) -> dict[str, BaseExpression]:
    """Annotations deciding a Trial queryset's overall verdict in SQL for gating graders ``keys``
    (the rule of ``overall_codes``): fail, else errored, else pass (every gating grader passed),
    else missing. Trials that are not ok have no verdict."""
    gating = Grade.objects.filter(trial=models.OuterRef("pk"), grader__in=keys)
    passed_count = (
        gating.filter(status=Grade.Status.OK, passed=True)
        .order_by()
        .values("trial")
        .annotate(c=models.Count("id"))
        .values("c")
    )
    return {
        "v_has_fail": models.Exists(gating.filter(status=Grade.Status.OK, passed=False)),
        "v_has_grade_error": models.Exists(gating.filter(status=Grade.Status.ERROR)),
        "v_gating_passed": Coalesce(models.Subquery(passed_count), 0),
    }
