"""Settling an experiment with more trials (evals.experiments.racing): the design fixed at the
start, trials only to the variants still in the set, a look decided once, and the decision's
set the intersection of the looks' sets (never a fresh best set over all the data)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from core.errors import DomainError
from evals.experiments.decision import experiment_decision
from evals.experiments.racing import experiment_settle_advance, experiment_settle_start
from evals.experiments.start import experiment_start
from evals.models import Case, Experiment, Run, Suite, Trial
from evals.runner.finalize import run_cancel
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "exact", "kind": "exact"}]


def _suite(n: int = 8) -> Suite:
    suite = Suite.objects.create(name="faq")
    for i in range(n):
        Case.objects.create(suite=suite, key=f"c{i}", input=f"question {i}", expected="yes")
    return suite


def _variants(*rates: float) -> list[dict]:
    labels = ["strong", "close", "weak", "fourth"]
    return [
        {
            "label": labels[i],
            "target": {"kind": "simulated", "model": "simulated", "default_pass_probability": p},
        }
        for i, p in enumerate(rates)
    ]


def _finished(capture, *rates: float, name: str = "prompts") -> Experiment:
    """An experiment whose runs have run (eagerly) to the end."""
    suite = Suite.objects.filter(name="faq").first() or _suite()
    with capture(execute=True):
        return experiment_start(
            suite=suite,
            name=name,
            variants=_variants(*rates),
            graders=GRADERS,
            trials_per_case=4,
            seed=5,
        )


def _trials(experiment: Experiment) -> dict[str, int]:
    return {
        v.label: Trial.objects.filter(run=v.run).count()
        for v in experiment.variants.select_related("run")
    }


def test_one_round_goes_only_to_the_variants_left_in(carol, django_capture_on_commit_callbacks):
    experiment = _finished(django_capture_on_commit_callbacks, 0.6, 0.55, 0.02)
    assert _trials(experiment) == {"strong": 32, "close": 32, "weak": 32}
    with django_capture_on_commit_callbacks(execute=True):
        experiment = experiment_settle_start(
            experiment=experiment, rounds=1, trials_per_round=3, by=carol
        )
    experiment.refresh_from_db()
    racing = experiment.racing
    assert racing["status"] == "done" and experiment.racing_look == 2
    first, last = racing["looks"]
    assert first["active"] == [0, 1] and 2 not in first["in_set"]  # weak out at look 0
    assert first["cases"] and first["trials_added"] == 2 * len(first["cases"]) * 3
    added = 3 * len(first["cases"])
    assert _trials(experiment) == {"strong": 32 + added, "close": 32 + added, "weak": 32}
    assert last["done"] and last["cases"] == [] and last["trials_added"] == 0
    assert all(r.status == Run.Status.SUCCEEDED for r in Run.objects.all())
    decision = experiment_decision(experiment=experiment)
    assert "weak" not in decision.best
    assert "racing look 0" in next(v for v in decision.variants if v.label == "weak").out_reason
    assert "intersection" in decision.method


def test_a_variant_out_at_a_look_stays_out_whatever_fresh_data_says(
    django_capture_on_commit_callbacks,
):
    """Two identical variants: a fresh best set keeps both; a stored look that put one out
    keeps it out."""
    experiment = _finished(django_capture_on_commit_callbacks, 0.6, 0.6)
    fresh = experiment_decision(experiment=experiment)
    assert set(fresh.best) == {"strong", "close"} and not fresh.decided
    figure = {
        "position": 1,
        "in_set": False,
        "beaten_by": 0,
        "drop": 0.3,
        "drop_low": 0.1,
        "drop_high": 0.5,
        "note": "close is below strong by 30 points",
    }
    look = {
        "look": 0,
        "in_set": [0],
        "active": [0],
        "cases": [],
        "done": True,
        "reason": "Look 0: strong is the only variant left in the best set.",
        "trials_added": 0,
        "figures": [{**figure, "position": 0, "in_set": True, "beaten_by": None}, figure],
    }
    Experiment.objects.filter(id=experiment.id).update(
        racing={"plan": {}, "status": "done", "looks": [look]}, racing_look=1
    )
    experiment.refresh_from_db()
    raced = experiment_decision(experiment=experiment)
    assert raced.best == ("strong",) and raced.decided
    close = next(v for v in raced.variants if v.label == "close")
    assert not close.in_set and close.beaten_by == "strong"
    assert close.out_reason.startswith("close is below strong")
    assert raced.sentence == look["reason"]


def test_settling_is_refused_before_the_runs_end_and_twice(
    carol, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        waiting = experiment_start(
            suite=_suite(),
            name="waiting",
            variants=_variants(0.6, 0.5),
            graders=GRADERS,
            trials_per_case=2,
            seed=1,
        )
    with pytest.raises(DomainError) as error:
        experiment_settle_start(experiment=waiting, rounds=1, trials_per_round=2, by=carol)
    assert error.value.code == "conflict" and "finished" in error.value.message
    done = _finished(django_capture_on_commit_callbacks, 0.9, 0.1, name="done")
    with django_capture_on_commit_callbacks(execute=True):
        experiment_settle_start(experiment=done, rounds=2, trials_per_round=2, by=carol)
    with pytest.raises(DomainError) as again:
        experiment_settle_start(experiment=done, rounds=2, trials_per_round=2, by=carol)
    assert again.value.code == "conflict"


@pytest.mark.parametrize(
    ("rounds", "per_round", "field"),
    [(0, 2, "rounds"), (6, 2, "rounds"), ("2", 2, "rounds"), (True, 2, "rounds"),
     (2, 0, "trials_per_round"), (2, 21, "trials_per_round"), (2, 2.0, "trials_per_round")],
)  # fmt: skip
def test_rounds_and_trials_per_round_are_bounded_on_their_fields(
    carol, rounds, per_round, field, django_capture_on_commit_callbacks
):
    experiment = _finished(django_capture_on_commit_callbacks, 0.9, 0.1)
    with pytest.raises(DomainError) as error:
        experiment_settle_start(
            experiment=experiment, rounds=rounds, trials_per_round=per_round, by=carol
        )
    assert error.value.field == field
    experiment.refresh_from_db()
    assert experiment.racing == {}


def test_a_reviewer_may_not_settle(bob, django_capture_on_commit_callbacks):
    experiment = _finished(django_capture_on_commit_callbacks, 0.9, 0.1)
    with pytest.raises(PermissionDenied):
        experiment_settle_start(experiment=experiment, rounds=1, trials_per_round=2, by=bob)


def test_advance_is_idempotent_a_look_is_decided_once(carol, django_capture_on_commit_callbacks):
    experiment = _finished(django_capture_on_commit_callbacks, 0.6, 0.55, 0.02)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        experiment_settle_start(experiment=experiment, rounds=2, trials_per_round=2, by=carol)
    experiment.refresh_from_db()
    assert experiment.racing_look == 1 and experiment.racing["status"] == "running"
    before = _trials(experiment)
    # The round's trials have not run: an advance (a redelivered message) waits.
    experiment_settle_advance(experiment_id=experiment.id)
    experiment.refresh_from_db()
    assert experiment.racing_look == 1 and _trials(experiment) == before
    for callback in sent:  # the round runs; each run's finalize enqueues an advance
        with django_capture_on_commit_callbacks(execute=True):
            callback()
    experiment.refresh_from_db()
    looks = experiment.racing_look
    assert looks >= 2
    trials = _trials(experiment)
    experiment_settle_advance(experiment_id=experiment.id)
    experiment_settle_advance(experiment_id=experiment.id)
    experiment.refresh_from_db()
    if experiment.racing["status"] == "done":
        assert experiment.racing_look == looks and _trials(experiment) == trials
    assert [look["look"] for look in experiment.racing["looks"]] == list(range(looks))


def test_the_api_settles_a_finished_experiment(alice, django_capture_on_commit_callbacks):
    experiment = _finished(django_capture_on_commit_callbacks, 0.6, 0.55, 0.02)
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(
            f"/api/experiments/{experiment.uuid}/settle",
            {"rounds": 1, "trials_per_round": 2},
            format="json",
        )
    assert response.status_code == 202, response.json()
    data = client_for(alice).get(f"/api/experiments/{experiment.uuid}").json()
    assert data["racing"]["status"] == "done" and data["racing"]["rounds"] == 1
    assert data["decision"] is not None and "weak" not in data["decision"]["best"]
    again = client_for(alice).post(
        f"/api/experiments/{experiment.uuid}/settle", {"rounds": 1}, format="json"
    )
    assert again.status_code == 409


def test_a_cancelled_variant_run_ends_the_racing_as_failed(
    carol, django_capture_on_commit_callbacks
):
    experiment = _finished(django_capture_on_commit_callbacks, 0.6, 0.55, 0.02)
    with django_capture_on_commit_callbacks(execute=False):
        experiment_settle_start(experiment=experiment, rounds=2, trials_per_round=2, by=carol)
    experiment.refresh_from_db()
    active = experiment.racing["looks"][0]["active"]
    for variant in experiment.variants.filter(position__in=active).select_related("run"):
        run_cancel(run=variant.run, by=carol)
    experiment_settle_advance(experiment_id=experiment.id)
    experiment.refresh_from_db()
    assert experiment.racing["status"] == "failed"
    assert "was cancelled" in experiment.racing["error"]
    assert experiment.racing_look == 1  # no further look decided
