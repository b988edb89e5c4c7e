"""``evals.comparison.run_data``: ``run_data_build`` against a per-trial brute force, and the
paired read (``runs_data_get``) against one read per run."""

from __future__ import annotations

import random
import uuid
from collections import Counter, defaultdict
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.comparison.run_data import run_data_build, run_data_get, runs_data_get
from evals.grading.grader_set import GraderSet
from evals.models import TopUp, Trial
from tests.comparison_builders import db_run, judge_version

STATUSES = ["ok", "ok", "ok", "ok", "error", "queued", "cancelled"]
META = {
    "label": "S / R",
    "uuid": "",
    "name": "R",
    "suite_name": "S",
    "suite_kind": "regression",
    "status": "succeeded",
    "trials_per_case": 3,
}


def random_rows(seed: int):
    """Random loader rows: cases, trials (some with looks), grades (codes 1/0/-1/-2 from
    stored graders, gating and not, and unknown graders with their own gating flag; judge
    versions trusted and not; grades on unknown and unfinished trials; repeated grades) and
    the judges."""
    rng = random.Random(seed)
    n_cases = rng.randint(0, 6)
    cases = [(100 + i, f"k{i}", f"h{i}", [f"t{i % 2}"]) for i in range(n_cases)]
    looks = rng.random() < 0.5
    trials = []
    for case_id, *_ in cases:
        for _ in range(rng.randint(0, 5)):
            row = (len(trials) + 1, case_id, rng.choice(STATUSES))
            trials.append((*row, rng.randint(0, 2)) if looks else row)
    rng.shuffle(trials)
    specs = [{"key": "a", "kind": "exact"}, {"key": "b", "kind": "exact", "gating": False}]
    if rng.random() < 0.5:
        specs.append({"key": "c", "kind": "judge"})
    judges = {7: ("j-v1", "j", True), 8: ("j-v2", "j", False), 9: ("k-v1", "k", False)}
    keys = [s["key"] for s in specs] + ["x", "y"]
    grades = []
    for _ in range(rng.randint(0, 3 * len(trials) + 1)):
        trial_id = rng.randint(1, len(trials) + 2)  # a few unknown trials
        key = rng.choice(keys)
        jv = rng.choice([None, None, 7, 8, 9])
        grades.append((trial_id, key, rng.choice([1, 1, 0, -1, -2]), rng.random() < 0.5, jv))
    usage = {
        c[0]: {"finished": 2, "cost": Decimal("0.00120000"), "cost_unknown": 1}
        for c in cases
        if rng.random() < 0.7
    }
    return cases, trials, grades, judges, specs, usage


def brute_force(cases, trials, grades, judges, specs):
    """Per case, what the module docstring says, one trial at a time: (verdicts in trial
    order, trials, pipeline errored, grade errored, not graded, provisional, looks) and the
    graders as (key, gating, versions)."""
    pairs = GraderSet.from_stored(specs).gating_pairs
    gating = dict(pairs)
    status = {t[0]: t[2] for t in trials}
    case_of = {t[0]: t[1] for t in trials}
    code_of: dict[tuple, int] = {}
    extra: dict[str, bool] = {}
    versions = defaultdict(set)
    provisional = Counter()
    for trial_id, key, code, g_gating, jv in grades:
        if status.get(trial_id) != "ok":
            continue
        if key not in gating:
            extra[key] = extra.get(key, False) or g_gating
        code_of[trial_id, key] = code  # the later grade wins
        if jv is not None and code != -2:
            versions[key].add(jv)
            if gating.get(key, g_gating) and not judges[jv][2]:
                provisional[case_of[trial_id]] += 1
    gating.update(extra)
    gating_keys = [k for k, g in gating.items() if g]

    def overall(trial):
        if trial[2] != "ok":
            return "pipeline" if trial[2] == "error" else "pending"
        codes = [code_of.get((trial[0], k), -2) for k in gating_keys]
        if not codes:
            return "missing"
        for code, name in ((0, "fail"), (-1, "errored"), (-2, "missing")):
            if code in codes:
                return name
        return "pass"

    out = []
    for case_id, *_ in cases:
        mine = [(overall(t), t[3] if len(t) > 3 else 0) for t in trials if t[1] == case_id]
        top = max((lk for _, lk in mine), default=0)
        looks = tuple(
            (
                sum(v == "pass" and lk == look for v, lk in mine),
                sum(v in ("pass", "fail") and lk == look for v, lk in mine),
            )
            for look in range(top + 1)
        )
        out.append(
            (
                tuple(v == "pass" for v, _ in mine if v in ("pass", "fail")),
                len(mine),
                sum(v == "pipeline" for v, _ in mine),
                sum(v == "errored" for v, _ in mine),
                sum(v in ("missing", "pending") for v, _ in mine),
                provisional[case_id],
                looks,
            )
        )
    graders = [
        (k, gating[k], sorted(judges[v][0] for v in versions[k]))
        for k in [*(k for k, _ in pairs), *sorted(extra)]
    ]
    return out, graders


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_it_builds_what_a_per_trial_brute_force_gives(seed):
    cases, trials, grades, judges, specs, usage = random_rows(seed)
    data = run_data_build(
        meta=META,
        grader_specs=specs,
        cases=cases,
        trials=trials,
        grades=grades,
        judges=judges,
        usage=usage,
    )
    expected, graders = brute_force(cases, trials, grades, judges, specs)
    got = [
        (
            c.verdicts,
            c.trials,
            c.pipeline_errored,
            c.grade_errored,
            c.not_graded,
            c.provisional,
            c.looks,
        )
        for c in data.cases
    ]
    assert got == expected
    assert [
        (g.key, g.gating, sorted((g.judge_version or "").split(", ")) if g.judge_version else [])
        for g in data.graders
    ] == graders
    for case, (case_id, key, digest, tags) in zip(data.cases, cases, strict=True):
        assert (case.key, case.content_hash, case.tags) == (key, digest, tuple(tags))
        u = usage.get(case_id, {})
        assert case.cost_known_usd == Decimal(u.get("cost") or 0)
        assert case.finished == u.get("finished", 0)
    assert all(type(v) is bool for c in data.cases for v in c.verdicts)
    assert all(type(n) is int for c in data.cases for look in c.looks for n in look)


def test_an_unknown_judge_version_on_a_counted_grade_is_an_error():
    with pytest.raises(KeyError):
        run_data_build(
            meta=META,
            grader_specs=[{"key": "a", "kind": "judge"}],
            cases=[(1, "k", "h", [])],
            trials=[(1, 1, "ok")],
            grades=[(1, "a", 1, True, 99)],
            judges={},
            usage={},
        )


def test_it_reads_both_sides_in_the_queries_of_one_run(db):
    v = judge_version(1)
    base = db_run({"c1": "PFE", "c2": "XPP", "c3": "PPP"}, name="B", version=v)
    head = db_run({"c1": "PPP", "c2": "FFX", "c4": "PF"}, name="H", version=judge_version(2))
    for run in (base, head):
        run.suite  # noqa: B018 - joined, as callers do
    with CaptureQueriesContext(connection) as one:
        alone = {run.id: run_data_get(run=run) for run in (base, head)}
    with CaptureQueriesContext(connection) as both:
        together = runs_data_get(runs=[base, head])
    assert together == alone
    assert len(both.captured_queries) == len(one.captured_queries) // 2


def test_it_reads_a_top_up_for_both_sides_as_each_side_reads_it(db):
    base = db_run({"c1": "PF", "c2": "PP"}, name="B")
    head = db_run({"c1": "FF", "c2": "PF"}, name="H")
    top_up = TopUp.objects.create(base=base, head=head, max_trials_per_case=4)
    other = TopUp.objects.create(base=head, head=base, max_trials_per_case=4)
    for run, mark in ((base, top_up), (head, top_up), (head, other)):
        for trial in Trial.objects.filter(run=run, attempt=1, top_up__isnull=True):
            grades = list(trial.grades.all())
            trial.pk, trial.uuid, trial.attempt = None, uuid.uuid4(), 10 + mark.id
            trial.top_up, trial.top_up_round = mark, 1
            trial.save()
            for grade in grades:
                grade.pk, grade.trial = None, trial
                grade.save()
    for top in (None, top_up.id):
        together = runs_data_get(runs=[base, head], top_up=top)
        assert together == {r.id: run_data_get(run=r, top_up=top) for r in (base, head)}
    looks = runs_data_get(runs=[base, head], top_up=top_up.id)[head.id].cases[0].looks
    assert looks == ((0, 2), (0, 1))  # head's c1: F F on its own, F in this top-up's round
