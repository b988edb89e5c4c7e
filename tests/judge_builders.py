"""Builders for judge tests: trials written directly, judge versions on the fake server, and
scripted judges that read the fenced material of a request."""

from __future__ import annotations

import json
import re

from django.contrib.auth.models import Group, User

from evals.models import Case, Grade, Run, Suite, Trial
from judges.grading import judge_grade_trials
from judges.models import JudgeApproval, JudgeRun
from judges.versions import judge_version_create

FENCE_RE = re.compile(r"<<<DATA-([0-9a-f]+)>>>\n(.*?)\n<<<END-\1>>>", re.DOTALL)


def make_trials(
    outputs: list[str],
    *,
    expected="Paris",
    context=None,
    suite="S",
    run="R1",
    input_text="What is the capital of France?",
    graders=None,
) -> list[Trial]:
    """One ok trial per output, each on its own case ``c<i>`` of a new run."""
    s, _ = Suite.objects.get_or_create(name=suite)
    r = Run.objects.create(
        suite=s,
        name=run,
        target_kind="callable",
        graders=graders or [],
        status=Run.Status.SUCCEEDED,
    )
    trials = []
    for i, output in enumerate(outputs, start=1):
        case, _ = Case.objects.get_or_create(
            suite=s,
            key=f"c{i}",
            defaults={"input": input_text, "expected": expected, "context": context or []},
        )
        trials.append(Trial.objects.create(run=r, case=case, attempt=1, status="ok", output=output))
    return trials


def judge_run_in_flight(trials: list[Trial], *, judge_name: str, graded: int = 0) -> JudgeRun:
    """A running judge run over ``trials`` (its worker elsewhere: the test writes its rows),
    ``graded`` of them graded so far, with a rubric version at an endpoint nothing answers."""
    version, _ = judge_version_create(
        judge_name=judge_name,
        kind="rubric",
        model="judge-model",
        base_url="http://127.0.0.1:9/v1",
        prompt_template="",
        params={},
        output_schema={},
    )
    return JudgeRun.objects.create(
        run=trials[0].run,
        judge_version=version,
        grader=version.grader_key,
        status="running",
        trial_ids=[t.id for t in trials],
        trials_total=len(trials),
        trials_graded=graded,
    )


def make_version(llm, *, kind="rubric", name="j", model="judge-model", **params):
    version, _ = judge_version_create(
        judge_name=name,
        kind=kind,
        model=model,
        base_url=llm.base_url,
        prompt_template="",
        params={"max_attempts": 4, **params},
        output_schema={},
    )
    return version


def user_text(body: dict) -> str:
    return [m for m in body["messages"] if m["role"] == "user"][0]["content"]


def fenced(body: dict) -> list[str]:
    """The fenced blocks of the request's user message, in order."""
    return [m.group(2) for m in FENCE_RE.finditer(user_text(body))]


def verdict_json(verdict: str, reasoning: str = "scripted") -> str:
    return json.dumps({"reasoning": reasoning, "verdict": verdict})


def trust(version, *, figures: dict | None = None, by=None):
    """Make ``version`` trusted the way the product does: an active ``JudgeApproval`` (by
    ``by``, else a lead named "trust-lead" made here), with ``figures`` (default empty)."""

    if by is None:
        by, created = User.objects.get_or_create(username="trust-lead")
        if created:
            by.groups.add(Group.objects.get(name="lead"))
    approval = JudgeApproval.objects.create(
        judge_version=version, approved_by=by, figures=figures or {}
    )
    version.trusted = True
    return approval


def judge_grade_one(*, trial, judge_version, sleep=None):
    """Grade one trial with ``judges.grading.judge_grade_trials``; its grade, or None."""
    judge_grade_trials(trials=[trial], judge_version=judge_version, sleep=sleep)
    return Grade.objects.filter(trial=trial, grader=judge_version.grader_key).first()
