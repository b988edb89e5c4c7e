"""The demo's experiment (``demo.story.demo_experiment``): three prompts on the first demo
suite, started together and decided; the edited prompt, which breaks the boundary case, is
out of the best set, and the page's URL is what ``manage.py demo`` prints."""

from __future__ import annotations

import pytest
from django.urls import reverse

from demo.load import demo_suites_load
from demo.story import demo_experiment
from evals.experiments.decision import experiment_decision
from evals.models import Run


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_demo_experiment_decides_and_leaves_the_breaking_edit_out(alice):
    suite = demo_suites_load()[0]
    experiment = demo_experiment(suite=suite, seed=5000, user=alice, trials=5, timeout=60)
    runs = [v.run for v in experiment.variants.select_related("run")]
    assert [r.status for r in runs] == [Run.Status.SUCCEEDED] * 3
    assert len({r.target["seed"] for r in runs}) == 1  # one seed: the draws are shared

    decision = experiment_decision(experiment=experiment)
    assert decision.ready
    assert "baseline prompt" in decision.best
    edited = next(v for v in decision.variants if v.label == "edited prompt")
    assert edited.passed < next(v.passed for v in decision.variants if v.in_set)
    assert decision.sentence
    url = reverse("evals:experiment-detail", kwargs={"experiment_id": experiment.uuid})
    assert url == f"/experiments/{experiment.uuid}/"
