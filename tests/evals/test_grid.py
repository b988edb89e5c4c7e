"""The grid of runs and a case's history (evals.grid): cells by the run report's rule,
filters and sort, a query count independent of size, blind reviewing, page, API, export."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core.errors import DomainError
from evals.baselines import baseline_set
from evals.grid.build import GridQuery, grid_get
from evals.grid.cache import grid_column_keys
from evals.grid.chart import cost_quality_chart_get
from evals.grid.history import case_history_get
from evals.models import Case, Grade, Run, Suite, Trial
from evals.report.selectors import run_report
from evals.templatetags.grid import mark_classes
from labeling.models import Label
from tests.comparison_builders import db_run, judge_version
from tests.labeling_builders import calibration_set, judged_run
from tests.report_builders import add_trial, mixed_run

pytestmark = pytest.mark.django_db


def three_runs():
    """Suite S, runs r1..r3 (oldest first): a always passes, b flaky then fixed, c broken
    in r3, d only in r2 and r3 (tags on a and b)."""
    r1 = db_run({"a": "PPP", "b": "PFF", "c": "PPP"}, name="r1")
    r2 = db_run({"a": "PPP", "b": "PPF", "c": "PPP", "d": "FFF"}, name="r2")
    r3 = db_run({"a": "PPP", "b": "PPP", "c": "PFF", "d": "PFP"}, name="r3")
    Case.objects.filter(key="a").update(tags=["smoke"])
    Case.objects.filter(key="b").update(tags=["smoke", "math"])
    return Suite.objects.get(name="S"), [r1, r2, r3]


def test_a_cell_is_the_run_reports_case_row(carol):
    run = mixed_run()
    grid = grid_get(suite=run.suite, query=GridQuery(), viewer=carol)
    report = {r.key: r for r in run_report(run=run).cases}
    assert [c.name for c in grid.columns] == ["R1"]
    for row in grid.rows:
        cell, expected = row.cells[0], report[row.key]
        assert (cell.passed, cell.graded) == (expected.passed, expected.graded)
        assert cell.errored == expected.pipeline_errored + expected.grades_errored
        if cell.graded:
            assert (cell.low, cell.high) == (expected.wilson_low, expected.wilson_high)
            assert cell.low < cell.high


def test_a_judge_graded_run_agrees_with_its_report_too(carol):
    version = judge_version(1, trusted=False)
    run = db_run({"a": "PPE", "b": "FXP"}, name="judged", version=version)
    grid = grid_get(suite=run.suite, query=GridQuery(), viewer=carol)
    report = {r.key: (r.passed, r.graded) for r in run_report(run=run).cases}
    assert {r.key: (r.cells[0].passed, r.cells[0].graded) for r in grid.rows} == report
    assert report == {"a": (2, 2), "b": (1, 2)}


def test_columns_run_oldest_first_and_rows_say_variance_flaky_and_change(carol):
    suite, runs = three_runs()
    grid = grid_get(suite=suite, query=GridQuery(sort="key"), viewer=carol)
    assert [c.name for c in grid.columns] == ["r1", "r2", "r3"]
    rows = {r.key: r for r in grid.rows}
    assert rows["d"].cells[0] is None  # not in r1
    b = rows["b"]
    assert [(c.passed, c.graded) for c in b.cells] == [(1, 3), (2, 3), (3, 3)]
    assert b.variance == pytest.approx(((1 / 3 - 2 / 3) ** 2 + 0 + (1 - 2 / 3) ** 2) / 3)
    assert b.flaky_any and b.change == "better"
    assert rows["c"].change == "broken" and rows["a"].change == "unchanged"
    assert rows["a"].variance == 0 and not rows["a"].flaky_any
    assert rows["d"].change == "better"  # 0/3 -> 2/3: not all pass, so not "fixed"


def test_it_filters_by_flaky_tag_and_change_and_sorts_by_variance(carol):
    suite, _ = three_runs()

    def keys(**q):
        return [r.key for r in grid_get(suite=suite, query=GridQuery(**q), viewer=carol).rows]

    assert sorted(keys(flaky=True)) == ["b", "c", "d"]
    assert keys(tag="math") == ["b"]
    assert keys(change="broken") == ["c"]
    assert keys(flaky=True, tag="smoke") == ["b"]
    by_variance = keys()
    variances = {
        r.key: r.variance for r in grid_get(suite=suite, query=GridQuery(), viewer=carol).rows
    }
    assert by_variance == sorted(variances, key=lambda k: (-variances[k], k))
    assert by_variance[-1] == "a"


def test_it_picks_runs_by_id_or_the_last_n(carol):
    suite, runs = three_runs()
    picked = GridQuery(runs=(str(runs[2].uuid), str(runs[0].uuid)))
    grid = grid_get(suite=suite, query=picked, viewer=carol)
    assert [c.name for c in grid.columns] == ["r1", "r3"]  # oldest first whatever the order
    assert [
        c.name for c in grid_get(suite=suite, query=GridQuery(last=2), viewer=carol).columns
    ] == [
        "r2",
        "r3",
    ]


def test_it_refuses_more_than_20_runs_a_bad_id_and_a_run_of_another_suite(carol):
    suite, _ = three_runs()
    other = db_run({"x": "P"}, name="elsewhere", suite="T")
    many = ",".join(str(__import__("uuid").uuid4()) for _ in range(21))
    with pytest.raises(DomainError) as exc:
        GridQuery.from_params({"runs": many})
    assert exc.value.field == "runs"
    with pytest.raises(DomainError) as exc:
        GridQuery.from_params({"runs": "not-a-uuid"})
    assert exc.value.field == "runs"
    with pytest.raises(DomainError) as exc:
        GridQuery.from_params({"last": "0"})
    assert exc.value.field == "last"
    with pytest.raises(DomainError) as exc:
        grid_get(suite=suite, query=GridQuery(runs=(str(other.uuid),)), viewer=carol)
    assert exc.value.code == "not_found"


def _queries(fn) -> int:
    fn()  # the viewer's roles are read once per user object: count a warm call
    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len(ctx.captured_queries)


def test_the_query_count_does_not_grow_with_runs_cases_or_trials(carol):
    small = db_run({"a": "P", "b": "F"}, name="s1", suite="small")
    small_count = _queries(lambda: grid_get(suite=small.suite, query=GridQuery(), viewer=carol))
    for i in range(4):
        db_run({f"k{j}": "PFPF"[: 2 + i % 3] for j in range(12)}, name=f"b{i}", suite="big")
    big = Suite.objects.get(name="big")
    assert _queries(lambda: grid_get(suite=big, query=GridQuery(), viewer=carol)) == small_count
    case = Case.objects.get(suite=big, key="k3")
    one = Case.objects.get(suite=small.suite, key="a")
    assert _queries(lambda: case_history_get(case=case, viewer=carol)) == _queries(
        lambda: case_history_get(case=one, viewer=carol)
    )


def _cells(grid) -> dict:
    return {
        r.key: [(c.passed, c.graded, c.errored, c.trials) if c else None for c in r.cells]
        for r in grid.rows
    }


def test_a_cold_view_makes_as_many_queries_at_any_size(carol):
    small = db_run({"a": "P", "b": "F"}, name="s1", suite="small")
    for i in range(4):
        db_run({f"k{j}": "PFPF"[: 2 + i % 3] for j in range(12)}, name=f"b{i}", suite="big")
    big = Suite.objects.get(name="big")

    def cold(suite):
        def view():
            cache.clear()
            return grid_get(suite=suite, query=GridQuery(), viewer=carol)

        return view

    assert _queries(cold(big)) == _queries(cold(small.suite))


def test_a_finished_runs_column_is_cached_until_its_trials_or_grades_change(carol):
    suite, runs = three_runs()
    cache.clear()
    cold_count = _count(lambda: grid_get(suite=suite, query=GridQuery(), viewer=carol))
    warm_count = _count(lambda: grid_get(suite=suite, query=GridQuery(), viewer=carol))
    assert warm_count < cold_count  # the trials and grades were not read again
    before = _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol))
    cache.clear()
    assert _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol)) == before
    assert before["a"][2] == (3, 3, 0, 3)

    # A gating grader added after the run finished (a judge run, an import of labels) fails
    # one trial of case a in r3 and has not graded the other two (missing: not graded): the
    # cached column is not served.
    trial = Trial.objects.get(run=runs[2], case__key="a", attempt=1)
    Grade.objects.create(trial=trial, grader="late", status="ok", passed=False, gating=True)
    after = _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol))
    assert after["a"][2] == (0, 1, 0, 3)
    # A grader outside the set that gates leaves r3's other trials ungraded; r1 and r2 are
    # served from the cache, unchanged.
    assert after["b"][2] == (0, 0, 0, 3)
    assert {k: v[:2] for k, v in after.items()} == {k: v[:2] for k, v in before.items()}
    # A trial added to a finished run (a top-up round) shows at once too.
    add_trial(runs[2], "a", 4, grades={"judge": True})
    assert _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol))["a"][2] == (0, 1, 0, 4)
    # A case's tags are read fresh, never from the cache.
    Case.objects.filter(suite=suite, key="c").update(tags=["new-tag"])
    grid = grid_get(suite=suite, query=GridQuery(tag="new-tag"), viewer=carol)
    assert [r.key for r in grid.rows] == ["c"]


def test_a_grade_regraded_in_place_shows_in_a_finished_runs_column_at_once(carol):
    suite, runs = three_runs()
    cache.clear()
    before = _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol))  # cached now
    assert before["a"] == [(3, 3, 0, 3), (3, 3, 0, 3), (3, 3, 0, 3)]
    assert before["b"][0] == (1, 3, 0, 3)
    # A regrade on the same rows, no new grade (passed updated in place) in r1: case a's
    # first trial now fails, case b's second trial now passes.
    Grade.objects.filter(trial__run=runs[0], trial__case__key="a", trial__attempt=1).update(
        passed=False
    )
    Grade.objects.filter(trial__run=runs[0], trial__case__key="b", trial__attempt=2).update(
        passed=True
    )
    after = _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol))
    assert after["a"] == [(2, 3, 0, 3), (3, 3, 0, 3), (3, 3, 0, 3)]
    assert after["b"][0] == (2, 3, 0, 3)
    # An errored regrade of case c's first trial in r1 (status in place): left out, counted.
    Grade.objects.filter(trial__run=runs[0], trial__case__key="c", trial__attempt=1).update(
        passed=None, status=Grade.Status.ERROR
    )
    assert _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol))["c"][0] == (2, 2, 1, 3)


def test_a_run_that_is_not_finished_is_never_cached(carol):
    suite, runs = three_runs()
    Run.objects.filter(id=runs[2].id).update(status=Run.Status.RUNNING)
    running = Run.objects.get(id=runs[2].id)
    keys = grid_column_keys(runs=[runs[0], running])
    assert keys[running.id] is None and keys[runs[0].id] is not None
    grid_get(suite=suite, query=GridQuery(), viewer=carol)
    # A change no key would see (a grade updated in place) shows while the run runs.
    Grade.objects.filter(trial__run=running, trial__case__key="a").update(passed=False)
    assert _cells(grid_get(suite=suite, query=GridQuery(), viewer=carol))["a"][2] == (0, 3, 0, 3)


def test_blindness_applies_to_a_column_an_engineer_cached(client, bob, carol):
    run, version, trials = judged_run(4, judge_fails=2)
    calibration_set(run, version, trials[:2])
    seen = grid_get(suite=run.suite, query=GridQuery(), viewer=carol)  # fills the cache
    assert seen.hidden_cells == 0
    grid = grid_get(suite=run.suite, query=GridQuery(), viewer=bob)
    cells = {r.key: r.cells[0] for r in grid.rows}
    assert cells["c01"].hidden and cells["c02"].hidden and not cells["c03"].hidden
    assert grid.columns[0].hidden and grid.columns[0].quality is None
    # and the engineer's next (cached) view still shows every verdict
    again = grid_get(suite=run.suite, query=GridQuery(), viewer=carol)
    assert again.hidden_cells == 0 and again.columns[0].quality is not None


def _count(fn) -> int:
    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len(ctx.captured_queries)


def test_a_case_history_lists_every_run_newest_first_with_its_trials(carol):
    suite, runs = three_runs()
    baseline_set(suite=suite, run=runs[0])
    history = case_history_get(case=Case.objects.get(suite=suite, key="b"), viewer=carol)
    assert [r.run_name for r in history.runs] == ["r3", "r2", "r1"]
    assert [(r.passed, r.graded) for r in history.runs] == [(3, 3), (2, 3), (1, 3)]
    assert history.flaky_runs == 2 and history.runs[2].is_baseline
    assert [t.verdict for t in history.runs[1].trials] == ["pass", "pass", "fail"]
    assert [t.attempt for t in history.runs[1].trials] == [1, 2, 3]


def test_a_reviewer_still_labeling_sees_no_verdict_of_a_blind_trial(client, bob, carol):
    run, version, trials = judged_run(4, judge_fails=2)
    db_run({"c01": "PP"}, name="later", suite=run.suite.name)
    calibration_set(run, version, trials[:2])
    suite = run.suite

    grid = grid_get(suite=suite, query=GridQuery(), viewer=bob)
    blind_col = [c.name for c in grid.columns].index("r1")
    cells = {r.key: r.cells[blind_col] for r in grid.rows}
    assert cells["c01"].hidden and cells["c02"].hidden
    assert cells["c01"].graded == 0 and cells["c01"].rate is None
    assert not cells["c03"].hidden and cells["c03"].passed == 1
    assert grid.columns[blind_col].hidden and grid.columns[blind_col].quality is None
    # c01 of the later run shares its input with an item (the same case): hidden too.
    assert grid.hidden_cells == 3
    # An engineer sees every verdict.
    seen = grid_get(suite=suite, query=GridQuery(), viewer=carol)
    assert seen.hidden_cells == 0
    assert {r.key: r.cells[blind_col].passed for r in seen.rows}["c01"] == 0

    history = case_history_get(case=trials[0].case, viewer=bob)
    r1 = next(r for r in history.runs if r.run_name == "r1")
    assert r1.hidden and r1.graded == 0 and {t.verdict for t in r1.trials} == {""}

    client.force_login(bob)
    page = client.get(reverse("evals:suite-grid", args=[suite.uuid])).content.decode()
    assert "hidden while you label" in page
    api = client.get(f"/api/suites/{suite.uuid}/grid").json()
    hidden = [r["cells"][blind_col] for r in api["results"] if r["key"] in ("c01", "c02")]
    assert all(c["hidden"] and c["rate"] is None and c["passed"] == 0 for c in hidden)
    assert api["columns"][blind_col]["quality"] is None
    body = client.get(
        reverse("interop:grid-export", args=[suite.uuid]) + "?format=csv"
    ).content.decode()
    c01 = [line for line in body.splitlines() if line.startswith("c01,") and ",r1," in line]
    assert c01 and ",,,,,,,,true," in c01[0]

    # Once bob has labeled the set, the cells are back.
    for t in trials[:2]:
        Label.objects.create(trial=t, reviewer=bob, verdict="pass")
    assert grid_get(suite=suite, query=GridQuery(), viewer=bob).hidden_cells == 0


def test_the_page_filters_and_links_to_histories_and_trials(client, bob, mallory):
    suite, runs = three_runs()
    client.force_login(bob)
    url = reverse("evals:suite-grid", args=[suite.uuid])
    page = client.get(url + "?flaky=1&sort=key").content.decode()
    assert 'data-flaky="1"' in page and "3 of 4 cases shown" in page
    assert reverse("evals:case-history", args=[suite.uuid, Case.objects.get(key="b").uuid]) in page
    b = Case.objects.get(key="b")
    assert "ci-mark" in page and 'title="1/3 passed, 95% CI [' in page
    bad = client.get(url + "?last=99")
    assert bad.status_code == 400 and "last" in bad.content.decode()
    history = client.get(reverse("evals:case-history", args=[suite.uuid, b.uuid])).content.decode()
    assert (
        "flaky" in history
        and reverse("evals:trial-detail", args=[b.trials.first().uuid])[:7] in history
    )
    client.force_login(mallory)
    assert client.get(url).status_code == 403


def test_the_api_pages_the_rows_with_a_cursor(client, carol):
    suite, _ = three_runs()
    client.force_login(carol)
    first = client.get(f"/api/suites/{suite.uuid}/grid?page_size=3&sort=key").json()
    assert [r["key"] for r in first["results"]] == ["a", "b", "c"]
    assert first["n_rows"] == 4 and len(first["columns"]) == 3
    second = client.get(first["next"]).json()
    assert [r["key"] for r in second["results"]] == ["d"] and second["next"] is None
    assert second["results"][0]["cells"][0] is None
    b = first["results"][1]["cells"][0]
    assert (b["passed"], b["graded"], b["flaky"]) == (1, 3, True) and b["low"] < b["high"]
    assert client.get(f"/api/suites/{suite.uuid}/grid?last=21").json()["field"] == "last"
    assert client.get(f"/api/suites/{suite.uuid}/grid?cursor=zz").status_code == 400
    case = Case.objects.get(key="b")
    history = client.get(f"/api/suites/{suite.uuid}/cases/{case.uuid}/history").json()
    assert [r["run_name"] for r in history["runs"]] == ["r3", "r2", "r1"]
    assert history["flaky_runs"] == 2
    schema = client.get("/api/schema/").content.decode()
    assert "/api/suites/{suite_id}/grid" in schema


def test_the_export_writes_one_row_per_cell_as_csv_and_parquet(client, carol):
    suite, _ = three_runs()
    client.force_login(carol)
    url = reverse("interop:grid-export", args=[suite.uuid])
    csv_text = client.get(url + "?format=csv&sort=key").content.decode()
    lines = csv_text.strip().split("\r\n")
    assert lines[0].startswith("case_id,case_uuid,tags,run_uuid,run_name,run_created_at")
    assert len(lines) == 1 + 3 + 3 + 3 + 2  # d is in two runs
    parquet = client.get(f"/api/suites/{suite.uuid}/grid/export?format=parquet&flaky=true")
    table = pq.read_table(io.BytesIO(parquet.content)).to_pylist()
    assert {r["case_id"] for r in table} == {"b", "c", "d"}
    b1 = next(r for r in table if r["case_id"] == "b" and r["run_name"] == "r1")
    assert (b1["passed"], b1["graded"], b1["flaky"], b1["hidden"]) == (1, 3, True, False)


def test_the_cost_quality_chart_marks_the_baseline_and_leaves_out_unknown_costs(client, carol):
    suite, runs = three_runs()
    baseline_set(suite=suite, run=runs[0])
    db_run({"a": "P"}, name="<b>unpriced</b>", cost=None)
    client.force_login(carol)
    svg = client.get(reverse("evals:suite-cost-quality-chart", args=[suite.uuid]))
    assert svg["Content-Type"].startswith("image/svg+xml")
    text = svg.content.decode()
    assert text.count('<g class="run') == 3 and text.count('class="run baseline"') == 1
    assert "baseline: r1" in text and "<b>unpriced" not in text
    assert "$0.0010 per trial" in text
    page = client.get(reverse("evals:suite-detail", args=[suite.uuid])).content.decode()
    assert 'id="cost-quality-chart"' in page


def test_the_interval_mark_is_never_of_zero_width():
    assert mark_classes(1.0, 1.0) == "l19 w1"
    assert mark_classes(0.0, 0.0) == "l0 w1"
    assert mark_classes(0.21, 0.94) == "l4 w15"
    json.dumps(mark_classes(0.5, 0.5))


def test_case_keys_and_tags_are_escaped_in_the_grid(client, carol):
    run = db_run({"<img src=x onerror=alert(1)>": "PF"}, name="r")
    Case.objects.filter(suite=run.suite).update(tags=['<b onclick="x">t</b>'])
    client.force_login(carol)
    page = client.get(reverse("evals:suite-grid", args=[run.suite.uuid])).content.decode()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<b onclick" not in page and "&lt;b onclick=&quot;x&quot;&gt;" in page


def test_the_cost_quality_chart_leaves_out_a_run_blind_for_the_reviewer(client, bob, carol):
    run, version, trials = judged_run(3, judge_fails=1)
    Run.objects.filter(id=run.id).update(name="blind-run")
    calibration_set(run, version, trials[:1])

    for_bob = cost_quality_chart_get(suite=run.suite, viewer=bob)
    assert for_bob.points == [] and for_bob.left_out == [("blind-run", "hidden while you label")]
    for_carol = cost_quality_chart_get(suite=run.suite, viewer=carol)
    assert for_carol.left_out[0][0] == "blind-run"
    assert for_carol.left_out[0][1] != "hidden while you label"


@pytest.mark.parametrize(
    ("query", "field"),
    [("change=bogus", "change"), ("sort=%3Cscript%3E", "sort"), ("flaky=maybe", "flaky")],
)
def test_a_malformed_grid_parameter_is_a_400_naming_it_on_page_api_and_export(
    client, carol, query, field
):
    """docs/api.md: a malformed parameter is a 400 naming it, never silently ignored (the
    grid fell back to no filter / the default sort). The message names it once: "last:
    last: expected ..." read twice."""
    suite, _ = three_runs()
    client.force_login(carol)
    api = client.get(f"/api/suites/{suite.uuid}/grid?{query}")
    assert api.status_code == 400 and api.json()["field"] == field
    assert api.json()["detail"].startswith(f"{field}: expected")
    page = client.get(reverse("evals:suite-grid", args=[suite.uuid]) + f"?{query}")
    assert page.status_code == 400 and f"{field}: expected" in page.content.decode()
    export = client.get(f"/api/suites/{suite.uuid}/grid/export?format=csv&{query}")
    assert export.status_code == 400
    last = client.get(f"/api/suites/{suite.uuid}/grid?last=0").json()["detail"]
    assert last.startswith("last: expected") and "last: last" not in last


def test_the_grid_accepts_its_own_links_and_documented_values(client, carol):
    suite, _ = three_runs()
    client.force_login(carol)
    for query in ("flaky=1", "flaky=true", "flaky=", "flaky=false", "change=", "change=flaky"):
        assert client.get(f"/api/suites/{suite.uuid}/grid?{query}").status_code == 200, query
