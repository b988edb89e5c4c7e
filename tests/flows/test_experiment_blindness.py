"""Blind reviewing on the experiment pages: a reviewer still labeling a trial of a variant gets
the variants' progress and a note, never the decision, grid or counts (they repeat verdicts); the
case view hides the grades of that trial's group only, as the run's case view does."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.models import Case, Trial
from labeling.models import Label
from tests.experiment_builders import experiment_built
from tests.labeling_builders import calibration_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def experiment(db):
    experiment = experiment_built(labels=["a", "b"], n_cases=3, passes=lambda v, i, a: v == 0)
    for case in Case.objects.filter(suite=experiment.suite):
        Case.objects.filter(pk=case.pk).update(input_hash=f"hash-{case.key}")
    run = experiment.variants.get(label="a").run
    blind_trial = Trial.objects.get(run=run, case__key="c0000")
    calibration_set(run, None, [blind_trial])
    return experiment


def _case_url(experiment, key: str) -> str:
    return reverse(
        "evals:experiment-case", kwargs={"experiment_id": experiment.uuid, "case_key": key}
    )


def test_a_reviewer_labeling_a_variants_trial_sees_progress_and_a_note_only(
    client, bob, experiment
):
    client.force_login(bob)
    response = client.get(experiment.get_absolute_url())
    text = response.content.decode()
    assert response.status_code == 200
    assert 'id="blind-experiment-note"' in text and 'id="experiment-progress"' in text
    for hidden in ('id="experiment-sentence"', 'id="experiment-grid"', 'id="pareto-table"'):
        assert hidden not in text
    assert "1/1" not in text and "0/1" not in text


def test_the_case_view_hides_the_grades_of_the_blind_group_only(client, bob, experiment):
    client.force_login(bob)
    blind = client.get(_case_url(experiment, "c0000")).content.decode()
    assert "Grades are hidden" in blind and 'class="badge pass"' not in blind
    seen = client.get(_case_url(experiment, "c0001")).content.decode()
    assert "Grades are hidden" not in seen and 'class="badge pass"' in seen


def test_once_the_reviewer_has_labeled_the_page_is_whole(client, bob, experiment):
    trial = Trial.objects.get(run__experiment_variant__label="a", case__key="c0000")
    Label.objects.create(trial=trial, reviewer=bob, verdict="pass", source=Label.Source.REVIEWER)
    client.force_login(bob)
    text = client.get(experiment.get_absolute_url()).content.decode()
    assert 'id="experiment-sentence"' in text and 'id="blind-experiment-note"' not in text


@pytest.mark.parametrize("who", ["carol", "alice"])
def test_engineers_and_leads_see_everything(client, request, who, experiment):
    client.force_login(request.getfixturevalue(who))
    text = client.get(experiment.get_absolute_url()).content.decode()
    assert 'id="experiment-sentence"' in text and 'id="experiment-grid"' in text
    assert 'class="badge pass"' in client.get(_case_url(experiment, "c0000")).content.decode()
