"""What changed, always visible: the run page's target card, the comparison's config diff,
"start a run like this one" (?like=), the run list's baseline badge and regression flag, the
grid's grader-set warning, the live pass rate card and the comparison's docs reference."""

from __future__ import annotations

import io
import re

import pytest
from django.core.cache import cache, caches
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evals import selectors
from evals.grid.build import GridQuery, grid_get
from evals.grid.grader_sets import GRADERS_DIFFER
from evals.models import Baseline, Case, Run, Suite
from evals.runner.start import run_start
from evals.target_shown import MASKED
from tests.comparison_builders import db_run
from tests.core.test_api_core import client_for
from tests.page_text import visible_text
from tests.report_builders import add_trial, make_run

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
HOSTILE = "<img src=x onerror=alert(1)>"
GRADERS = [{"key": "judge", "kind": "contains", "config": {"value": "x"}}]
TARGET = {
    "kind": "openai",
    "provider": "azure",
    "deployment": "dep-1",
    "api_version": "2024-10-21",
    "base_url": "https://res.openai.azure.com",
    "model": "gpt-4o-mini",
    "api_key_env": "AZURE_OPENAI_API_KEY",
    "prompt_template": f"Answer briefly {HOSTILE}: $input",
    "settings": {"temperature": 0.2, "api_key": KEY},
}


def model_run(name: str, *, target: dict | None = None, graders=None, suite="S") -> Run:
    s, _ = Suite.objects.get_or_create(name=suite)
    return Run.objects.create(
        suite=s,
        name=name,
        target_kind="openai",
        model="gpt-4o-mini",
        target=target or TARGET,
        graders=graders or GRADERS,
        trials_per_case=3,
        status=Run.Status.SUCCEEDED,
    )


# 1. The run page shows its target -----------------------------------------------------------


def test_the_run_page_shows_the_target_escaped_and_never_a_key(client, bob, db):
    run = model_run("r1")
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    text = visible_text(page)
    for shown in ("dep-1", "2024-10-21", "https://res.openai.azure.com", "AZURE_OPENAI_API_KEY"):
        assert shown in text
    assert "Answer briefly" in text and "Setting temperature" in text
    assert HOSTILE not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert KEY not in page
    assert 'id="run-like-this"' not in page  # a reviewer starts no run


def test_the_api_gives_the_target_as_shown_with_the_key_masked(bob, db):
    run = model_run("r1")
    data = client_for(bob).get(f"/api/runs/{run.uuid}/").json()
    rows = {r["key"]: r["value"] for r in data["target_shown"]}
    assert {r["key"]: r["title"] for r in data["target_shown"]}["deployment"] == "Deployment"
    assert rows["deployment"] == "dep-1" and rows["api_key_env"] == "AZURE_OPENAI_API_KEY"
    assert rows["settings.api_key"] == MASKED and KEY not in str(data["target_shown"])


# 2. The comparison's config diff ------------------------------------------------------------


def test_the_comparison_shows_the_template_diff_and_the_changed_settings(client, bob, db):
    base = db_run({"c1": "PPP"}, name="base", graders=GRADERS)
    head = db_run({"c1": "PPP"}, name="head", graders=[*GRADERS, {"key": "e", "kind": "exact"}])
    Run.objects.filter(pk=base.pk).update(target=TARGET)
    head_target = {**TARGET, "prompt_template": "Answer in detail: $input", "settings": {}}
    Run.objects.filter(pk=head.pk).update(target=head_target)
    client.force_login(bob)
    page = client.get(reverse("evals:comparison", args=[head.uuid, base.uuid])).content.decode()
    assert 'id="target-diff"' in page
    assert '<span class="diff-ins">detail:</span>' in page
    assert '<span class="diff-del">briefly</span>' in page
    assert HOSTILE not in page and KEY not in page
    assert 'data-key="settings.temperature"' in page
    assert 'class="table grader-changes"' in page and "added" in visible_text(page)


def test_equal_targets_say_no_change(client, bob, db):
    base = db_run({"c1": "PPP"}, name="base", graders=GRADERS)
    head = db_run({"c1": "PPP"}, name="head", graders=GRADERS)
    client.force_login(bob)
    page = client.get(reverse("evals:comparison", args=[head.uuid, base.uuid])).content.decode()
    assert "No change in the target." in page and "Same grader set." in page


def test_the_statistics_reference_is_not_a_link_to_the_run_list(client, bob, db):
    base = db_run({"c1": "PPP"}, name="base", graders=GRADERS)
    head = db_run({"c1": "PPP"}, name="head", graders=GRADERS)
    client.force_login(bob)
    page = client.get(reverse("evals:comparison", args=[head.uuid, base.uuid])).content.decode()
    assert "docs/statistics.md" in page
    assert '<a href="/runs/">docs/statistics.md</a>' not in page
    assert '<code class="docs-ref">docs/statistics.md</code>' in page


# 3. Start a run like this one ---------------------------------------------------------------


def test_an_engineer_gets_the_form_filled_from_the_run(client, carol, db):
    run = model_run("nightly")
    client.force_login(carol)
    assert 'id="run-like-this"' in client.get(run.get_absolute_url()).content.decode()
    response = client.get(reverse("evals:run-new") + f"?like={run.uuid}")
    assert response.status_code == 200
    form = response.context["form"]
    initial = form.initial
    assert initial["suite"] == run.suite and initial["name"] == "nightly (copy)"
    assert initial["target_kind"] == "openai" and initial["provider"] == "azure"
    assert (initial["deployment"], initial["api_version"]) == ("dep-1", "2024-10-21")
    assert initial["api_key_env"] == "AZURE_OPENAI_API_KEY"
    assert initial["prompt_template"] == TARGET["prompt_template"]
    assert initial["trials_per_case"] == 3 and '"judge"' in initial["graders"]
    page = response.content.decode()
    assert KEY not in page  # a key-looking setting is never prefilled
    assert HOSTILE not in page


def test_the_copy_name_is_numbered_when_taken_and_the_prefilled_form_starts_a_run(
    client, carol, db
):
    suite = Suite.objects.create(name="S2")
    run = Run.objects.create(
        suite=suite,
        name="sim",
        target_kind="simulated",
        target={"kind": "simulated", "seed": 7, "default_pass_probability": 0.4},
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=2,
        status=Run.Status.SUCCEEDED,
    )
    Run.objects.create(suite=suite, name="sim (copy)", target_kind="simulated")
    client.force_login(carol)
    initial = client.get(reverse("evals:run-new") + f"?like={run.uuid}").context["form"].initial
    assert initial["name"] == "sim (copy 2)"
    assert (initial["seed"], initial["pass_probability"]) == (7, 0.4)


def test_like_naming_no_run_is_a_404_naming_the_parameter_and_malformed_a_400(client, carol, db):
    client.force_login(carol)
    unknown = "00000000-0000-0000-0000-000000000000"
    response = client.get(reverse("evals:run-new") + f"?like={unknown}")
    assert response.status_code == 404
    assert client.get(reverse("evals:run-new") + "?like=zzz").status_code == 400


def test_a_reviewer_asking_for_a_copy_gets_the_start_forms_403(client, bob, db):
    run = model_run("r1")
    client.force_login(bob)
    assert client.get(reverse("evals:run-new") + f"?like={run.uuid}").status_code == 403


def test_an_imported_run_cannot_be_copied_and_says_so(client, carol, db):
    run = model_run("imp", target={"kind": "imported", "format": "jsonl", "file": "a.jsonl"})
    Run.objects.filter(pk=run.pk).update(source=Run.Source.IMPORTED)
    client.force_login(carol)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-like-this"' not in page and "cannot be started again" in page
    response = client.get(reverse("evals:run-new") + f"?like={run.uuid}")
    assert response.status_code == 200
    assert "cannot be started again" in response.content.decode()
    assert response.context["form"].initial.get("name") in (None, "")


def test_target_keys_the_form_cannot_carry_are_named(client, carol, db):
    run = model_run("tools", target={**TARGET, "tools": ["lookup"], "concurrency": 4})
    client.force_login(carol)
    page = client.get(reverse("evals:run-new") + f"?like={run.uuid}").content.decode()
    assert "Not carried over" in page and "concurrency, tools" in page


# 4. The run list: baseline badge, regression flag -------------------------------------------


def blocking_pair():
    cases_pass = {f"c{i}": "PPPPP" for i in range(8)}
    cases_fail = {f"c{i}": "FFFFF" for i in range(8)}
    base = db_run(cases_pass, name="base", graders=GRADERS)
    head = db_run(cases_fail, name="head", graders=GRADERS)
    Baseline.objects.create(suite=base.suite, run=base)
    return base, head


def marks_by_name():
    return {r.name: r.mark for r in selectors.run_list().object_list}


def test_the_baseline_has_its_badge_and_an_undecided_run_says_not_compared(client, bob, db):
    blocking_pair()
    marks = marks_by_name()
    assert marks["base"].is_baseline and not marks["head"].is_baseline
    assert marks["head"].verdict == "not compared" and not marks["head"].regression
    client.force_login(bob)
    page = client.get(reverse("evals:run-list")).content.decode()
    assert 'class="badge baseline"' in page and "not compared" in page


def test_a_run_the_gate_blocks_against_the_baseline_is_flagged_until_it_changes(client, bob, db):
    base, head = blocking_pair()
    client.force_login(bob)
    comparison = client.get(reverse("evals:comparison", args=[head.uuid, base.uuid]))
    assert 'data-verdict="block"' in comparison.content.decode()
    assert marks_by_name()["head"].regression
    page = client.get(reverse("evals:run-list")).content.decode()
    assert 'class="badge fail regression"' in page
    add_trial(head, "c0", 6, grades={"judge": True})  # the head changed: decided no more
    assert marks_by_name()["head"].verdict == "not compared"


def test_the_gate_command_and_the_api_flag_it_too_but_only_at_the_defaults(bob, db):
    base, head = blocking_pair()
    api = client_for(bob)
    query = f"base={base.uuid}&head={head.uuid}"
    assert api.get(f"/api/comparisons/?{query}&alpha=0.1").status_code == 200
    assert marks_by_name()["head"].verdict == "not compared"  # another alpha: not the flag's
    with pytest.raises(SystemExit) as exit_info:
        call_command("gate", "--head", str(head.uuid), "--max-errored-fraction", "0.5")
    assert exit_info.value.code == 1
    assert marks_by_name()["head"].verdict == "not compared"  # another policy
    with pytest.raises(SystemExit):
        call_command("gate", "--head", str(head.uuid), stdout=io.StringIO())
    assert marks_by_name()["head"].regression
    cache.clear()
    caches["shared"].clear()
    assert api.get(f"/api/comparisons/?{query}").json()["decision"]["verdict"] == "block"
    assert marks_by_name()["head"].regression


def test_the_marks_queries_do_not_grow_with_the_runs(db):
    base, head = blocking_pair()

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            list(selectors.run_list().object_list)
        return len(ctx)

    few = count()
    for i in range(12):
        db_run({"c0": "PP"}, name=f"more{i}", graders=GRADERS)
    assert count() == few


# 5. The grid: grader sets -------------------------------------------------------------------


def test_the_grid_warns_of_grader_sets_and_calls_no_case_broken_for_a_missing_grader(alice):
    """Run "old" gated on "a" only, "new" and "newest" also on "b", which fails 11 of 12 cases
    in "newest": from "old" those cases are "graders differ", not "broken"; from "new" (the
    same set) they are broken as usual, with no warning."""
    one = [{"key": "a", "kind": "exact"}]
    two = [{"key": "a", "kind": "exact"}, {"key": "b", "kind": "exact"}]
    keys = [f"k{i:02d}" for i in range(12)]
    r1 = make_run(cases=[(k, []) for k in keys], graders=one, name="old")
    r2 = make_run(cases=[(k, []) for k in keys], graders=two, name="new")
    r3 = make_run(cases=[(k, []) for k in keys], graders=two, name="newest")
    for i, key in enumerate(keys):
        add_trial(r1, key, 1, grades={"a": True})
        add_trial(r2, key, 1, grades={"a": True, "b": True})
        add_trial(r3, key, 1, grades={"a": True, "b": i == 0})
    grid = grid_get(suite=r1.suite, query=GridQuery(), viewer=alice)
    changes = [row.change for row in grid.rows]
    assert "broken" not in changes
    assert changes.count(GRADERS_DIFFER) == 12
    [warning] = grid.grader_warnings
    assert "'old'" in warning and "lacks b" in warning
    same = GridQuery(runs=(str(r2.uuid), str(r3.uuid)))
    grid = grid_get(suite=r1.suite, query=same, viewer=alice)
    assert [row.change for row in grid.rows].count("broken") == 11
    assert grid.grader_warnings == ()


def test_the_grid_page_shows_the_warning_and_filters_on_graders_differ(client, bob, db):
    one = [{"key": "a", "kind": "exact"}]
    r1 = make_run(cases=[("k1", [])], graders=one, name="old")
    r2 = make_run(cases=[("k1", [])], graders=[*one, {"key": "b", "kind": "exact"}], name="new")
    add_trial(r1, "k1", 1, grades={"a": True})
    add_trial(r2, "k1", 1, grades={"a": True, "b": False})
    client.force_login(bob)
    url = reverse("evals:suite-grid", args=[r1.suite.uuid])
    page = client.get(url).content.decode()
    assert 'id="grid-grader-warning"' in page and "lacks b" in page
    assert client.get(url + "?change=graders+differ").status_code == 200
    api = client_for(bob).get(f"/api/suites/{r1.suite.uuid}/grid?change=graders+differ").json()
    assert [r["change"] for r in api["results"]] == [GRADERS_DIFFER]
    assert "lacks b" in api["grader_warnings"][0]


# 6. The live report -------------------------------------------------------------------------


def test_the_progress_poll_brings_the_pass_rate_card_as_it_stands(client, bob, db):
    run = make_run(cases=[("c1", []), ("c2", [])], graders=[{"key": "e", "kind": "exact"}], n=2)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, trials_total=4)
    client.force_login(bob)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-live-report"' in page
    assert "undefined" not in visible_text(page) and "not graded yet" in page
    progress = reverse("evals:run-progress", args=[run.uuid])
    first = client.get(progress).content.decode()
    assert 'hx-swap-oob="true"' in first and "not graded yet" in first
    state = re.search(r"hx-vals='\{\"card\": \"([0-9.]+)\"\}'", first)
    assert state is not None
    shown = state.group(1)
    unchanged = client.get(progress, {"card": shown}).content.decode()
    assert "hx-swap-oob" not in unchanged  # nothing new: the card is not sent again
    add_trial(run, "c1", 1, grades={"e": True})
    add_trial(run, "c2", 1, grades={"e": False})
    Run.objects.filter(pk=run.pk).update(trials_finished=2)
    second = visible_text(client.get(progress, {"card": shown}).content.decode())
    assert "50.0%" in second and "undefined" not in second
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    last = client.get(progress)
    assert last.status_code == 286 and "hx-swap-oob" not in last.content.decode()


@pytest.mark.parametrize("blind", [True])
def test_a_blind_reviewer_gets_no_live_card(client, bob, db, blind, monkeypatch):
    run = make_run(cases=[("c1", [])], graders=[{"key": "e", "kind": "exact"}])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, trials_total=1)
    monkeypatch.setattr("evals.views.runs.run_is_blind", lambda user, run: blind)
    client.force_login(bob)
    body = client.get(reverse("evals:run-progress", args=[run.uuid])).content.decode()
    assert "hx-swap-oob" not in body


def test_a_run_closing_decides_itself_against_the_baseline(django_capture_on_commit_callbacks, db):
    suite = Suite.objects.create(name="closing")
    Case.objects.bulk_create(
        Case(suite=suite, key=f"c{i}", input=f"q {i}", expected="yes", content_hash=f"{i:064d}")
        for i in range(12)
    )
    graders = [{"key": "says-yes", "kind": "contains", "config": {"value": "yes"}}]

    def start(name: str, p: float):
        with django_capture_on_commit_callbacks(execute=True):
            return run_start(
                suite=suite,
                name=name,
                target={"kind": "simulated", "model": "simulated", "seed": 5,
                        "default_pass_probability": p},
                graders=graders,
                trials_per_case=5,
            )  # fmt: skip

    good = start("good", 0.95)
    Baseline.objects.create(suite=suite, run=good)
    start("broken", 0.05)
    start("same", 0.95)
    marks = marks_by_name()
    assert marks["broken"].regression  # nobody opened the comparison
    assert marks["same"].verdict == "pass" and not marks["same"].regression
    assert marks["good"].is_baseline
