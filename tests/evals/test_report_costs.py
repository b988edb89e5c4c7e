"""What a run's costs rest on, as every surface says it: the token classes priced and, per
reason, how many trials' cost is unknown (run page, ``run_report``, the API)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from core.money import usd_text
from evals.models import Trial
from evals.report.costs import NO_BASIS, runs_cost_classes
from evals.report.selectors import run_report
from evals.reprice import run_reprice
from evals.selectors import run_list_stats
from providers.models import ModelPrice
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db

NO_CACHE_PRICE = "cache_read has no price for acme-2"


def _run():
    run = make_run(cases=[(f"k{i}", []) for i in range(5)], graders=[], name="R", suite="S")
    priced = {"model": "acme-2", "price": "acme*", "source": "project override"}
    for i in range(2):
        t = add_trial(run, f"k{i}", 1, cost="0.001", tokens=(10, 10))
        Trial.objects.filter(id=t.id).update(
            cache_read_tokens=0, cost_basis={**priced, "classes": ["input", "output"]}
        )
    for i in (2, 3):
        t = add_trial(run, f"k{i}", 1, tokens=(10, 10))
        Trial.objects.filter(id=t.id).update(
            cache_read_tokens=7, cost_basis={**priced, "unknown": [NO_CACHE_PRICE]}
        )
    add_trial(run, "k4", 1, status="error", error="boom")
    return run


def test_it_says_which_classes_were_priced_and_what_made_each_cost_unknown():
    run = _run()
    classes = runs_cost_classes(runs=[run])[run.id]
    assert classes.priced == ["input", "output"]
    assert classes.unknown == [(NO_CACHE_PRICE, 2), ("the trial errored", 1)]
    assert classes.lines == [
        f"cost unknown for 2 trials: {NO_CACHE_PRICE}",
        "cost unknown for 1 trial: the trial errored",
    ]
    report = run_report(run=run)
    assert report.cost_classes == classes
    assert report.cost_quality.note == (
        f"cost unknown for 3 of 5 trials: {NO_CACHE_PRICE} (2); the trial errored (1)"
    )
    # Token sums by class: the errored trial reported none (unknown), the others 0 and 7.
    tokens = report.to_dict()["tokens"]
    assert (tokens["cache_read"], tokens["cache_read_unknown"]) == (14, 1)
    assert (tokens["cache_write"], tokens["cache_write_unknown"]) == (0, 5)
    assert report.to_dict()["cost_classes"]["unknown"] == [
        [NO_CACHE_PRICE, 2],
        ["the trial errored", 1],
    ]


def test_a_trial_without_a_basis_says_so():
    run = make_run(cases=[("a", [])], graders=[])
    add_trial(run, "a", 1, tokens=(1, 1))
    assert runs_cost_classes(runs=[run])[run.id].unknown == [(NO_BASIS, 1)]


def test_the_run_page_and_the_command_show_the_classes_and_the_reprice(carol):
    run = _run()
    ModelPrice.objects.create(
        model="acme*",
        input_usd_per_mtok="1",
        output_usd_per_mtok="1",
        cache_read_usd_per_mtok="0.1",
    )
    run_reprice(run=run, by=carol, via="page")
    out = io.StringIO()
    call_command("run_report", str(run.uuid), stdout=out)
    assert "token classes priced: input, output, cache_read" in out.getvalue()
    assert "cost unknown for 1 trial: the trial errored" in out.getvalue()

    client = Client()
    client.force_login(carol)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'id="cost-classes"' in page and "<code>cache_read</code>" in page
    assert '<dt>Cache read tokens</dt><dd class="token-class">≥ 14 ' in page
    assert '<dt>Cache write tokens</dt><dd class="token-class">not reported</dd>' in page
    assert 'id="reprices"' in page
    # Every priced trial changed: the two unknown ones, and the two known at the new price.
    assert "by carol: 4 trials and 0 judge calls re-priced" in page
    record = run.reprices.get()
    assert (record.old_unknown, record.new_unknown) == (2, 0) and record.old_usd is not None
    total = f"total {usd_text(record.old_usd)} known, 2 costs unknown → {usd_text(record.new_usd)}"
    assert total in page


def test_the_api_trial_rows_carry_the_token_classes_and_the_basis(bob):
    run = _run()
    client = APIClient()
    client.force_authenticate(bob)
    rows = client.get(f"/api/trials/?run={run.uuid}&status=ok").json()["results"]
    by_read = {r["cache_read_tokens"]: r for r in rows}
    assert set(by_read) == {0, 7}
    assert by_read[7]["cost_basis"]["unknown"] == [NO_CACHE_PRICE]
    assert by_read[7]["cost_usd"] is None
    assert {r["cache_write_tokens"] for r in rows} == {None}
    assert {r["reasoning_tokens"] for r in rows} == {None}
    detail = client.get(f"/api/trials/{by_read[0]['uuid']}/").json()
    assert detail["cost_basis"]["classes"] == ["input", "output"]


def test_the_run_lists_cost_note_says_why():
    run = _run()
    stats = run_list_stats(runs=[run])[run.id]
    assert stats.quality.note == (
        f"cost unknown for 3 of 5 trials: {NO_CACHE_PRICE}; the trial errored"
    )
