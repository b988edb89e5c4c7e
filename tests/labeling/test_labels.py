"""Labels: who may label, revisions, stale forms, concurrent reviewers, undo, reference labels."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from core.errors import DomainError
from labeling.adjudication import adjudication_record
from labeling.labels import label_submit, label_undo
from labeling.models import Label, LabelRevision
from labeling.selectors import (
    human_agreement,
    label_current_get,
    label_version_get,
    reference_labels,
)
from tests.calibration_builders import labeled_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def trial():
    _, _, trials = labeled_run(["pass"], ["pass"])
    return trials[0]


def test_it_lets_a_reviewer_label(bob, trial):
    label = label_submit(trial=trial, reviewer=bob, verdict="fail", critique="wrong date")
    assert (label.verdict, label.critique, label.version) == ("fail", "wrong date", 1)
    assert (label.reviewer, label.reviewer_name, label.source) == (bob, "bob", "reviewer")
    assert list(label.revisions.values_list("version", "verdict")) == [(1, "fail")]


def test_it_lets_a_lead_label(alice, trial):
    assert label_submit(trial=trial, reviewer=alice, verdict="pass").reviewer == alice


@pytest.mark.parametrize("who", ["carol", "mallory"])
def test_it_refuses_labeling_by_an_engineer_or_an_outsider(who, request, trial):
    user = request.getfixturevalue(who)
    with pytest.raises(PermissionDenied):
        label_submit(trial=trial, reviewer=user, verdict="pass")
    assert not Label.objects.filter(reviewer=user).exists()


def test_it_refuses_a_verdict_outside_pass_and_fail(bob, trial):
    with pytest.raises(DomainError, match='verdict: expected "pass" or "fail", got "Pass"'):
        label_submit(trial=trial, reviewer=bob, verdict="Pass")


def test_it_keeps_every_revision(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", expected_version=0)
    label_submit(
        trial=trial, reviewer=bob, verdict="fail", critique="on reflection", expected_version=1
    )
    label = label_submit(
        trial=trial, reviewer=bob, verdict="fail", critique="cites no source", expected_version=2
    )
    assert label.version == 3
    assert list(label.revisions.values_list("version", "verdict", "critique")) == [
        (1, "pass", ""),
        (2, "fail", "on reflection"),
        (3, "fail", "cites no source"),
    ]


def test_it_refuses_a_stale_form_and_loses_nothing(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass")
    label_submit(trial=trial, reviewer=bob, verdict="fail", expected_version=1)
    with pytest.raises(DomainError, match="changed since you opened it"):
        label_submit(
            trial=trial, reviewer=bob, verdict="pass", critique="old tab", expected_version=1
        )
    label = label_current_get(trial=trial, reviewer=bob)
    assert (label.verdict, label.version) == ("fail", 2)
    assert LabelRevision.objects.filter(label=label).count() == 2


def test_it_refuses_a_form_that_saw_no_label_when_one_was_saved_meanwhile(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", expected_version=0)
    with pytest.raises(DomainError):
        label_submit(trial=trial, reviewer=bob, verdict="fail", expected_version=0)


def test_it_treats_an_identical_resubmission_as_a_no_op(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="ok")
    label = label_submit(
        trial=trial, reviewer=bob, verdict="pass", critique="ok", expected_version=1
    )
    again = label_submit(
        trial=trial, reviewer=bob, verdict="pass", critique="ok", expected_version=0
    )
    assert label.version == again.version == 1
    assert LabelRevision.objects.count() == 1


def test_it_keeps_both_labels_when_two_reviewers_label_the_same_trial(alice, bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", expected_version=0)
    label_submit(trial=trial, reviewer=alice, verdict="fail", expected_version=0)
    mine = {lab.reviewer_name: lab.verdict for lab in trial.labels.filter(source="reviewer")}
    assert mine == {"bob": "pass", "alice": "fail"}


def test_it_never_revises_another_reviewers_label(alice, bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass")
    label_submit(trial=trial, reviewer=alice, verdict="fail", expected_version=0)
    assert label_current_get(trial=trial, reviewer=bob).verdict == "pass"
    assert label_current_get(trial=trial, reviewer=bob).version == 1


def _history(trial, reviewer) -> list[tuple]:
    return list(
        LabelRevision.objects.filter(trial=trial, reviewer=reviewer).values_list(
            "version", "verdict", "critique", "undoes"
        )
    )


def test_it_undoes_a_revision_back_to_the_previous_one_at_a_new_version(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="first")
    label_submit(trial=trial, reviewer=bob, verdict="fail", critique="second")
    label = label_undo(trial=trial, reviewer=bob)
    assert (label.verdict, label.critique, label.version) == ("pass", "first", 3)
    assert _history(trial, bob) == [
        (1, "pass", "first", None),
        (2, "fail", "second", None),
        (3, "pass", "first", 2),  # the undo is a revision: it took back version 2
    ]


def test_it_undoes_a_first_label_by_recording_its_clearing(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass")
    assert label_undo(trial=trial, reviewer=bob) is None
    assert label_current_get(trial=trial, reviewer=bob) is None
    assert label_version_get(trial_id=trial.id, reviewer=bob) == 2
    assert _history(trial, bob) == [(1, "pass", "", None), (2, "", "", 1)]
    assert label_undo(trial=trial, reviewer=bob) is None  # nothing left to undo
    assert len(_history(trial, bob)) == 2


def test_undoing_twice_walks_back_two_saves(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="one")
    label_submit(trial=trial, reviewer=bob, verdict="fail", critique="two")
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="three")
    assert label_undo(trial=trial, reviewer=bob).critique == "two"
    label = label_undo(trial=trial, reviewer=bob)
    assert (label.critique, label.version) == ("one", 5)
    assert label_undo(trial=trial, reviewer=bob) is None
    assert label_version_get(trial_id=trial.id, reviewer=bob) == 6


def test_a_label_saved_after_its_clearing_continues_the_version_count(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", expected_version=0)
    label_undo(trial=trial, reviewer=bob, expected_version=1)
    label = label_submit(trial=trial, reviewer=bob, verdict="fail", expected_version=2)
    assert (label.version, label.outcome) == (3, "created")
    # undoing it clears it again, at version 4
    assert label_undo(trial=trial, reviewer=bob) is None
    assert label_version_get(trial_id=trial.id, reviewer=bob) == 4


def test_the_aba_sequence_refuses_the_stale_tab(bob, trial):
    """Tab 1 saves v1; it is undone (v2, cleared); tab 2 saves again (v3); tab 1, still
    holding version 1, saves: a conflict, and tab 2's label stands."""
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="tab 1", expected_version=0)
    label_undo(trial=trial, reviewer=bob, expected_version=1)
    label_submit(trial=trial, reviewer=bob, verdict="fail", critique="tab 2", expected_version=2)
    for verdict, critique in (("pass", "tab 1 again"), ("fail", "tab 2")):
        with pytest.raises(DomainError) as caught:
            label_submit(
                trial=trial, reviewer=bob, verdict=verdict, critique=critique, expected_version=1
            )
        assert (caught.value.code, caught.value.extra["current_version"]) == ("conflict", 3)
    label = label_current_get(trial=trial, reviewer=bob)
    assert (label.verdict, label.critique, label.version) == ("fail", "tab 2", 3)


def test_a_form_that_saw_no_label_is_stale_after_a_save_and_its_undo(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", expected_version=0)
    label_undo(trial=trial, reviewer=bob)
    with pytest.raises(DomainError, match="now revision 2"):
        label_submit(trial=trial, reviewer=bob, verdict="fail", expected_version=0)
    assert label_current_get(trial=trial, reviewer=bob) is None


def test_a_stale_undo_is_refused_and_undoes_nothing(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass")
    label_submit(trial=trial, reviewer=bob, verdict="fail", expected_version=1)
    with pytest.raises(DomainError, match="nothing was undone"):
        label_undo(trial=trial, reviewer=bob, expected_version=1)
    assert label_current_get(trial=trial, reviewer=bob).version == 2


def test_a_retried_save_is_still_a_no_op_but_not_across_an_undo(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="ok", expected_version=0)
    label_undo(trial=trial, reviewer=bob)
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="ok", expected_version=2)
    # the retry of that save (sent from version 2) changes nothing
    again = label_submit(
        trial=trial, reviewer=bob, verdict="pass", critique="ok", expected_version=2
    )
    assert (again.outcome, again.version) == ("unchanged", 3)
    # the first tab's form (version 0) is stale even with the same content
    with pytest.raises(DomainError):
        label_submit(trial=trial, reviewer=bob, verdict="pass", critique="ok", expected_version=0)


def test_it_refuses_undo_by_an_engineer(bob, carol, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass")
    with pytest.raises(PermissionDenied):
        label_undo(trial=trial, reviewer=carol)


def test_it_imports_gold_labels_as_the_dataset_gold_reviewer(trial):
    gold = trial.labels.get()
    assert (gold.reviewer, gold.reviewer_name, gold.source) == (None, "dataset gold", "import")
    assert gold.details["human_label"]["method"] == "fixture"


def test_it_leaves_out_a_trial_where_humans_disagree_until_a_lead_adjudicates(alice, bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="fail", critique="misses the caveat")
    refs = reference_labels(trial_ids=[trial.id])
    assert refs.by_trial == {} and refs.unresolved == [trial.id]
    adjudication_record(trial=trial, lead=alice, verdict="fail", reason="the caveat matters")
    ref = reference_labels(trial_ids=[trial.id]).by_trial[trial.id]
    assert (ref.verdict, ref.basis, ref.critique) == ("fail", "adjudication", "the caveat matters")


def test_it_uses_agreeing_labels_as_the_reference(bob, trial):
    label_submit(trial=trial, reviewer=bob, verdict="pass", critique="fine")
    ref = reference_labels(trial_ids=[trial.id]).by_trial[trial.id]
    assert (ref.verdict, ref.basis, ref.n_labels) == ("pass", "agreement", 2)


@pytest.mark.parametrize("who", ["bob", "carol", "mallory"])
def test_it_refuses_adjudication_by_anyone_but_a_lead(who, request, trial):
    with pytest.raises(PermissionDenied):
        adjudication_record(
            trial=trial, lead=request.getfixturevalue(who), verdict="pass", reason="because"
        )


def test_it_refuses_an_adjudication_without_a_reason(alice, trial):
    with pytest.raises(DomainError, match="reason"):
        adjudication_record(trial=trial, lead=alice, verdict="pass", reason="  ")


def test_it_measures_agreement_between_humans_as_the_ceiling(alice, bob):
    _, _, trials = labeled_run(["pass", "pass", "fail", "fail"], ["pass"] * 4)
    for t, verdict in zip(trials, ["pass", "fail", "fail", "fail"], strict=True):
        label_submit(trial=t, reviewer=bob, verdict=verdict)
    label_submit(trial=trials[0], reviewer=alice, verdict="pass")
    agreement = human_agreement()
    assert agreement.n_trials == 4
    assert agreement.n_pairs == 4 + 2  # gold-bob on 4 trials; gold-alice, alice-bob on one
    assert agreement.agreement == pytest.approx(5 / 6)
    assert agreement.n_disagreeing == 1
    gold_bob = next(
        p for p in agreement.by_pair if {p.rater_a, p.rater_b} == {"dataset gold", "bob"}
    )
    assert (gold_bob.n, gold_bob.agreement) == (4, 0.75)
    assert gold_bob.kappa.kappa == pytest.approx(0.5)


def test_a_label_without_revisions_still_counts_its_version(bob, trial):
    """A reviewer label written without revisions (by hand or by an older import) keeps its
    version: the next save is version 2, a form at version 1 saves, one at 0 is stale."""
    label = Label.objects.create(trial=trial, reviewer=bob, reviewer_name="bob", verdict="pass")
    with pytest.raises(DomainError):
        label_submit(trial=trial, reviewer=bob, verdict="fail", expected_version=0)
    revised = label_submit(trial=trial, reviewer=bob, verdict="fail", expected_version=1)
    assert (revised.pk, revised.version, revised.outcome) == (label.pk, 2, "revised")
    # its only recorded save is taken back: cleared at version 3 (the unrecorded first
    # state cannot be restored), and the count still never goes back
    assert label_undo(trial=trial, reviewer=bob) is None
    assert label_version_get(trial_id=trial.id, reviewer=bob) == 3
