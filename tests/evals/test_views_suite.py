"""The suite page: cases, runs over time with intervals, the baseline and its history set from
the run page, the minimum detectable drop, and graduating capability cases (permissions per
the cast)."""

from __future__ import annotations

import pytest
from django.urls import reverse

import evals.suites
from core.errors import DomainError
from evals.baselines import baseline_set
from evals.case_changes import case_changes_list
from evals.cases import case_graduate
from evals.models import Baseline, Case, CaseChange, Grade, Graduation, Run, Suite, Trial
from tests.report_builders import add_trial

GRADERS = [{"key": "ok", "kind": "exact"}]


def capability_suite(name: str = "cap", keys=("c1", "c2", "c3")) -> Suite:
    suite = Suite.objects.create(name=name, kind=Suite.Kind.CAPABILITY)
    for key in keys:
        Case.objects.create(suite=suite, key=key, input=f"q {key}", expected=key, tags=["t"])
    return suite


def run_with(suite: Suite, name: str, verdicts: dict[str, list[bool]]) -> Run:
    """A finished run whose trials per case key carry the given gating verdicts."""
    n = max(len(v) for v in verdicts.values())
    run = Run.objects.create(
        suite=suite,
        name=name,
        target_kind="simulated",
        graders=GRADERS,
        trials_per_case=n,
        status=Run.Status.SUCCEEDED,
    )
    for key, outcomes in verdicts.items():
        for attempt, passed in enumerate(outcomes, start=1):
            add_trial(run, key, attempt, grades={"ok": passed})
    return run


@pytest.fixture
def cap_with_three_runs(db):
    """c1 passes every trial of the three runs; c2 fails once in the last; c3 once in the first."""
    suite = capability_suite()
    runs = [
        run_with(suite, "r1", {"c1": [True, True], "c2": [True, True], "c3": [True, False]}),
        run_with(suite, "r2", {"c1": [True, True], "c2": [True, True], "c3": [True, True]}),
        run_with(suite, "r3", {"c1": [True, True], "c2": [True, False], "c3": [True, True]}),
    ]
    regression = Suite.objects.create(name="reg", kind=Suite.Kind.REGRESSION)
    return suite, runs, regression


def test_it_shows_cases_runs_and_the_chart_data_to_a_reviewer(client, bob, cap_with_three_runs):
    suite, runs, _ = cap_with_three_runs
    Case.objects.filter(suite=suite, key="c3").update(retired_at=runs[0].created_at)
    client.force_login(bob)
    response = client.get(reverse("evals:suite-detail", args=[suite.uuid]))
    assert response.status_code == 200
    page = response.context["page"]
    assert (page.n_active, page.n_retired) == (2, 1)
    assert [p.run.name for p in page.runs] == ["r1", "r2", "r3"]  # oldest first
    # r3: c1 2/2, c2 1/2, c3 2/2 -> mean of per-case rates = (1 + 0.5 + 1) / 3
    assert page.runs[2].pass_rate.mean == pytest.approx(2.5 / 3)
    html = response.content.decode()
    marks = response.context["trend"].marks
    assert [m.name for m in marks] == ["r1", "r2", "r3"]
    assert marks[2].rate == pytest.approx(2.5 / 3)
    assert marks[2].low is not None and marks[2].low <= 2.5 / 3 <= marks[2].high
    # r2 passed all 6 trials: the exact interval of 6/6 (0.025 ** (1 / 6) = 54.1%), never
    # the zero-width [100%, 100%]; the mark says what the table beside it says
    assert "r2 (" in marks[1].text and "pass rate 100.0% [54.1%, 100.0%]" in marks[1].text
    assert html.count('class="mark trend-run') == 3
    assert html.count("pass rate 100.0% [54.1%, 100.0%]") == 2  # aria-label and title
    assert "<canvas" not in html and "suite_chart.js" not in html


def test_it_refuses_the_suite_page_to_an_outsider(client, mallory, cap_with_three_runs):
    suite, _, _ = cap_with_three_runs
    client.force_login(mallory)
    assert client.get(reverse("evals:suite-detail", args=[suite.uuid])).status_code == 403


def test_it_offers_only_cases_that_passed_every_trial_of_the_last_three_runs(
    client, carol, cap_with_three_runs
):
    suite, _, _ = cap_with_three_runs
    client.force_login(carol)
    page = client.get(reverse("evals:suite-detail", args=[suite.uuid])).context["page"]
    assert [c.case.key for c in page.candidates] == ["c1"]
    assert [ev["run_name"] for ev in page.candidates[0].evidence] == ["r3", "r2", "r1"]


def test_it_offers_nothing_before_three_finished_runs(client, carol, db):
    suite = capability_suite()
    run_with(suite, "r1", {"c1": [True], "c2": [True], "c3": [True]})
    run_with(suite, "r2", {"c1": [True], "c2": [True], "c3": [True]})
    client.force_login(carol)
    page = client.get(reverse("evals:suite-detail", args=[suite.uuid])).context["page"]
    assert page.candidates == []


def test_an_errored_trial_disqualifies_a_case_from_graduation(client, carol, db):
    suite = capability_suite(keys=("c1",))
    for name in ("r1", "r2"):
        run_with(suite, name, {"c1": [True, True]})
    run = run_with(suite, "r3", {"c1": [True]})
    add_trial(run, "c1", 2, status=Trial.Status.ERROR, error="HTTP 500")
    client.force_login(carol)
    page = client.get(reverse("evals:suite-detail", args=[suite.uuid])).context["page"]
    assert page.candidates == []


def test_an_engineer_graduates_a_case_and_it_is_recorded(client, carol, cap_with_three_runs):
    suite, _, regression = cap_with_three_runs
    c1 = suite.cases.get(key="c1")
    client.force_login(carol)
    url = reverse("evals:case-graduate", args=[suite.uuid, c1.uuid])
    response = client.post(url, {"into_suite": str(regression.uuid)})
    assert response.status_code == 302
    copy = Case.objects.get(suite=regression, key="c1")
    assert copy.content_hash == c1.content_hash and copy.tags == ["t"]
    graduation = Graduation.objects.get()
    assert (graduation.case, graduation.regression_case, graduation.by) == (c1, copy, carol)
    assert [ev["run_name"] for ev in graduation.evidence["runs"]] == ["r3", "r2", "r1"]
    client.post(url, {"into_suite": str(regression.uuid)})  # again: nothing doubles
    assert Case.objects.filter(suite=regression).count() == 1
    assert Graduation.objects.count() == 1
    page = client.get(reverse("evals:suite-detail", args=[suite.uuid])).context["page"]
    assert page.candidates[0].graduated_into == ["reg"]


def test_a_reviewer_cannot_graduate_a_case(client, bob, cap_with_three_runs):
    suite, _, regression = cap_with_three_runs
    c1 = suite.cases.get(key="c1")
    client.force_login(bob)
    url = reverse("evals:case-graduate", args=[suite.uuid, c1.uuid])
    assert client.post(url, {"into_suite": str(regression.uuid)}).status_code == 403
    assert not Graduation.objects.exists()
    page = client.get(reverse("evals:suite-detail", args=[suite.uuid]))
    assert url not in page.content.decode()  # no graduation form for a reviewer


def test_it_refuses_to_graduate_a_case_that_is_not_a_candidate(client, alice, cap_with_three_runs):
    suite, _, regression = cap_with_three_runs
    c2 = suite.cases.get(key="c2")
    client.force_login(alice)
    client.post(
        reverse("evals:case-graduate", args=[suite.uuid, c2.uuid]),
        {"into_suite": str(regression.uuid)},
    )
    assert not Graduation.objects.exists()
    assert not Case.objects.filter(suite=regression).exists()


def test_it_refuses_to_graduate_into_a_capability_suite_or_over_a_different_case(
    cap_with_three_runs, carol
):

    suite, _, regression = cap_with_three_runs
    c1 = suite.cases.get(key="c1")
    other = capability_suite(name="cap2", keys=())
    with pytest.raises(DomainError, match="into_suite: 'cap2' is not a regression suite"):
        case_graduate(case=c1, into_suite=other, by=carol)
    Case.objects.create(suite=regression, key="c1", input="something else")
    with pytest.raises(DomainError, match="already has a different case with key 'c1'"):
        case_graduate(case=c1, into_suite=regression, by=carol)
    assert Case.objects.get(suite=regression, key="c1").input == "something else"


# Baseline ---------------------------------------------------------------------------------


def test_an_engineer_sets_the_baseline_from_the_run_page_and_the_suite_keeps_its_history(
    client, carol, alice, cap_with_three_runs
):
    suite, runs, _ = cap_with_three_runs
    client.force_login(carol)
    run_page = client.get(runs[0].get_absolute_url())
    assert b"Set as baseline" in run_page.content
    client.post(reverse("evals:baseline-set", args=[runs[0].uuid]), {"note": "first"})
    client.force_login(alice)
    client.post(reverse("evals:baseline-set", args=[runs[1].uuid]))
    history = list(
        Baseline.objects.filter(suite=suite)
        .order_by("set_at", "id")
        .values_list("run__name", "set_by__username", "note")
    )
    assert history == [("r1", "carol", "first"), ("r2", "alice", "")]

    page = client.get(reverse("evals:suite-detail", args=[suite.uuid]))
    assert page.context["page"].baseline.run == runs[1]
    assert [b.run.name for b in page.context["page"].baselines] == ["r2", "r1"]
    assert "can detect a drop of about" in page.context["power"]
    run_page = client.get(runs[2].get_absolute_url()).content.decode()
    assert "Current baseline of" in run_page and "set by alice" in run_page
    compare = reverse("evals:comparison", args=[runs[2].uuid, runs[1].uuid])
    assert f'href="{compare}"' in run_page


def test_a_reviewer_cannot_set_a_baseline(client, bob, cap_with_three_runs):
    _, runs, _ = cap_with_three_runs
    client.force_login(bob)
    assert b"Set as baseline" not in client.get(runs[0].get_absolute_url()).content
    response = client.post(reverse("evals:baseline-set", args=[runs[0].uuid]))
    assert response.status_code == 403
    assert not Baseline.objects.exists()


def test_setting_a_baseline_needs_a_post(client, carol, cap_with_three_runs):
    _, runs, _ = cap_with_three_runs
    client.force_login(carol)
    assert client.get(reverse("evals:baseline-set", args=[runs[0].uuid])).status_code == 405
    assert not Baseline.objects.exists()


def test_a_cancelled_or_ungraded_run_is_not_offered_or_accepted_as_a_baseline(
    client, carol, cap_with_three_runs
):

    suite, runs, _ = cap_with_three_runs
    Run.objects.filter(id=runs[0].id).update(status=Run.Status.CANCELLED)
    runs[0].refresh_from_db()
    client.force_login(carol)
    page = client.get(runs[0].get_absolute_url()).content.decode()
    assert "Set as baseline" not in page
    assert "was cancelled; a cancelled run cannot be a baseline" in page
    with pytest.raises(DomainError, match="was cancelled"):
        baseline_set(suite=suite, run=runs[0], by=carol)
    client.post(reverse("evals:baseline-set", args=[runs[0].uuid]))

    Grade.objects.filter(trial__run=runs[1]).update(status=Grade.Status.ERROR, passed=None)
    assert "Set as baseline" not in client.get(runs[1].get_absolute_url()).content.decode()
    with pytest.raises(DomainError, match="has no graded trial"):
        baseline_set(suite=suite, run=runs[1], by=carol)
    assert not Baseline.objects.exists()
    assert "Set as baseline" in client.get(runs[2].get_absolute_url()).content.decode()


def test_the_compare_picker_preselects_the_current_baseline(client, carol, cap_with_three_runs):

    suite, runs, _ = cap_with_three_runs
    baseline_set(suite=suite, run=runs[0], by=carol)
    client.force_login(carol)
    page = client.get(runs[2].get_absolute_url()).content.decode()
    assert f'<option value="{runs[0].uuid}" selected>' in page
    assert f'<option value="{runs[1].uuid}">' in page


def test_every_active_case_and_every_change_is_reachable_page_by_page(client, bob, db, monkeypatch):
    """The suite page showed the first 500 active cases and the latest 100 changes, and
    nothing said where the rest were: both lists now page, with links to each side."""
    monkeypatch.setattr(evals.suites, "CASE_LIST_LIMIT", 2)
    suite = capability_suite(keys=("c1", "c2", "c3", "c4", "c5"))
    for case in Case.objects.filter(suite=suite):
        CaseChange.objects.create(suite=suite, case=case, action=CaseChange.Action.CREATED)
    client.force_login(bob)
    url = reverse("evals:suite-detail", kwargs={"suite_id": suite.uuid})
    seen = []
    for number in (1, 2, 3):
        page = client.get(url, {"cases_page": number}).context["page"]
        seen += [c.key for c in page.active_cases]
    assert seen == ["c1", "c2", "c3", "c4", "c5"]
    body = client.get(url, {"cases_page": 2}).content.decode()
    assert "Active cases 3–4 of 5 (page 2 of 3)" in body
    assert "?cases_page=1#cases" in body and "?cases_page=3#cases" in body
    for bad in ("0", "-1", "x", "9999999", "٣"):  # refused quietly: page 1
        assert client.get(url, {"cases_page": bad}).context["page"].cases_page == 1
    assert client.get(url, {"cases_page": "99"}).context["page"].cases_page == 3  # the last

    first, older = case_changes_list(suite=suite, page=1, limit=3)
    second, none_older = case_changes_list(suite=suite, page=2, limit=3)
    assert older and not none_older and len(first) == 3 and len(second) == 2
    assert {c.case.key for c in first + second} == {"c1", "c2", "c3", "c4", "c5"}
    assert "No older change." in client.get(url, {"changes_page": 2}).content.decode()


def test_a_note_too_long_for_a_baseline_shows_the_run_page_again_and_sets_nothing(
    client, carol, cap_with_three_runs
):
    _, runs, _ = cap_with_three_runs
    client.force_login(carol)
    note = "n" * 501
    response = client.post(reverse("evals:baseline-set", args=[runs[0].uuid]), {"note": note})
    page = response.content.decode()
    assert response.status_code == 200
    assert "Ensure this value has at most 500 characters" in page
    assert f'value="{note}"' in page
    assert not Baseline.objects.exists()
