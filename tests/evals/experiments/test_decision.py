"""An experiment's decision read from its runs (evals.experiments.decision): the counts equal
the trials', the clearly best variant alone in the set when the data say so, an honest
"waiting" while a run is unfinished, errored trials counted as failures and said, costs null
when unknown, and queries that do not grow with variants or cases."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.errors import DomainError
from evals.experiments.decision import WAITING, experiment_decision
from evals.experiments.start import experiment_start
from evals.models import Case, Grade, Run, RunReprice, Suite, Trial

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "says-yes", "kind": "contains", "config": {"value": "yes"}}]


def _suite(n: int) -> Suite:
    suite = Suite.objects.create(name="support")
    Case.objects.bulk_create(
        Case(suite=suite, key=f"c{i:03d}", input=f"q {i}", expected="yes", content_hash=f"{i:064d}")
        for i in range(n)
    )
    return suite


def _sim(p: float, **extra) -> dict:
    return {"kind": "simulated", "model": "simulated", "default_pass_probability": p, **extra}


def _experiment(capture, suite, rates, *, trials=5, name="e", **kwargs):
    with capture(execute=True):
        return experiment_start(
            suite=suite,
            name=name,
            variants=[{"label": f"v{i}", "target": _sim(p)} for i, p in enumerate(rates)],
            graders=GRADERS,
            trials_per_case=trials,
            seed=11,
            **kwargs,
        )


def test_counts_are_the_trials_verdicts_and_a_clear_best_stands_alone(
    django_capture_on_commit_callbacks,
):
    suite = _suite(20)
    experiment = _experiment(django_capture_on_commit_callbacks, suite, [0.05, 0.95, 0.1])
    decision = experiment_decision(experiment=experiment)

    assert decision.ready
    for i, variant in enumerate(decision.variants):
        run = variant.run
        assert run.status == Run.Status.SUCCEEDED
        oks = Grade.objects.filter(trial__run=run, grader="says-yes")
        assert variant.passed == oks.filter(passed=True).count() == decision.passed[i].sum()
        assert variant.graded == Trial.objects.filter(run=run).count() == 100
    assert decision.best == ("v1",) and decision.decided
    out = {v.label: v for v in decision.variants}
    assert not out["v0"].in_set and out["v0"].beaten_by == "v1" and out["v0"].out_reason
    assert out["v1"].in_set and out["v1"].out_reason == ""
    assert out["v1"].low <= out["v1"].estimate <= out["v1"].high
    assert decision.sentence
    # simulated targets have no price: cost is unknown, never $0
    assert all(v.cost_usd is None and v.cost_per_pass is None for v in decision.variants)
    assert decision.cheapest is None and "unknown" in decision.cheapest_reason
    assert all(v.on_front is None for v in decision.variants) and decision.pareto == ()
    assert decision.case_ids.size == 20 and decision.passed.shape == (3, 20)


def test_equal_variants_are_all_kept(django_capture_on_commit_callbacks):
    experiment = _experiment(django_capture_on_commit_callbacks, _suite(12), [0.6, 0.6, 0.6])
    decision = experiment_decision(experiment=experiment)
    assert set(decision.best) == {"v0", "v1", "v2"}
    assert not decision.decided


def test_an_unfinished_variant_means_waiting_not_a_decision(django_capture_on_commit_callbacks):
    suite = _suite(5)
    with django_capture_on_commit_callbacks(execute=False):  # no worker has taken them
        experiment = experiment_start(
            suite=suite,
            name="e",
            variants=[{"label": "a", "target": _sim(0.1)}, {"label": "b", "target": _sim(0.9)}],
            graders=GRADERS,
            trials_per_case=2,
            seed=1,
        )
    decision = experiment_decision(experiment=experiment)
    assert not decision.ready and not decision.decided and decision.best == ()
    assert decision.sentence == WAITING
    assert [v.trials_total for v in decision.variants] == [10, 10]


def test_errored_trials_count_as_failures_and_are_said(django_capture_on_commit_callbacks):
    suite = _suite(10)
    with django_capture_on_commit_callbacks(execute=True):
        experiment = experiment_start(
            suite=suite,
            name="e",
            variants=[
                {"label": "flaky", "target": _sim(1.0, error_probability=0.5)},
                {"label": "steady", "target": _sim(1.0)},
            ],
            graders=GRADERS,
            trials_per_case=4,
            seed=3,
        )
    decision = experiment_decision(experiment=experiment)
    flaky = decision.variants[0]
    errored = Trial.objects.filter(run=flaky.run, status=Trial.Status.ERROR).count()
    assert errored > 0
    assert flaky.graded == 40 and flaky.passed == 40 - errored
    assert any("flaky" in note and "counted as failures" in note for note in decision.notes)


def test_costs_are_summed_per_variant_and_unknown_stays_unknown(
    django_capture_on_commit_callbacks,
):
    experiment = _experiment(django_capture_on_commit_callbacks, _suite(6), [0.5, 0.9], trials=2)
    cheap, dear = (v.run for v in experiment.variants.select_related("run").order_by("position"))
    Trial.objects.filter(run=cheap).update(cost_usd=Decimal("0.001"))
    Trial.objects.filter(run=dear).update(cost_usd=Decimal("0.004"))
    _repriced(cheap, dear)  # as evals.reprice records it: the cached decision is stale
    decision = experiment_decision(experiment=experiment)
    first, second = decision.variants
    assert first.cost_usd == Decimal("0.012") and second.cost_usd == Decimal("0.048")
    assert first.cost_per_trial == pytest.approx(0.001)
    assert second.cost_per_pass == pytest.approx(0.048 / second.passed)
    assert first.on_front is True and isinstance(second.on_front, bool)
    one = Trial.objects.filter(run=dear).first()
    Trial.objects.filter(id=one.id).update(cost_usd=None)
    _repriced(dear)
    again = experiment_decision(experiment=experiment)
    assert again.variants[1].cost_usd is None and again.variants[1].cost_per_trial is None
    assert again.variants[0].cost_usd == Decimal("0.012")


def _repriced(*runs) -> None:
    for run in runs:
        RunReprice.objects.create(
            run=run, old_unknown=0, new_unknown=0, trials_changed=run.trials_total
        )


def _queries(capture, suite_cases: int, variants: int, name: str) -> tuple[int, int]:
    """(queries of a first decision, queries of the next, read from the cache)."""
    suite = Suite.objects.create(name=name)
    Case.objects.bulk_create(
        Case(
            suite=suite, key=f"c{i}", input=f"q {i}", expected="yes", content_hash=f"{name}{i:059d}"
        )
        for i in range(suite_cases)
    )
    experiment = _experiment(capture, suite, np.linspace(0.2, 0.8, variants), trials=2, name=name)
    caches["shared"].clear()  # the last variant's close warmed it
    with CaptureQueriesContext(connection) as first:
        experiment_decision(experiment=experiment)
    with CaptureQueriesContext(connection) as again:
        experiment_decision(experiment=experiment)
    return len(first.captured_queries), len(again.captured_queries)


def test_queries_do_not_grow_with_variants_or_cases(django_capture_on_commit_callbacks):
    small = _queries(django_capture_on_commit_callbacks, 3, 2, "small")
    large = _queries(django_capture_on_commit_callbacks, 40, 6, "large")
    assert small == large
    first, cached = large
    assert cached <= 5 < first  # variants, then the runs' summary keys: no trial is read


def test_the_cached_decision_follows_a_changed_grade(django_capture_on_commit_callbacks):
    experiment = _experiment(django_capture_on_commit_callbacks, _suite(8), [0.5, 0.5], trials=2)
    before = experiment_decision(experiment=experiment)
    run = before.variants[0].run
    grade = Grade.objects.filter(trial__run=run, passed=False).first()
    assert grade is not None
    Grade.objects.filter(id=grade.id).update(passed=True)
    after = experiment_decision(experiment=experiment)
    assert after.variants[0].passed == before.variants[0].passed + 1


def test_the_last_variant_closing_warms_the_decision(django_capture_on_commit_callbacks):
    experiment = _experiment(django_capture_on_commit_callbacks, _suite(4), [0.3, 0.9], trials=2)
    with CaptureQueriesContext(connection) as ctx:
        decision = experiment_decision(experiment=experiment)
    assert len(ctx.captured_queries) <= 5 and decision.ready


def test_a_variant_with_no_answered_trial_leaves_the_set_undecided_and_unsettleable(
    django_capture_on_commit_callbacks, carol
):
    from evals.experiments.racing import experiment_settle_start  # noqa: PLC0415

    with django_capture_on_commit_callbacks(execute=True):
        experiment = experiment_start(
            suite=_suite(6),
            name="down",
            variants=[
                {"label": "down", "target": _sim(0.9, error_probability=1.0)},
                {"label": "up", "target": _sim(0.9)},
            ],
            graders=GRADERS,
            trials_per_case=2,
            seed=2,
        )
    decision = experiment_decision(experiment=experiment)
    assert decision.ready and not decision.decided and decision.best == ()
    assert decision.sentence.startswith("Cannot decide: down has no answered trial")
    assert all(not v.in_set and v.on_front is None for v in decision.variants)
    with pytest.raises(DomainError) as caught:
        experiment_settle_start(experiment=experiment, rounds=1, trials_per_round=2, by=carol)
    assert caught.value.code == "conflict" and "no answered trial" in str(caught.value)
