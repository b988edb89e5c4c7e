"""A trial keeps the price it was given; ``reprice_run`` prices a finished run again at
today's table, records it once, and changes nothing the second time."""

from __future__ import annotations

import io
import json
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command

from core.actors import Via
from core.errors import DomainError
from core.money import usd_text
from evals.fingerprint import run_fingerprints
from evals.models import Run, RunReprice, Trial
from evals.reprice import run_reprice
from providers.models import ModelPrice
from tests.evals.test_services_runner import (
    GRADERS,
    llm,  # noqa: F401 - the fixture
    make_suite,
    openai_target,
    start_and_execute,
)
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db


def _priced_later_run(django_capture_on_commit_callbacks, llm) -> Run:  # noqa: F811
    suite = make_suite({"a": "[answer=yes] a", "b": "[answer=yes] b"})
    return start_and_execute(
        django_capture_on_commit_callbacks,
        suite=suite,
        name="r1",
        target=openai_target(llm, model="acme-later-1"),
        graders=GRADERS,
        trials_per_case=2,
    )


def _expected(trial: Trial) -> Decimal:
    # 0.70 and 2.10 USD per 1M input and output tokens; the fake reports 0 cached and 0
    # reasoning tokens, priced or not.
    return (
        Decimal(trial.input_tokens) * Decimal("0.70")
        + Decimal(trial.output_tokens) * Decimal("2.10")
    ) / Decimal(1_000_000)


def test_a_price_added_later_reprices_nothing_until_asked(
    llm,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    run = _priced_later_run(django_capture_on_commit_callbacks, llm)
    trials = list(run.trials.order_by("id"))
    assert [t.cost_usd for t in trials] == [None] * 4
    assert trials[0].cost_basis == {
        "model": "acme-later-1",
        "price": None,
        "source": None,
        "unknown": ["no price for 'acme-later-1'"],
    }
    assert (trials[0].cache_read_tokens, trials[0].reasoning_tokens) == (0, 0)
    assert trials[0].cache_write_tokens is None  # OpenAI reports no cache writes

    ModelPrice.objects.create(
        model="acme-later*", input_usd_per_mtok=Decimal("0.70"), output_usd_per_mtok="2.10"
    )
    assert list(run.trials.values_list("cost_usd", flat=True)) == [None] * 4

    dry = io.StringIO()
    call_command("reprice_run", str(run.uuid), "--dry-run", "--json", stdout=dry)
    dry_run = json.loads(dry.getvalue())
    assert (dry_run["trials_changed"], dry_run["recorded"]) == (4, False)
    # No cost was known before: null, never 0; after, a number.
    assert (dry_run["old_usd"], dry_run["old_unknown"], dry_run["new_unknown"]) == (None, 4, 0)
    assert Decimal(dry_run["new_usd"]) > 0
    assert list(run.trials.values_list("cost_usd", flat=True)) == [None] * 4
    assert not RunReprice.objects.exists()

    out = io.StringIO()
    call_command("reprice_run", str(run.uuid), stdout=out)
    assert "4 trials and 0 judge calls re-priced" in out.getvalue()
    trials = list(run.trials.order_by("id"))
    new_text = usd_text(sum(_expected(t) for t in trials))
    assert f"total unknown (4 costs unknown) -> {new_text}" in out.getvalue()
    assert "$0 " not in out.getvalue()
    assert [t.cost_usd for t in trials] == [_expected(t) for t in trials]
    assert trials[0].cost_basis["price"] == "acme-later*"
    assert trials[0].cost_basis["source"] == "project override"
    record = RunReprice.objects.get()
    assert (record.run, record.via, record.by) == (run, Via.COMMAND, None)
    assert (record.trials_changed, record.old_unknown, record.new_unknown) == (4, 4, 0)
    assert (record.old_usd, record.new_usd) == (None, sum(_expected(t) for t in trials))
    assert (record.old_text, record.new_text) == ("unknown (4 costs unknown)", new_text)
    assert record.prices["acme-later-1"]["pattern"] == "acme-later*"
    assert record.prices["acme-later-1"]["usd_per_mtok"]["input"] == "0.700000"
    assert record.actor_text == "from the command line"


def test_repricing_twice_changes_nothing_and_records_once(
    llm,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    run = _priced_later_run(django_capture_on_commit_callbacks, llm)
    ModelPrice.objects.create(
        model="acme-later*", input_usd_per_mtok=Decimal("0.70"), output_usd_per_mtok="2.10"
    )
    first = run_reprice(run=run)
    costs = list(run.trials.order_by("id").values_list("cost_usd", "cost_basis"))
    second = run_reprice(run=run)

    assert (first.trials.changed, second.trials.changed) == (4, 0)
    assert second.record is None and RunReprice.objects.count() == 1
    assert list(run.trials.order_by("id").values_list("cost_usd", "cost_basis")) == costs
    assert second.trials.new_usd == second.trials.old_usd == first.trials.new_usd


def test_it_leaves_a_targets_own_cost_and_a_trial_without_a_basis_as_they_are():
    run = make_run(cases=[("a", []), ("b", []), ("c", [])], graders=[])
    own = add_trial(run, "a", 1, cost="0.5", tokens=(10, 10))
    Trial.objects.filter(id=own.id).update(cost_basis={"source": "target"})
    old = add_trial(run, "b", 1, cost="0.25", tokens=(10, 10))  # before token classes
    priced = add_trial(run, "c", 1, cost=None, tokens=(1_000, 1_000))
    Trial.objects.filter(id=priced.id).update(
        cost_basis={"model": "example-model-1.5", "price": None, "source": None, "unknown": []}
    )

    repricing = run_reprice(run=run)

    # 1000 x 0.35 + 1000 x 1.05 per 1M tokens (example-model-1.5 prices input and output only;
    # its unknown classes are unpriced, so not needed).
    assert repricing.trials.changed == 1
    assert Trial.objects.get(id=priced.id).cost_usd == Decimal("0.0014")
    assert Trial.objects.get(id=own.id).cost_usd == Decimal("0.5")
    assert Trial.objects.get(id=old.id).cost_usd == Decimal("0.25")


def test_it_refuses_a_run_still_running():
    run = make_run(cases=[("a", [])], graders=[])
    Run.objects.filter(id=run.id).update(status=Run.Status.RUNNING)
    run.refresh_from_db()

    with pytest.raises(DomainError) as caught:
        run_reprice(run=run)
    assert (caught.value.field, caught.value.code) == ("run", "precondition_failed")
    with pytest.raises(CommandError) as failed:
        call_command("reprice_run", str(run.uuid))
    assert failed.value.returncode == 3


def test_a_reprice_moves_the_runs_fingerprint_so_no_cached_summary_is_served():
    run = make_run(cases=[("a", [])], graders=[])
    trial = add_trial(run, "a", 1, tokens=(1_000, 1_000))
    Trial.objects.filter(id=trial.id).update(
        cost_basis={"model": "example-model-1.5", "price": None, "source": None, "unknown": []}
    )
    before = run_fingerprints(runs=[run])[run.id].key
    assert run_fingerprints(runs=[run])[run.id].key == before

    run_reprice(run=run)

    assert run_fingerprints(runs=[run])[run.id].key != before
