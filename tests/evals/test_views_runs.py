"""Dashboard pages for runs: permissions per the cast, start/cancel, progress polling,
the case and trial pages (escaping, previews), and the run list's aggregates and queries."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evals import selectors
from evals.models import Baseline, Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from evals.run_status import run_status_shown
from judges.models import Judge, JudgeVersion
from labeling.models import Label
from tests.core.test_api_core import client_for
from tests.judge_builders import trust
from tests.page_text import shows_word

HOSTILE_OUTPUT = "<img src=x onerror=alert(1)>"
HOSTILE_RUN_NAME = "<b onclick=alert(4)>R4</b>"
GRADERS = [{"key": "has-four", "kind": "contains", "config": {"value": "4"}}]


def make_suite(name: str = "arith", n_cases: int = 2) -> Suite:
    suite = Suite.objects.create(name=name)
    for i in range(n_cases):
        Case.objects.create(suite=suite, key=f"c{i + 1}", input=f"What is {i}+4?", expected="4")
    return suite


def make_run(suite: Suite, name: str = "r1", status: str = Run.Status.SUCCEEDED, **kw) -> Run:
    defaults = {
        "target_kind": "simulated",
        "model": "sim-1",
        "graders": GRADERS,
        "trials_total": 0,
        "trials_finished": 0,
    }
    return Run.objects.create(suite=suite, name=name, status=status, **{**defaults, **kw})


def make_trial(
    run: Run,
    case: Case,
    attempt: int = 1,
    *,
    output: str = "4",
    status: str = Trial.Status.OK,
    cost: Decimal | None = Decimal("0.001"),
    passed: bool | None = True,
    grade_status: str = Grade.Status.OK,
) -> Trial:
    trial = Trial.objects.create(
        run=run,
        case=case,
        attempt=attempt,
        output=output,
        status=status,
        cost_usd=cost,
        latency_ms=12.4,
    )
    if status == Trial.Status.OK:
        Grade.objects.create(
            trial=trial,
            grader="has-four",
            status=grade_status,
            passed=None if grade_status == Grade.Status.ERROR else passed,
            reason="unparseable"
            if grade_status == Grade.Status.ERROR
            else ("found 4" if passed else "missing 4"),
        )
    return trial


@pytest.fixture
def run_with_trial(db):
    suite = make_suite()
    run = make_run(suite, status=Run.Status.RUNNING, trials_total=2, trials_finished=1)
    case = suite.cases.get(key="c1")
    trial = make_trial(run, case)
    return run, case, trial


def page_urls(run: Run, case: Case, trial: Trial) -> list[str]:
    return [
        reverse("evals:run-list"),
        reverse("evals:run-new"),
        reverse("evals:run-detail", args=[run.uuid]),
        reverse("evals:run-progress", args=[run.uuid]),
        reverse("evals:run-case", args=[run.uuid, case.uuid]),
        reverse("evals:trial-detail", args=[trial.uuid]),
    ]


# Permissions -------------------------------------------------------------------------------


def test_it_sends_anonymous_visitors_to_login_from_every_page(client, run_with_trial):
    for url in page_urls(*run_with_trial):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith("/accounts/login/?next="), url


def test_it_refuses_every_page_to_an_outsider(client, mallory, run_with_trial):
    client.force_login(mallory)
    for url in page_urls(*run_with_trial):
        assert client.get(url).status_code == 403, url
    run = run_with_trial[0]
    assert client.post(reverse("evals:run-cancel", args=[run.uuid])).status_code == 403


def test_a_reviewer_can_view_every_run_page(client, bob, run_with_trial):
    client.force_login(bob)
    for url in page_urls(*run_with_trial):
        if url == reverse("evals:run-new"):
            continue
        assert client.get(url).status_code == 200, url


def test_it_refuses_start_and_cancel_to_a_reviewer(client, bob, run_with_trial):
    run = run_with_trial[0]
    client.force_login(bob)
    assert client.get(reverse("evals:run-new")).status_code == 403
    assert client.post(reverse("evals:run-new"), {"name": "x"}).status_code == 403
    assert client.post(reverse("evals:run-cancel", args=[run.uuid])).status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_it_hides_start_a_run_from_a_reviewers_navigation(client, bob, carol, db):
    client.force_login(bob)
    assert "Start a run" not in client.get(reverse("evals:run-list")).content.decode()
    client.force_login(carol)
    assert "Start a run" in client.get(reverse("evals:run-list")).content.decode()


# Start a run -------------------------------------------------------------------------------


def start_form(suite: Suite, **overrides) -> dict:
    data = {
        "suite": str(suite.uuid),
        "name": "first",
        "source_version": "abc123",
        "target_kind": "simulated",
        "seed": "7",
        "pass_probability": "0.5",
        "trials_per_case": "3",
        "graders": json.dumps(GRADERS),
        "settings_json": "{}",
    }
    return {**data, **overrides}


def test_an_engineer_starts_a_simulated_run_and_lands_on_its_page(client, carol, db):
    suite = make_suite(n_cases=2)
    client.force_login(carol)
    response = client.post(reverse("evals:run-new"), start_form(suite))
    run = Run.objects.get(suite=suite, name="first")
    assert response.status_code == 302
    assert response.url == reverse("evals:run-detail", args=[run.uuid])
    assert run.started_by == carol
    assert run.target == {"kind": "simulated", "seed": 7, "default_pass_probability": 0.5}
    assert run.trials_per_case == 3
    assert run.trials_total == 6
    assert run.source_version == "abc123"


def test_it_names_the_bad_grader_field_and_starts_nothing(client, carol, db):
    suite = make_suite()
    client.force_login(carol)
    bad = json.dumps([{"key": "k", "kind": "contains", "config": {}, "gating": "false"}])
    response = client.post(reverse("evals:run-new"), start_form(suite, graders=bad))
    assert response.status_code == 200
    assert "graders[0].gating" in response.content.decode()
    assert not Run.objects.exists()


def test_it_refuses_invalid_json_and_an_out_of_range_trial_count(client, carol, db):
    suite = make_suite()
    client.force_login(carol)
    response = client.post(
        reverse("evals:run-new"), start_form(suite, graders="[{", trials_per_case="51")
    )
    body = response.content.decode()
    assert "graders: not valid JSON (line 1, column 3" in body
    assert "Ensure this value is less than or equal to 50." in body
    assert not Run.objects.exists()


def test_it_requires_the_openai_fields_for_an_openai_target(client, carol, db):
    suite = make_suite()
    client.force_login(carol)
    response = client.post(reverse("evals:run-new"), start_form(suite, target_kind="openai"))
    assert response.context["form"].errors["base_url"] == ["Required for the openai target."]
    assert response.context["form"].errors["model"] == ["Required for the openai target."]
    assert not Run.objects.exists()


def test_it_prefills_the_grader_set_of_the_suites_latest_run(client, alice, db):
    suite = make_suite()
    make_run(suite, name="old", graders=[{"key": "a", "kind": "exact"}])
    make_run(suite, name="new", graders=GRADERS)
    other = make_suite(name="empty")
    client.force_login(alice)
    form = client.get(reverse("evals:run-new"), {"suite": str(suite.uuid)}).context["form"]
    assert json.loads(form.initial["graders"]) == GRADERS
    form = client.get(reverse("evals:run-new"), {"suite": str(other.uuid)}).context["form"]
    assert json.loads(form.initial["graders"]) == []


def test_it_never_prefills_a_failed_runs_grader_set_and_prefers_the_baselines(client, alice, db):

    suite = make_suite()
    good = make_run(suite, name="good", graders=GRADERS)
    make_run(suite, name="later", graders=[{"key": "b", "kind": "exact"}])
    make_run(suite, name="broken", status=Run.Status.FAILED, graders=[{"key": "x", "kind": "?"}])
    client.force_login(alice)
    form = client.get(reverse("evals:run-new"), {"suite": str(suite.uuid)}).context["form"]
    assert json.loads(form.initial["graders"]) == [{"key": "b", "kind": "exact"}]
    Baseline.objects.create(suite=suite, run=good)
    form = client.get(reverse("evals:run-new"), {"suite": str(suite.uuid)}).context["form"]
    assert json.loads(form.initial["graders"]) == GRADERS


def test_it_prefills_only_the_graders_a_new_run_can_use_and_says_which_it_left_out(
    client, alice, db
):
    suite = make_suite()
    recorded = Judge.objects.create(name="gpt-4o / inspect", kind=Judge.Kind.RECORDED)
    version = JudgeVersion.objects.create(judge=recorded, number=1, model="gpt-4o")
    imported = make_run(
        suite,
        name="inspect-log",
        source=Run.Source.IMPORTED,
        target_kind="imported",
        graders=[
            {"key": "model_graded_fact", "kind": "imported", "gating": True},
            *GRADERS,
            {"key": "judged", "kind": "judge", "config": {"judge_version": str(version.uuid)}},
            {"key": "no-kind"},
            # What interop.importers.labeled stores for a judge's imported verdicts.
            {
                "key": "gpt-4o / inspect",
                "kind": "recorded-judge",
                "gating": False,
                "judge_version": str(version.uuid),
            },
        ],
    )
    Baseline.objects.create(suite=suite, run=imported)
    client.force_login(alice)
    response = client.get(reverse("evals:run-new"), {"suite": str(suite.uuid)})
    assert json.loads(response.context["form"].initial["graders"]) == GRADERS
    left_out = response.context["prefill"].left_out
    harness = (
        "recorded by the harness the run was imported from; Assay has its verdicts, not a "
        "way to run it"
    )
    judge = (
        "a recorded judge: its verdicts were imported with the run; Assay has no prompt or "
        "endpoint to run it"
    )
    assert [(g.key, g.kind, g.reason) for g in left_out] == [
        ("model_graded_fact", "imported", harness),
        ("judged", "judge", f"gpt-4o / inspect v1 is {judge}"),
        ("no-kind", "imported", harness),
        ("gpt-4o / inspect", "recorded-judge", judge),
    ]
    page = response.content.decode()
    assert "unknown field" not in page
    assert "Prefilled from the graders of inspect-log, but for 4 this run could not use" in page
    assert "<code>model_graded_fact</code> (imported): recorded by the harness" in page
    assert f"<code>gpt-4o / inspect</code> (recorded-judge): {judge}" in page
    # What the page prefilled starts: no grader the runner cannot run reaches the form.
    form = client.get(reverse("evals:run-new"), {"suite": str(suite.uuid)}).context["form"]
    assert form.fields["graders"].clean(form.initial["graders"])


def test_an_imported_run_with_no_runnable_grader_prefills_none_and_says_why(client, alice, db):
    suite = make_suite()
    make_run(
        suite,
        name="promptfoo",
        source=Run.Source.IMPORTED,
        target_kind="imported",
        graders=[{"key": "promptfoo", "kind": "imported", "gating": True}],
    )
    client.force_login(alice)
    response = client.get(
        reverse("evals:run-new"),
        {"suite": str(suite.uuid)},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="graders-field",
    )
    body = response.content.decode()
    assert body.strip().startswith('<div id="graders-field">')
    assert "[]</textarea>" in body
    assert "<code>promptfoo</code> (imported)" in body and "<html" not in body


def test_choosing_a_suite_reloads_only_the_grader_field_over_htmx(client, alice, db):
    suite = make_suite()
    make_run(suite, graders=GRADERS)
    client.force_login(alice)
    response = client.get(
        reverse("evals:run-new"),
        {"suite": str(suite.uuid)},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="graders-field",
    )
    body = response.content.decode()
    assert body.strip().startswith('<div id="graders-field">')
    assert "has-four" in body
    assert "<html" not in body


# Progress and cancel -----------------------------------------------------------------------


def test_progress_keeps_polling_while_the_run_is_running(client, carol, run_with_trial):
    run = run_with_trial[0]
    client.force_login(carol)
    response = client.get(reverse("evals:run-progress", args=[run.uuid]), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert 'hx-trigger="every 2s"' in body
    assert '<progress value="1" max="2"' in body


def test_progress_stops_polling_with_286_once_the_run_is_terminal(client, carol, db):
    run = make_run(
        make_suite(),
        status=Run.Status.SUCCEEDED,
        trials_total=4,
        trials_finished=4,
        trials_errored=1,
    )
    client.force_login(carol)
    response = client.get(reverse("evals:run-progress", args=[run.uuid]), HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 286
    assert "every 2s" not in body
    assert '<progress value="4" max="4"' in body
    assert "1 errored" in body


def test_an_engineer_cancels_a_running_run(client, carol, run_with_trial):
    run = run_with_trial[0]
    client.force_login(carol)
    response = client.post(reverse("evals:run-cancel", args=[run.uuid]))
    run.refresh_from_db()
    assert response.status_code == 302
    assert run.status == Run.Status.CANCELLED


def test_a_cancel_over_htmx_returns_the_final_progress_fragment(client, alice, run_with_trial):
    run = run_with_trial[0]
    client.force_login(alice)
    response = client.post(reverse("evals:run-cancel", args=[run.uuid]), HTTP_HX_REQUEST="true")
    assert response.status_code == 286
    assert "Cancel run" not in response.content.decode()


def test_cancel_refuses_get(client, carol, run_with_trial):
    client.force_login(carol)
    response = client.get(reverse("evals:run-cancel", args=[run_with_trial[0].uuid]))
    assert response.status_code == 405


# Case and trial pages ----------------------------------------------------------------------


def test_the_case_view_escapes_hostile_output_names_and_tags(client, bob, db):
    suite = make_suite()
    case = suite.cases.get(key="c1")
    case.tags = ['"><svg onload=alert(3)>']
    case.save()
    run = make_run(suite, name=HOSTILE_RUN_NAME)
    make_trial(run, case, output=HOSTILE_OUTPUT, passed=False)
    client.force_login(bob)
    body = client.get(reverse("evals:run-case", args=[run.uuid, case.uuid])).content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    assert "&lt;b onclick=alert(4)&gt;R4&lt;/b&gt;" in body
    assert 'data-tag="&quot;&gt;&lt;svg onload=alert(3)&gt;"' in body
    assert "<img" not in body
    assert "<b onclick" not in body
    assert "<svg" not in body


def test_the_case_view_shows_trials_grades_labels_and_provisional_judges(client, bob, db):
    suite = make_suite()
    case = suite.cases.get(key="c1")
    run = make_run(suite)
    trial = make_trial(run, case, passed=False)
    judge = Judge.objects.create(name="tone", kind=Judge.Kind.RUBRIC)
    version = JudgeVersion.objects.create(judge=judge, number=1, model="j-1")
    Grade.objects.create(
        trial=trial,
        grader=version.grader_key,
        judge_version=version,
        status=Grade.Status.OK,
        passed=True,
        score=0.9,
        reason="polite",
    )
    errored = make_trial(run, case, attempt=2, status=Trial.Status.ERROR, cost=None)
    errored.error_message = "HTTP 429 Too Many Requests"
    errored.save()
    Label.objects.create(trial=trial, reviewer=bob, verdict="fail", critique="wrong sum")
    client.force_login(bob)
    body = client.get(reverse("evals:run-case", args=[run.uuid, case.uuid])).content.decode()
    assert "missing 4" in body
    assert "judge:tone:v1" in body
    assert ">provisional<" in body
    assert "HTTP 429 Too Many Requests" in body
    assert "cost unknown" in body
    assert "wrong sum" in body
    assert "12 ms" in body


def test_a_trusted_judge_grade_is_not_marked_provisional(client, bob, db):

    suite = make_suite()
    run = make_run(suite)
    trial = make_trial(run, suite.cases.get(key="c1"))
    judge = Judge.objects.create(name="tone", kind=Judge.Kind.RUBRIC)
    version = JudgeVersion.objects.create(judge=judge, number=1, model="j-1")
    trust(version)
    Grade.objects.create(
        trial=trial,
        grader=version.grader_key,
        judge_version=version,
        status=Grade.Status.OK,
        passed=True,
        reason="polite",
    )
    client.force_login(bob)
    body = client.get(reverse("evals:trial-detail", args=[trial.uuid])).content.decode()
    assert "judge:tone:v1" in body
    assert ">provisional<" not in body


def test_a_long_output_is_previewed_in_the_case_view_and_whole_on_the_trial_page(
    client, bob, settings, db
):
    limit = settings.ASSAY["OUTPUT_PREVIEW_CHARS"]
    assert limit == 2000
    suite = make_suite()
    case = suite.cases.get(key="c1")
    run = make_run(suite)
    output = "a" * limit + "TAIL-MARKER" + "b" * 500
    trial = make_trial(run, case, output=output)
    client.force_login(bob)
    case_body = client.get(reverse("evals:run-case", args=[run.uuid, case.uuid])).content.decode()
    assert "a" * limit in case_body
    assert "TAIL-MARKER" not in case_body
    assert f"Showing the first 2000 of {len(output)} characters" in case_body
    assert reverse("evals:trial-detail", args=[trial.uuid]) in case_body
    trial_body = client.get(reverse("evals:trial-detail", args=[trial.uuid])).content.decode()
    assert output in trial_body


def test_a_short_output_has_no_show_all_link(client, bob, run_with_trial):
    run, case, _ = run_with_trial
    client.force_login(bob)
    body = client.get(reverse("evals:run-case", args=[run.uuid, case.uuid])).content.decode()
    assert "Show all" not in body


def test_the_case_selector_never_loads_full_outputs(run_with_trial, carol):
    run, case, _ = run_with_trial
    _, _, trials = selectors.run_case_get(run_uuid=run.uuid, case_uuid=case.uuid, viewer=carol)
    assert {"output", "raw_response"} <= trials[0].get_deferred_fields()
    assert trials[0].output_preview == "4"
    assert trials[0].output_length == 1


def test_the_trial_page_shows_the_raw_response_as_escaped_json(client, bob, run_with_trial):
    trial = run_with_trial[2]
    trial.raw_response = {"choices": [{"message": {"content": HOSTILE_OUTPUT}}]}
    trial.save()
    client.force_login(bob)
    body = client.get(reverse("evals:trial-detail", args=[trial.uuid])).content.decode()
    assert "&quot;content&quot;: &quot;&lt;img src=x onerror=alert(1)&gt;&quot;" in body
    assert "<img" not in body


def test_a_case_of_another_suite_is_not_found_in_a_run(client, bob, run_with_trial):
    run = run_with_trial[0]
    other_case = make_suite(name="other").cases.first()
    client.force_login(bob)
    url = reverse("evals:run-case", args=[run.uuid, other_case.uuid])
    assert client.get(url).status_code == 404


# Run list ----------------------------------------------------------------------------------


def test_the_run_list_pass_rate_leaves_out_errored_grades(client, carol, db):
    """Fault A1: 2 pass, 1 fail, 1 unparseable judge reply -> 2/3 = 66.7%, not 2/4."""
    suite = make_suite(n_cases=1)
    case = suite.cases.get()
    run = make_run(suite)
    make_trial(run, case, 1, passed=True)
    make_trial(run, case, 2, passed=True)
    make_trial(run, case, 3, grade_status=Grade.Status.ERROR)
    make_trial(run, case, 4, passed=False)
    stats = selectors.run_list().object_list[0].stats
    assert (stats.passed, stats.graded, stats.judge_errors) == (2, 3, 1)
    assert stats.pass_rate == pytest.approx(2 / 3)
    client.force_login(carol)
    body = client.get(reverse("evals:run-list")).content.decode()
    assert "66.7%" in body
    # one case, 2 of 3: its Clopper-Pearson interval [9.4%, 99.2%]
    assert "[9.4%, 99.2%]" in body
    assert "2 of 3 graded trials passed, 1 grader error" in body


def test_the_run_list_pass_rate_is_the_mean_of_per_case_rates_as_in_the_report(db):
    """c1: 3 of 3 pass; c2: 0 of 1 -> (1 + 0) / 2 = 50%, not the pooled 3/4 = 75%."""

    suite = make_suite(n_cases=2)
    c1, c2 = suite.cases.all()
    run = make_run(suite)
    for attempt in (1, 2, 3):
        make_trial(run, c1, attempt, passed=True)
    make_trial(run, c2, 1, passed=False)
    stats = selectors.run_list().object_list[0].stats
    assert (stats.passed, stats.graded) == (3, 4)
    assert stats.pass_rate == pytest.approx(0.5)
    report_rate = run_report(run=run).overall.pass_rate
    assert stats.pass_rate == pytest.approx(report_rate.mean)
    # and the same interval as the report, never of zero width
    assert (stats.pass_rate_low, stats.pass_rate_high) == (report_rate.ci_low, report_rate.ci_high)
    assert stats.pass_rate_low < stats.pass_rate < stats.pass_rate_high


def test_a_trial_missing_a_gating_grade_is_not_a_pass(db):
    suite = make_suite(n_cases=1)
    two = [
        *GRADERS,
        {"key": "judge", "kind": "exact", "gating": True},
        {"key": "style", "kind": "exact", "gating": False},
    ]
    run = make_run(suite, graders=two)
    make_trial(run, suite.cases.get(), 1, passed=True)  # has "has-four" only
    stats = selectors.run_list().object_list[0].stats
    assert (stats.passed, stats.graded, stats.pass_rate) == (0, 0, None)


def test_a_pipeline_error_is_never_a_pass(db):
    suite = make_suite(n_cases=1)
    run = make_run(suite)
    make_trial(run, suite.cases.get(), 1, status=Trial.Status.ERROR, cost=None)
    stats = selectors.run_list().object_list[0].stats
    assert (stats.passed, stats.graded, stats.errored_trials) == (0, 0, 1)
    assert stats.pass_rate is None


def test_the_run_list_shows_cost_as_known_partial_or_unknown(client, carol, db):
    suite = make_suite(n_cases=3)
    c1, c2, c3 = suite.cases.all()
    known = make_run(suite, name="known")
    make_trial(known, c1, cost=Decimal("0.0112"))
    make_trial(known, c2, cost=Decimal("0.0056"))
    partial = make_run(suite, name="partial")
    make_trial(partial, c1, cost=Decimal("0.0112"))
    make_trial(partial, c2, cost=None)
    make_trial(partial, c3, cost=None)
    unknown = make_run(suite, name="unknown")
    make_trial(unknown, c1, cost=None)
    client.force_login(carol)
    body = client.get(reverse("evals:run-list")).content.decode()
    assert "$0.0168" in body
    assert "≥ $0.0112 (cost unknown for 2 of 3)" in body
    rows = {r.name: r.stats for r in selectors.run_list().object_list}
    assert rows["unknown"].cost_state == "unknown"
    assert rows["known"].cost_known_usd == Decimal("0.0168")


def test_the_run_list_marks_simulated_runs_and_escapes_run_names(client, carol, db):
    suite = make_suite()
    make_run(suite, name=HOSTILE_RUN_NAME)
    make_run(suite, name="real", target_kind="openai", model="gpt-x")
    client.force_login(carol)
    body = client.get(reverse("evals:run-list")).content.decode()
    assert body.count('class="badge simulated"') == 1
    assert 'title="&lt;b onclick=alert(4)&gt;R4&lt;/b&gt;"' in body
    assert "<b onclick" not in body
    assert "openai · gpt-x" in body


def test_the_suite_and_run_case_pages_label_simulated_runs(client, carol, db):
    """Issue 11 point 6: "simulated" on the suite and run-case pages too, never on a real run."""
    suite = make_suite()
    sim = make_run(suite, name="sim")
    real = make_run(suite, name="real", target_kind="openai", model="gpt-x")
    case = suite.cases.get(key="c1")
    client.force_login(carol)
    body = client.get(reverse("evals:suite-detail", kwargs={"suite_id": suite.uuid})).content
    assert body.decode().count('class="badge simulated"') == 1
    for run, badges in ((sim, 1), (real, 0)):
        url = reverse("evals:run-case", kwargs={"run_id": run.uuid, "case_id": case.uuid})
        page = client.get(url).content.decode()
        assert page.count('class="badge simulated"') == badges


def test_the_run_list_filters_by_suite_and_status(client, carol, db):
    a, b = make_suite(name="alpha"), make_suite(name="beta")
    make_run(a, name="a-done")
    make_run(a, name="a-running", status=Run.Status.RUNNING)
    make_run(b, name="b-done")
    client.force_login(carol)
    response = client.get(reverse("evals:run-list"), {"suite": str(a.uuid), "status": "succeeded"})
    assert [r.name for r in response.context["page"].object_list] == ["a-done"]
    response = client.get(reverse("evals:run-list"), {"status": "running"})
    assert [r.name for r in response.context["page"].object_list] == ["a-running"]


def _status_world():
    """One run of each shown status: executed succeeded, failed, running; an imported run
    whose stored status is succeeded (partial: 59 of 60 recorded) and one whose source
    failed. Returns the suite."""
    suite = make_suite()
    make_run(suite, name="done", trials_total=4, trials_finished=4)
    make_run(suite, name="broke", status=Run.Status.FAILED, trials_total=4, trials_finished=4)
    make_run(suite, name="going", status=Run.Status.RUNNING, trials_total=4, trials_finished=1)
    imported = {"source": Run.Source.IMPORTED, "target_kind": "imported"}
    make_run(suite, name="inspect", trials_total=60, trials_finished=59, **imported)
    make_run(
        suite, name="file", status=Run.Status.FAILED, trials_total=2, trials_finished=2, **imported
    )
    return suite


SHOWN = {
    "succeeded": ["done"],
    "failed": ["broke"],
    "running": ["going"],
    "imported": ["file", "inspect"],
    "queued": [],
    "cancelled": [],
}


def test_the_run_list_filters_on_the_status_the_badge_shows(client, carol, db):
    """?status=succeeded holds no imported run (its badge says imported) and ?status=imported
    holds every finished imported run, whatever the stored status."""
    _status_world()
    client.force_login(carol)
    for status, names in SHOWN.items():
        response = client.get(reverse("evals:run-list"), {"status": status})
        assert response.status_code == 200, status
        rows = response.context["page"].object_list
        assert sorted(r.name for r in rows) == names, status
        assert all(run_status_shown(r).label == status for r in rows)
    page = client.get(reverse("evals:run-list")).content.decode()
    assert '<option value="imported">imported</option>' in page


def test_the_api_filters_runs_on_the_status_the_badge_shows(carol, db):
    _status_world()
    api = client_for(carol)
    for status, names in SHOWN.items():
        response = api.get("/api/runs/", {"status": status})
        assert response.status_code == 200, (status, response.content)
        rows = response.json()["results"]
        assert sorted(r["name"] for r in rows) == names, status
        assert {r["status_shown"]["label"] for r in rows} <= {status}
    response = api.get("/api/runs/", {"status": "imported-problems"})
    assert response.status_code == 400
    assert response.json()["status"] == [
        "unknown status 'imported-problems'; allowed: queued, running, succeeded, failed, "
        "cancelled, pruning, imported"
    ]


def test_a_partial_imported_run_shows_the_same_trial_count_on_the_list_and_its_page(
    client, carol, db
):
    """59 of 60 trials recorded: "59/60" on the list (it counted trial rows: "59/59") and
    on the run page's progress, and the same counters in the API."""
    suite = make_suite(n_cases=1)
    run = make_run(
        suite,
        name="inspect",
        source=Run.Source.IMPORTED,
        target_kind="imported",
        trials_total=60,
        trials_finished=59,
        trials_errored=1,
    )
    case = suite.cases.get()
    for attempt in range(1, 59):
        make_trial(run, case, attempt)
    make_trial(run, case, 59, status=Trial.Status.ERROR)
    client.force_login(carol)
    listed = client.get(reverse("evals:run-list")).content.decode()
    assert '<td class="num run-trials">59/60\n        <div class="err">1 errored</div>' in listed
    progress = client.get(reverse("evals:run-progress", args=[run.uuid])).content.decode()
    assert "<strong>59/60</strong> trials finished" in progress
    assert '<span class="err">1 errored</span>' in progress
    detail = client_for(carol).get(f"/api/runs/{run.uuid}/").json()
    assert (detail["trials_finished"], detail["trials_total"]) == (59, 60)


def test_an_unknown_filter_value_is_a_400_naming_it_not_a_crash(client, carol, db):
    make_run(make_suite())
    client.force_login(carol)
    response = client.get(reverse("evals:run-list"), {"status": "bogus"})
    assert response.status_code == 400  # a malformed parameter (issue 13)
    assert "status: expected one of" in response.content.decode()


def test_an_unknown_suite_is_a_404_naming_it_never_every_run(client, carol, db):
    make_run(make_suite())
    client.force_login(carol)
    unknown = "00000000-0000-0000-0000-000000000000"
    response = client.get(reverse("evals:run-list"), {"suite": unknown})
    assert response.status_code == 404
    assert f"suite: no suite with id {unknown}" in response.content.decode()
    assert not shows_word(response.content.decode(), "r1")  # the run's name, not a CSRF token


def test_the_filters_show_what_the_list_was_filtered_by(client, carol, db):
    suite = make_suite()
    make_run(suite)
    client.force_login(carol)
    response = client.get(reverse("evals:run-list"), {"suite": str(suite.uuid), "status": "queued"})
    page = response.content.decode()
    assert response.status_code == 200
    assert f'<option value="{suite.uuid}" selected>arith</option>' in page
    assert '<option value="queued" selected>' in page
    assert "No runs match these filters." in page


def test_the_run_list_query_count_does_not_grow_with_runs_or_trials(client, carol, db):
    suite = make_suite(n_cases=2)
    cases = list(suite.cases.all())

    def add_runs(start: int, n: int) -> None:
        for i in range(start, start + n):
            run = make_run(suite, name=f"r{i}", started_by=carol)
            for case in cases:
                make_trial(run, case, passed=i % 2 == 0)

    client.force_login(carol)
    add_runs(0, 2)
    with CaptureQueriesContext(connection) as few:
        assert client.get(reverse("evals:run-list")).status_code == 200
    add_runs(2, 25)
    with CaptureQueriesContext(connection) as many:
        assert client.get(reverse("evals:run-list")).status_code == 200
    assert len(many) == len(few)


def test_the_run_list_selector_uses_at_most_three_queries(django_assert_max_num_queries, db):
    suite = make_suite(n_cases=2)
    for i in range(30):
        run = make_run(suite, name=f"r{i}")
        for case in suite.cases.all():
            make_trial(run, case)
    with django_assert_max_num_queries(3):
        page = selectors.run_list()
        assert [r.stats.finished for r in page.object_list] == [2] * 30
        assert {r.suite.name for r in page.object_list} == {"arith"}


def test_the_api_refuses_an_unknown_suite_or_baseline_naming_it_and_a_recorded_grader(carol, db):
    """POST /api/runs/start: an unknown suite or ``against`` is a 404 naming the field; a
    recorded-judge grader (an imported run's) is refused saying it cannot be run."""
    suite = make_suite()
    api = client_for(carol)
    unknown = "00000000-0000-0000-0000-000000000000"
    body = {
        "suite": unknown,
        "name": "x",
        "target": {"kind": "simulated", "seed": 1},
        "graders": GRADERS,
    }
    answer = api.post("/api/runs/start", body, format="json")
    assert answer.status_code == 404
    assert (answer.json()["field"], answer.json()["detail"]) == (
        "suite",
        f"suite: no suite with id {unknown}",
    )
    answer = api.post(
        "/api/runs/start", {**body, "suite": str(suite.uuid), "against": unknown}, format="json"
    )
    assert answer.status_code == 404
    assert (answer.json()["field"], answer.json()["detail"]) == (
        "against",
        f"against: no run with id {unknown}",
    )
    recorded = {"key": "j", "kind": "recorded-judge", "gating": False, "judge_version": unknown}
    answer = api.post(
        "/api/runs/start", {**body, "suite": str(suite.uuid), "graders": [recorded]}, format="json"
    )
    assert answer.status_code == 400
    assert (answer.json()["field"], answer.json()["detail"]) == (
        "graders[0].kind",
        "graders[0].kind: a recorded judge: its verdicts were imported with the run; Assay has "
        "no prompt or endpoint to run it",
    )
    assert not Run.objects.exists()


def test_the_runs_list_names_a_simulated_target_once(client, carol, db):
    make_run(make_suite(), model="simulated")
    client.force_login(carol)
    page = client.get(reverse("evals:run-list")).content.decode()
    row = page[page.index("<tbody>") : page.index("</tbody>")]
    assert row.count(">simulated<") == 1  # the badge, once
    assert "· simulated" not in row and "<td>simulated" not in row
