"""The run report corrects a trusted judge's pass rate for the judge's own error
(Rogan–Gladen with its interval), on the page, in ``run_report`` and in its JSON."""

from __future__ import annotations

import json
import math
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from evals.models import Grade
from evals.report.selectors import run_report
from judges.models import Judge, JudgeApproval, JudgeVersion
from stats.correction import corrected_rate_interval
from tests.report_builders import ERR, add_trial, make_run

pytestmark = pytest.mark.django_db

KEY = "judge:j:v1"
# TPR = 9 / (9 + 1) = 0.9, TNR = 8 / (8 + 2) = 0.8
CONFUSION = {
    "judge_pass_human_pass": 9,
    "judge_fail_human_pass": 1,
    "judge_fail_human_fail": 8,
    "judge_pass_human_fail": 2,
}


def _version() -> JudgeVersion:
    judge = Judge.objects.create(name="j", kind=Judge.Kind.RECORDED)
    return JudgeVersion.objects.create(judge=judge, number=1, model="m", protocol="p")


def _approve(version: JudgeVersion, alice) -> JudgeApproval:
    return JudgeApproval.objects.create(
        judge_version=version, approved_by=alice, figures={"n": 20, "confusion": CONFUSION}
    )


def _judged_run(version: JudgeVersion, verdicts: list, *, name: str = "R1"):
    """One case per verdict, N = 1, a judge grader (by ``version``) and an exact grader."""
    keys = [f"c{i:03d}" for i in range(len(verdicts))]
    run = make_run(
        cases=[(k, []) for k in keys],
        name=name,
        graders=[{"key": KEY, "kind": "judge"}, {"key": "exact", "kind": "exact"}],
    )
    for key, verdict in zip(keys, verdicts, strict=True):
        add_trial(run, key, 1, grades={KEY: verdict, "exact": True})
    Grade.objects.filter(trial__run=run, grader=KEY).update(judge_version=version)
    return run


def _seventy_percent(version, **kw):
    return _judged_run(version, [True] * 7 + [False] * 3, **kw)


def _pooled_delta_interval(p: float, n: int) -> tuple[float, float, float]:
    """The old pooled-binomial delta-method interval (stats.correction.corrected_pass_rate),
    written out: TPR 0.9 on 10 human passes, TNR 0.8 on 10 human fails. The report's interval
    must never be narrower than it."""
    tpr, tnr, j = 0.9, 0.8, 0.7
    theta = (p + tnr - 1) / j
    var = (
        p * (1 - p) / n + theta**2 * tpr * (1 - tpr) / 10 + (1 - theta) ** 2 * tnr * (1 - tnr) / 10
    ) / j**2
    half = 1.959963984540054 * math.sqrt(var)
    return theta, max(0.0, theta - half), min(1.0, theta + half)


def _grader(report, key):
    return next(g for g in report.graders if g.key == key)


def test_it_corrects_a_trusted_judges_pass_rate_with_its_interval(alice):
    version = _version()
    _approve(version, alice)
    c = _grader(run_report(run=_seventy_percent(version)), KEY).corrected
    assert (c.observed, c.observed_numerator, c.observed_denominator) == (0.7, 7, 10)
    assert (c.tpr, c.tnr) == (0.9, 0.8)
    # (0.70 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.5 / 0.7
    assert c.corrected == pytest.approx(0.5 / 0.7, abs=1e-12)
    # Clustered by case (ten cases of one verdict each) with TPR and TNR uncertainty (MOVER)
    expected = corrected_rate_interval([1] * 7 + [0] * 3, [1] * 10, tp=9, fn=1, tn=8, fp=2)
    assert (c.ci_low, c.ci_high) == (
        pytest.approx(expected.ci_low),
        pytest.approx(expected.ci_high),
    )
    assert c.method == "rogan-gladen-mover" and c.reason == ""
    theta, low, high = _pooled_delta_interval(0.7, 10)
    assert c.ci_low < theta < c.ci_high
    assert c.ci_low <= low and c.ci_high >= high


def test_its_interval_is_clustered_by_case_and_never_narrower_than_the_raw_one(alice):
    """Two cases always pass, two always fail (5 trials each): the trials are not
    independent, so the corrected interval is at least the raw clustered one over J."""
    version = _version()
    _approve(version, alice)
    keys = ["a", "b", "c", "d"]
    run = make_run(cases=[(k, []) for k in keys], graders=[{"key": KEY, "kind": "judge"}], n=5)
    for key, verdict in zip(keys, [True, True, False, False], strict=True):
        for attempt in range(1, 6):
            add_trial(run, key, attempt, grades={KEY: verdict})
    Grade.objects.filter(trial__run=run, grader=KEY).update(judge_version=version)
    report = run_report(run=run)
    c, raw = _grader(report, KEY).corrected, _grader(report, KEY).pass_rate
    assert (c.observed, c.observed_numerator, c.observed_denominator) == (0.5, 10, 20)
    assert c.ci_high - c.ci_low >= min(1.0, (raw.ci_high - raw.ci_low) / 0.7) - 1e-12
    _, low, high = _pooled_delta_interval(0.5, 20)
    assert c.ci_high - c.ci_low > high - low


def test_it_leaves_errored_judge_verdicts_out_of_the_observed_rate(alice):
    version = _version()
    _approve(version, alice)
    run = _judged_run(version, [True] * 7 + [False] * 3 + [ERR, ERR])
    c = _grader(run_report(run=run), KEY).corrected
    assert (c.observed_numerator, c.observed_denominator) == (7, 10)
    assert c.corrected == pytest.approx(0.5 / 0.7)


def test_it_gives_no_correction_for_an_untrusted_or_revoked_judge(alice):
    version = _version()
    run = _seventy_percent(version)
    c = _grader(run_report(run=run), KEY).corrected
    assert c.corrected is None and c.reason == "the judge version is not trusted"
    approval = _approve(version, alice)
    approval.revoked_at, approval.revoked_by = timezone.now(), alice
    approval.save()
    c = _grader(run_report(run=run), KEY).corrected
    assert c.corrected is None and c.reason == "the judge version is not trusted"


def test_it_has_no_correction_field_for_a_deterministic_grader_or_overall(alice):
    version = _version()
    _approve(version, alice)
    report = run_report(run=_seventy_percent(version))
    assert _grader(report, "exact").corrected is None
    assert report.overall.corrected is None


def test_it_keeps_the_report_query_count_independent_of_run_size(alice):
    version = _version()
    _approve(version, alice)
    small, large = _seventy_percent(version), _judged_run(version, [True, False] * 30, name="R2")
    counts = []
    for run in (small, large):
        run.refresh_from_db()
        with CaptureQueriesContext(connection) as ctx:
            run_report(run=run)
        counts.append(len(ctx.captured_queries))
    # the run loader (5 with judges), reasons (3), judge calls, retried trials, suite, the
    # cost classes (evals.report.costs)
    assert counts[0] == counts[1] <= 12


def test_it_shows_the_corrected_estimate_on_the_run_page(client, alice, carol):
    version = _version()
    _approve(version, alice)
    run = _seventy_percent(version)
    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid})).content.decode()
    assert "Corrected for judge error" in html
    assert '<span class="corrected">71.4%</span>' in html
    assert "from 7/10 with TPR 0.900, TNR 0.800" in html


def test_it_prints_the_corrected_estimate_in_run_report_text_and_json(alice):
    version = _version()
    _approve(version, alice)
    run = _seventy_percent(version)
    out = StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    data = json.loads(out.getvalue(), parse_constant=pytest.fail)
    graders = {g["key"]: g for g in data["graders"]}
    assert graders[KEY]["corrected"]["corrected"] == pytest.approx(0.5 / 0.7)
    assert graders[KEY]["corrected"]["tpr"] == 0.9
    assert graders["exact"]["corrected"] is None
    out = StringIO()
    call_command("run_report", str(run.uuid), stdout=out)
    assert "corrected for judge error (Rogan-Gladen, TPR 0.900, TNR 0.800): 71.4%" in out.getvalue()
