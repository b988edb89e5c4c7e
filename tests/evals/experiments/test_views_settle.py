"""Settling an experiment from its page (evals.views.experiments.experiment_settle): the button
while several variants could be the best, engineers and leads only, the racing's state after."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from evals.models import Experiment
from tests.experiment_builders import experiment_built

pytestmark = pytest.mark.django_db


def _tied() -> Experiment:
    # Both variants pass the same cases: neither can be ruled out.
    return experiment_built(
        labels=["a", "b"], n_cases=12, trials=2, passes=lambda v, i, a: (i + a) % 2 == 0
    )


def _settle_url(experiment: Experiment) -> str:
    return reverse("evals:experiment-settle", kwargs={"experiment_id": experiment.uuid})


def test_an_undecided_experiment_offers_engineers_to_settle_it(client, carol, bob):
    experiment = _tied()
    client.force_login(carol)
    response = client.get(experiment.get_absolute_url())
    assert not response.context["decision"].decided
    assert 'id="experiment-settle"' in response.content.decode()
    client.force_login(bob)
    assert (
        'id="experiment-settle"' not in client.get(experiment.get_absolute_url()).content.decode()
    )


def test_a_decided_experiment_has_no_settle_button(client, carol):
    experiment = experiment_built(labels=["a", "b"], n_cases=20, passes=lambda v, i, a: v == 0)
    client.force_login(carol)
    response = client.get(experiment.get_absolute_url())
    assert response.context["decision"].decided
    assert 'id="experiment-settle"' not in response.content.decode()


def test_settling_starts_the_racing_and_the_page_shows_it(client, carol):
    experiment = _tied()
    client.force_login(carol)
    response = client.post(_settle_url(experiment), {"rounds": "2", "trials_per_round": "3"})
    assert response.status_code == 302 and response["Location"] == experiment.get_absolute_url()
    experiment.refresh_from_db()
    assert experiment.racing["rounds"] == 2 and experiment.racing["trials_per_round"] == 3
    assert experiment.racing["started_by"] == "carol" and experiment.racing_look == 1
    text = client.get(experiment.get_absolute_url()).content.decode()
    assert 'id="experiment-racing"' in text and 'id="experiment-settle"' not in text
    again = client.post(_settle_url(experiment), {"rounds": "2", "trials_per_round": "3"})
    assert "already settling" in " ".join(str(m) for m in get_messages(again.wsgi_request))


def test_bad_rounds_start_nothing_and_say_why(client, carol):
    experiment = _tied()
    client.force_login(carol)
    response = client.post(_settle_url(experiment), {"rounds": "99", "trials_per_round": "3"})
    experiment.refresh_from_db()
    assert experiment.racing == {}
    assert "rounds" in " ".join(str(m) for m in get_messages(response.wsgi_request))


def test_reviewers_and_outsiders_cannot_settle(client, bob, mallory):
    experiment = _tied()
    for user in (bob, mallory):
        client.force_login(user)
        response = client.post(_settle_url(experiment), {"rounds": "2", "trials_per_round": "3"})
        assert response.status_code == 403
    experiment.refresh_from_db()
    assert experiment.racing == {}
