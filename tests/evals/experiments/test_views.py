"""The experiment pages (evals.views.experiments): the first view while running and once
decided, the variant × case grid, one case across variants, the list, who may see them, and the
number of queries, which does not grow with the suite."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evals.comparison.summary import run_summary_refresh
from evals.experiments import page as page_module
from evals.experiments.decision import experiment_decision_warm
from evals.experiments.start import experiment_start
from evals.models import Case, Experiment, Run, Suite, Trial
from tests.experiment_builders import experiment_built

pytestmark = pytest.mark.django_db


def _url(experiment: Experiment, name: str = "evals:experiment-detail") -> str:
    return reverse(name, kwargs={"experiment_id": experiment.uuid})


def _clear_gap(v: int, i: int, a: int) -> bool:
    """Variant 0 passes every case, variant 1 the first half, variant 2 none."""
    return v == 0 or (v == 1 and i < 10)


def test_a_decided_experiment_shows_the_sentence_the_set_the_table_and_the_grid(client, carol):
    experiment = experiment_built(labels=["good", "half", "bad"], n_cases=20, passes=_clear_gap)
    client.force_login(carol)
    response = client.get(_url(experiment))
    assert response.status_code == 200
    text = response.content.decode()
    assert 'id="experiment-sentence"' in text
    decision = response.context["decision"]
    assert decision.ready and decision.best == ("good",)
    assert decision.sentence in text
    assert 'id="experiment-variants"' in text and 'id="pareto-table"' in text
    assert "docs/statistics.md" in text and "/runs/statistics" not in text
    grid = response.context["grid"]
    assert grid.total == 20 and len(grid.rows) == 20
    # The separating cases first: "good" and "bad" always differ (gap 100%); none ties below.
    assert [r.spread for r in grid.rows] == sorted((r.spread for r in grid.rows), reverse=True)
    first = grid.rows[0]
    assert first.spread == 1.0
    assert [c.label for c in first.cells] == ["good", "half", "bad"]
    assert (first.cells[0].passed, first.cells[2].passed) == (1, 0)
    assert 'class="grid-cell"' in text and "1/1" in text and "0/1" in text


def test_the_grid_sorts_cases_whose_rates_differ_most_first(client, carol):
    # Case 3 separates (one passes, one fails); every other case all pass.
    experiment = experiment_built(
        labels=["a", "b"], n_cases=6, passes=lambda v, i, a: not (i == 3 and v == 1)
    )
    client.force_login(carol)
    rows = client.get(_url(experiment)).context["grid"].rows
    assert rows[0].case.key == "c0003" and rows[0].spread == 1.0
    assert [r.case.key for r in rows[1:]] == ["c0000", "c0001", "c0002", "c0004", "c0005"]
    by_case = client.get(_url(experiment) + "?sort=case").context["grid"].rows
    assert [r.case.key for r in by_case] == [f"c{i:04d}" for i in range(6)]


def test_a_large_grid_is_paged_and_says_how_many_more_cases(client, carol, monkeypatch):
    monkeypatch.setattr(page_module, "GRID_PAGE_SIZE", 5)
    experiment = experiment_built(labels=["a", "b"], n_cases=12, passes=lambda v, i, a: v == 0)
    client.force_login(carol)
    response = client.get(_url(experiment))
    grid = response.context["grid"]
    assert len(grid.rows) == 5 and grid.more == 7 and grid.pages == 3
    assert "7 more cases" in response.content.decode()
    last = client.get(_url(experiment) + "?page=3").context["grid"]
    assert len(last.rows) == 2 and last.more == 0


def test_while_running_the_page_shows_progress_and_waits_for_the_set(client, carol):
    experiment = experiment_built(
        labels=["a", "b"], n_cases=3, passes=lambda v, i, a: True, status=Run.Status.RUNNING
    )
    client.force_login(carol)
    text = client.get(_url(experiment)).content.decode()
    assert "The best set is decided when every variant has finished." in text
    assert 'id="experiment-sentence"' not in text
    assert 'hx-trigger="every 2s"' in text
    progress = client.get(_url(experiment, "evals:experiment-progress"))
    assert progress.status_code == 200
    Run.objects.filter(experiment_variant__experiment=experiment).update(
        status=Run.Status.SUCCEEDED
    )
    done = client.get(_url(experiment, "evals:experiment-progress"))
    assert done.status_code == 286  # stop polling
    assert 'data-swap="experiment-result"' in done.content.decode()


def test_an_experiment_started_and_run_is_decided_on_its_page(
    client, carol, django_capture_on_commit_callbacks
):
    suite = Suite.objects.create(name="support")
    Case.objects.bulk_create(
        Case(suite=suite, key=f"k{i}", input=f"q{i}", expected=f"a{i}", content_hash=f"{i:064d}")
        for i in range(30)
    )
    with django_capture_on_commit_callbacks(execute=True):  # eager Celery runs each variant
        experiment = experiment_start(
            suite=suite,
            name="p",
            variants=[
                {"label": label, "target": {"kind": "simulated", "default_pass_probability": p}}
                for label, p in (("strong", 0.95), ("weak", 0.05))
            ],
            graders=[{"key": "exact", "kind": "exact"}],
            trials_per_case=2,
            seed=3,
        )
    assert (
        not Trial.objects.filter(run__experiment_variant__experiment=experiment)
        .exclude(status=Trial.Status.OK)
        .exists()
    )
    client.force_login(carol)
    decision = client.get(_url(experiment)).context["decision"]
    assert decision.ready and decision.best == ("strong",)
    assert [v.label for v in decision.variants if not v.in_set] == ["weak"]


def test_the_first_view_makes_the_same_number_of_queries_whatever_the_size(client, carol):
    counts = []
    for n_cases in (20, 200):
        experiment = experiment_built(
            labels=[f"v{i}" for i in range(10)],
            n_cases=n_cases,
            name=f"e{n_cases}",
            passes=lambda v, i, a: (v + i) % 3 != 0,
        )
        client.force_login(carol)
        client.get(_url(experiment))  # the session and content types, read once
        with CaptureQueriesContext(connection) as queries:
            response = client.get(_url(experiment))
        assert response.status_code == 200 and response.context["grid"].total == n_cases
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_the_case_view_shows_each_variants_outputs_side_by_side_escaped(client, carol, settings):
    hostile = "<img src=x onerror=alert(1)>"
    experiment = experiment_built(
        labels=["left", "right"],
        n_cases=2,
        trials=2,
        passes=lambda v, i, a: v == 0,
        output=lambda v, i, a: f"{hostile} variant {v} attempt {a}" + ("z" * 3000 if v else ""),
    )
    client.force_login(carol)
    case = experiment.suite.cases.get(key="c0001")
    url = reverse(
        "evals:experiment-case", kwargs={"experiment_id": experiment.uuid, "case_key": case.uuid}
    )
    response = client.get(url)
    assert response.status_code == 200
    text = response.content.decode()
    assert hostile not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert text.count('data-variant="left"') == 1 and text.count('data-variant="right"') == 1
    # One row per attempt, the variants' trials of that attempt side by side.
    rows = [(a, [t.output for t in trials]) for a, trials in response.context["attempts"]]
    assert [(a, [o.split(" variant ")[1][:11] for o in outs]) for a, outs in rows] == [
        (1, ["0 attempt 1", "1 attempt 1"]),
        (2, ["0 attempt 2", "1 attempt 2"]),
    ]
    assert "Show all" in text  # the long outputs are cut, with a link to the whole
    by_key = client.get(
        reverse(
            "evals:experiment-case", kwargs={"experiment_id": experiment.uuid, "case_key": "c0001"}
        )
    )
    assert by_key.status_code == 200 and by_key.context["case"] == case
    missing = reverse(
        "evals:experiment-case", kwargs={"experiment_id": experiment.uuid, "case_key": "nope"}
    )
    assert client.get(missing).status_code == 404


def test_the_list_and_the_suite_page_show_experiments(client, bob):
    experiment = experiment_built(labels=["a", "b"], n_cases=2, passes=lambda v, i, a: True)
    client.force_login(bob)
    listed = client.get(reverse("evals:experiment-list")).content.decode()
    assert experiment.get_absolute_url() in listed
    assert 'id="experiment-new-link"' not in listed  # a reviewer starts nothing
    suite_page = client.get(
        reverse("evals:suite-detail", kwargs={"suite_id": experiment.suite.uuid})
    ).content.decode()
    assert 'id="suite-experiments"' in suite_page and experiment.get_absolute_url() in suite_page
    other = Suite.objects.create(name="other")
    filtered = client.get(reverse("evals:experiment-list") + f"?suite={other.uuid}")
    assert experiment.get_absolute_url() not in filtered.content.decode()
    assert client.get(reverse("evals:experiment-list") + "?suite=zzz").status_code == 400


def test_a_reviewer_with_nothing_to_label_sees_the_page_an_outsider_does_not(client, bob, mallory):
    experiment = experiment_built(labels=["a", "b"], n_cases=2, passes=lambda v, i, a: v == 0)
    client.force_login(bob)
    assert client.get(_url(experiment)).status_code == 200
    client.force_login(mallory)
    assert client.get(_url(experiment)).status_code == 403
    client.logout()
    assert client.get(_url(experiment)).status_code == 302


def test_the_chart_draws_the_variants_with_a_known_cost_and_names_the_others(client, carol):
    priced = experiment_built(labels=["a", "b", "c"], n_cases=4, passes=_clear_gap, name="p")
    client.force_login(carol)
    text = client.get(_url(priced)).content.decode()
    assert 'id="experiment-pareto"' in text and text.count('class="mark pareto-point') == 3
    assert 'id="pareto-left-out"' not in text and 'id="pareto-table"' in text
    unpriced = experiment_built(
        labels=["a", "b"], n_cases=4, passes=_clear_gap, name="u", cost=None
    )
    text = client.get(_url(unpriced)).content.decode()
    assert 'id="experiment-pareto"' not in text
    assert 'id="pareto-left-out"' in text and "a, b" in text
    table = text.split('id="pareto-table"')[1].split("</table>")[0]
    assert 'data-variant="a"' in table and 'data-variant="b"' in table  # still listed
    assert "unknown" in table


KEY = "sk-proj-" + "Zq9Xw8Vu7" * 5


def test_the_page_shows_each_variants_changes_against_the_first(client, carol):
    experiment = experiment_built(labels=["base", "chatty", "same"], n_cases=2, passes=_clear_gap)
    model = {
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "gpt-4o-mini",
        "api_key_env": None,
        "prompt_template": "Answer briefly: $input",
        "settings": {"temperature": 0.2},
    }
    chatty = {
        **model,
        "prompt_template": "Answer at length: $input",
        "settings": {"temperature": 1},
    }
    for label, target in (("base", model), ("chatty", chatty), ("same", model)):
        Run.objects.filter(experiment_variant__label=label).update(target=target)
    client.force_login(carol)
    text = client.get(_url(experiment)).content.decode()
    section = text.split('id="experiment-targets"')[1]
    chatty_part = section.split('data-variant="chatty"')[1].split('data-variant="same"')[0]
    assert "diff-ins" in chatty_part and "diff-del" in chatty_part
    assert KEY not in text  # a key-looking value is masked (evals.target_shown)
    assert "length" in chatty_part and "briefly" in chatty_part
    assert 'data-key="settings.temperature"' in chatty_part
    assert 'data-key="model"' not in chatty_part  # unchanged settings are not repeated
    same_part = section.split('data-variant="same"')[1]
    assert "The same target as base." in same_part
    assert 'data-key="prompt_template"' in section.split('data-variant="base"')[1]


def test_with_the_decision_warmed_at_close_the_queries_still_do_not_grow(client, carol):
    counts = []
    for n_cases in (20, 200):
        experiment = experiment_built(
            labels=[f"v{i}" for i in range(10)],
            n_cases=n_cases,
            name=f"w{n_cases}",
            passes=lambda v, i, a: (v + i) % 3 != 0,
        )
        runs = [v.run for v in experiment.variants.select_related("run")]
        for run in runs:
            run_summary_refresh(run=run)  # as run_finalize stores it
        experiment_decision_warm(run=runs[-1])
        client.force_login(carol)
        client.get(_url(experiment))  # the session and content types, read once
        with CaptureQueriesContext(connection) as queries:
            response = client.get(_url(experiment))
        assert response.context["decision"].ready and response.context["grid"].total == n_cases
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
