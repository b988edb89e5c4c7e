"""A judge rung the ladder skipped is "not judged": neither a pass nor a fail, in no judge
figure; older placeholder grades (``ok``/``passed = false``) are migrated and re-read."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps

from evals.comparison.run_data import run_data_get
from evals.comparison.run_document import run_document_read
from evals.models import Grade
from interop.run_file import run_export, run_import
from judges.selectors import judge_cost_get
from tests.fakellm import FakeLLM
from tests.judge_builders import make_trials, make_version

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("evals.migrations.0009_grade_not_judged")


def _placeholder(trial, version, **kw) -> Grade:
    """A skipped rung as an older Assay stored it."""
    return Grade.objects.create(
        trial=trial,
        grader="judge",
        judge_version=version,
        status="ok",
        passed=False,
        reason=kw.pop("reason", "not judged: deterministic grader 'a' already failed this trial"),
        details=kw.pop("details", {"decided_by": "a", "skipped": True}),
    )


def test_the_data_migration_turns_old_placeholders_into_not_judged_grades():
    with FakeLLM() as llm:
        version = make_version(llm)
    trials = make_trials(["a", "b", "c", "d"])
    by_reason = _placeholder(trials[0], version, details={})
    by_detail = _placeholder(trials[1], version, reason="skipped")
    real_fail = Grade.objects.create(
        trial=trials[2], grader="judge", judge_version=version, passed=False, reason="FAIL"
    )
    deterministic = Grade.objects.create(
        trial=trials[3], grader="judge", passed=False, reason="not judged: looks alike"
    )
    MIGRATION.placeholders_mark(apps, None)
    got = {g.id: (g.status, g.passed) for g in Grade.objects.all()}
    assert got[by_reason.id] == got[by_detail.id] == ("not_judged", None)
    assert got[real_fail.id] == ("ok", False)
    assert got[deterministic.id] == ("ok", False)  # not a judge grade: left alone
    MIGRATION.placeholders_unmark(apps, None)
    assert Grade.objects.get(id=by_reason.id).passed is False


def test_cost_and_run_files_leave_not_judged_grades_out_and_read_old_placeholders():
    with FakeLLM() as llm:
        version = make_version(llm)
    trials = make_trials(["a", "b"])
    Grade.objects.create(
        trial=trials[0],
        grader="judge",
        judge_version=version,
        status=Grade.Status.NOT_JUDGED,
        passed=None,
        reason="not judged: deterministic grader 'a' already failed this trial",
        details={"decided_by": "a"},
    )
    Grade.objects.create(
        trial=trials[1],
        grader="judge",
        judge_version=version,
        passed=True,
        reason="PASS",
        details={"cost_usd": "0.5"},
    )
    cost = judge_cost_get(judge_version=version)
    assert (cost.grades, str(cost.known_usd)) == (1, "0.5")
    data = run_export(run=trials[0].run)
    exported = [g for c in data["cases"] for t in c["trials"] for g in t["grades"]]
    assert sorted((g["status"], g["passed"]) for g in exported) == [
        ("not_judged", None),
        ("ok", True),
    ]
    # An older file stored the skipped rung as a fail: it is read back as not judged.
    for c in data["cases"]:
        for t in c["trials"]:
            for g in t["grades"]:
                if g["status"] == "not_judged":
                    g.update(status="ok", passed=False, details={"skipped": True})
    data = json.loads(json.dumps(data))
    Grade.objects.all().delete()  # import into a database without the original version
    version.delete()
    run = run_import(data=data, suite_name="S2", name="old file")
    assert sorted(
        Grade.objects.filter(trial__run=run).values_list("status", "passed"), key=str
    ) == sorted([("not_judged", None), ("ok", True)], key=str)


def test_a_run_file_with_not_judged_grades_reads_like_the_database():
    with FakeLLM() as llm:
        version = make_version(llm)
    graders = [
        {"key": "a", "kind": "contains", "config": {"value": "Paris"}},
        {"key": "judge", "kind": "judge", "config": {"judge_version": str(version.uuid)}},
    ]
    trials = make_trials(["Paris", "Lyon", "Paris"], graders=graders)
    Grade.objects.create(trial=trials[0], grader="a", passed=True, reason="ok")
    Grade.objects.create(trial=trials[1], grader="a", passed=False, reason="missing")
    Grade.objects.create(trial=trials[2], grader="a", passed=True, reason="ok")
    Grade.objects.create(
        trial=trials[0], grader="judge", judge_version=version, passed=True, reason="PASS"
    )
    Grade.objects.create(
        trial=trials[1],
        grader="judge",
        judge_version=version,
        status=Grade.Status.NOT_JUDGED,
        passed=None,
        reason="not judged: deterministic grader 'a' already failed this trial",
        details={"decided_by": "a", "skipped": True},
    )
    Grade.objects.create(
        trial=trials[2], grader="judge", judge_version=version, passed=False, reason="FAIL"
    )
    run = trials[0].run
    from_db = run_data_get(run=run)
    from_file = run_document_read(json.loads(json.dumps(run_export(run=run))), field="head")
    for data in (from_db, from_file):
        assert (sum(c.passed for c in data.cases), sum(c.graded for c in data.cases)) == (1, 3)
