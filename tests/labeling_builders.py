"""Builders for the labeling and calibration page tests: a fabricated run whose trials a
judge version has graded, and a calibration set over it."""

from __future__ import annotations

from evals.models import Case, Grade, Run, Suite, Trial, TrialPair
from judges.models import Judge, JudgeRun, JudgeVersion
from labeling.models import CalibrationItem, CalibrationSet

JUDGE_REASON = "JUDGE-REASONING-{i:02d}: the answer cites the refund policy"


def judged_run(
    n: int = 30,
    *,
    judge_fails: int = 10,
    suite_name: str = "support",
    run_name: str = "r1",
    judge_name: str = "strict",
    outputs: list[str] | None = None,
) -> tuple[Run, JudgeVersion, list[Trial]]:
    """A suite of ``n`` cases (keys c01..), one ok trial each, graded by a recorded judge
    version: trials 1..judge_fails FAIL, the rest PASS; every grade's reason is
    ``JUDGE_REASON`` (so a test can look for it in a page). Returns run, version, trials
    in case-key order."""
    suite = Suite.objects.create(name=suite_name)
    run = Run.objects.create(
        suite=suite,
        name=run_name,
        target_kind="imported",
        status=Run.Status.SUCCEEDED,
        trials_total=n,
        trials_finished=n,
    )
    judge = Judge.objects.create(name=judge_name, kind=Judge.Kind.RECORDED)
    version = JudgeVersion.objects.create(judge=judge, number=1, model="judge-model", protocol="p1")
    trials = []
    for i in range(1, n + 1):
        case = Case.objects.create(
            suite=suite,
            key=f"c{i:02d}",
            input=f"Question {i}: may I get a refund?",
            expected=f"expected answer {i}",
            context=[{"id": f"doc-{i}", "text": f"Refund policy paragraph {i}."}],
            tags=["billing" if i % 2 else "shipping"],
        )
        output = outputs[i - 1] if outputs else f"Answer {i}:\n  yes, within 30 days."
        trial = Trial.objects.create(
            run=run, case=case, attempt=1, status=Trial.Status.OK, output=output
        )
        passed = i > judge_fails
        Grade.objects.create(
            trial=trial,
            grader=version.grader_key,
            judge_version=version,
            status=Grade.Status.OK,
            passed=passed,
            reason=JUDGE_REASON.format(i=i),
        )
        trials.append(trial)
    return run, version, trials


def calibration_set(
    run: Run, version: JudgeVersion, trials: list[Trial], *, name: str = "cal-1"
) -> CalibrationSet:
    """A calibration set holding ``trials`` in the given order (no sampling)."""
    cset = CalibrationSet.objects.create(
        name=name, suite=run.suite, run=run, judge_version=version, size=len(trials), seed=0
    )
    CalibrationItem.objects.bulk_create(
        CalibrationItem(calibration_set=cset, trial=t, position=i) for i, t in enumerate(trials)
    )
    return cset


def pairwise_judge_run(n: int = 6) -> JudgeRun:
    """A finished pairwise judge run over ``n`` cases (keys p01..): the base run's trial
    answers ``BASE-<i>``, the head's ``HEAD-<i>``, one ``TrialPair`` per case (A: base),
    no verdicts. Pairs in case order in ``trial_ids``."""
    suite = Suite.objects.create(name="pairs")
    runs = {
        side: Run.objects.create(
            suite=suite, name=side.lower(), target_kind="imported", status=Run.Status.SUCCEEDED
        )
        for side in ("BASE", "HEAD")
    }
    judge = Judge.objects.create(name="pairwise", kind=Judge.Kind.PAIRWISE)
    version = JudgeVersion.objects.create(judge=judge, number=1, model="m", protocol="p1")
    pair_ids = []
    for i in range(1, n + 1):
        case = Case.objects.create(suite=suite, key=f"p{i:02d}", input=f"Which is better {i}?")
        base, head = (
            Trial.objects.create(
                run=runs[side], case=case, attempt=1, status=Trial.Status.OK, output=f"{side}-{i}"
            )
            for side in ("BASE", "HEAD")
        )
        pair_ids.append(TrialPair.objects.create(case=case, trial_a=base, trial_b=head).id)
    return JudgeRun.objects.create(
        run=runs["HEAD"],
        base_run=runs["BASE"],
        judge_version=version,
        grader=version.grader_key,
        status=JudgeRun.Status.SUCCEEDED,
        trial_ids=pair_ids,
        trials_total=n,
    )
