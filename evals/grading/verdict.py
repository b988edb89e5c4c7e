"""The overall verdict of a trial, defined once: "every gating grader passed".

Outcome codes (``PASS``, ``FAIL``, ``ERRORED`` grade, ``MISSING`` grade, ``PIPELINE`` error,
``PENDING`` trial, ``CANCELLED`` trial: never run, so neither pending nor graded) and the
rule as a three-valued AND over the gating graders: FAIL if any gating grade failed; else
ERRORED if any errored; else MISSING if one is absent; else PASS. An errored gating grade
can never make a pass. The rule has two forms that must agree
(``tests/flows/test_verdict_rule.py`` checks them on random runs): numpy codes
(``grader_codes`` per grader, then ``overall_codes``, for the run report and the
comparison) and SQL annotations
(``trial_verdict_annotations``, for the run list's aggregates). ``case_tally`` turns codes
into per-case counts: only PASS and FAIL are graded; errored grades leave both numerator and
denominator and are counted (fault A1). A "not judged" grade (a judge rung the ladder
skipped, ``Grade.Status.NOT_JUDGED``) reads as MISSING in the numpy form and as neither a
pass, a fail nor an error in the SQL form: never a fail of the judge; the trial is still a
FAIL overall through the gating deterministic grade that made the ladder skip."""

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
    """The graders whose grades decide a run's overall verdicts: those of the run's grader
    set (``pairs``: ``(key, gating)`` in set order) that gate by the set, then each grader
    outside the set that graded the run's readable ok trials (``seen``: key -> whether any
    of those grades is stored as gating) when one of its grades gates (a gating grader
    added after the run, such as an import of labels). Keys of ``seen`` in the set are
    decided by the set alone."""
    by_set = dict(pairs)
    return [k for k, gates in by_set.items() if gates] + [
        k for k, gates in seen.items() if k not in by_set and gates
    ]


def grader_codes(
    *, trial_codes: np.ndarray, trial_pos: np.ndarray, grade_codes: np.ndarray
) -> np.ndarray:
    """One grader's code per trial from its grades: ``trial_pos`` is each grade's index
    into ``trial_codes`` and ``grade_codes`` its stored code (1 pass, 0 fail, -1 errored,
    -2 not judged: already the outcome codes). A trial that did not finish ok keeps its own
    code and its grades do not count; an ok trial without a grade is MISSING; of several
    grades of one trial, the last one wins."""
    code = np.where(trial_codes == PASS, MISSING, trial_codes)
    ok = trial_codes[trial_pos] == PASS
    pos, values = trial_pos[ok], grade_codes[ok]
    last = np.full(code.size, -1)  # per trial, the index of its last grade (-1: none)
    np.maximum.at(last, pos, np.arange(pos.size))
    graded = last >= 0
    code[graded] = values[last[graded]]
    return code


def overall_codes(gating: list[np.ndarray], trial_codes: np.ndarray) -> np.ndarray:
    """Overall code per trial from the gating graders' codes (see the module rules);
    ``trial_codes`` holds PIPELINE/PENDING/CANCELLED for trials that did not finish ok, else
    PASS."""
    if not gating:
        return np.where(trial_codes == PASS, MISSING, trial_codes)
    stacked = np.vstack(gating)
    out = np.full(trial_codes.shape, PASS)
    out[(stacked == MISSING).any(axis=0)] = MISSING
    out[(stacked == ERRORED).any(axis=0)] = ERRORED
    out[(stacked == FAIL).any(axis=0)] = FAIL
    return np.where(trial_codes == PASS, out, trial_codes)


def trial_verdict_annotations(keys: tuple[str, ...]) -> dict[str, BaseExpression]:
    """Annotations on a Trial queryset deciding its overall verdict in the database, for a
    run whose gating graders are ``keys`` (the rule of ``evals.grading.verdict.overall_codes``):

    1. fail — the trial is ok and some gating grade is ok with ``passed = False``;
    2. errored — else, some gating grade errored (left out of rates, counted);
    3. pass — else, every gating grader has a passing grade (``v_gating_passed = len(keys)``);
    4. missing — otherwise (a gating grade is absent, or there are no gating graders).
    Trials that are not ok (pipeline error, pending, cancelled) have no verdict.
    """
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
