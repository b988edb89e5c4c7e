"""A reviewer's preference on a pair is a compare-and-set on the version the form showed: an
older tab's save is refused saying what the preference is now, nothing written; and a
changed preference rechecks the pairwise approvals that counted the pair, which lapse when
the pairwise trust rule no longer holds."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.urls import reverse

from core.errors import DomainError
from evals.models import Run, TrialPair
from judges.models import JudgeApproval, JudgeRun
from labeling.approval import judge_trust_approve
from labeling.models import PreferenceLabel, PreferenceOrder
from labeling.pairwise import pairwise_calibration_compute
from labeling.preferences import preference_label_save
from tests.labeling.test_pairwise_trust import agreeing_rows, pairwise_judge
from tests.labeling_builders import pairwise_judge_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def judge_run():
    jr = pairwise_judge_run(2)
    PreferenceOrder.objects.bulk_create(
        PreferenceOrder(pair_id=pid, swapped=False) for pid in jr.trial_ids
    )
    return jr


def test_an_older_tab_cannot_replace_a_newer_preference_unseen(client, bob, judge_run):
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    pair = judge_run.trial_ids[0]
    client.force_login(bob)
    page = client.get(url).content.decode()  # both tabs load the pair with no preference
    assert 'name="expected_version" value="0"' in page
    tab_a = client.post(url, {"pair": pair, "verdict": "A", "expected_version": 0})
    assert tab_a.status_code == 302
    tab_b = client.post(
        url, {"pair": pair, "verdict": "B", "critique": "TAB-B-NOTE", "expected_version": 0}
    )
    html = tab_b.content.decode()
    assert tab_b.status_code == 409
    assert (
        "Not saved: this preference changed since you opened it (now A is better, revision 1; "
        "your form had none); reload it — nothing was saved. Your choice is kept below; save "
        "again to replace the current preference." in html
    )
    assert 'value="B" checked' in html and "TAB-B-NOTE</textarea>" in html  # choice kept
    assert f'name="pair" value="{pair}"' in html
    assert 'name="expected_version" value="1"' in html  # saving again replaces deliberately
    label = PreferenceLabel.objects.get()
    assert (label.preferred, label.critique, label.version) == ("A", "", 1)

    again = client.post(
        url, {"pair": pair, "verdict": "B", "critique": "TAB-B-NOTE", "expected_version": 1}
    )
    assert again.status_code == 302
    label.refresh_from_db()
    assert (label.preferred, label.critique, label.version) == ("B", "TAB-B-NOTE", 2)
    page = client.get(f"{url}?pair={TrialPair.objects.get(id=pair).uuid}").content.decode()
    assert 'name="expected_version" value="2"' in page


def test_a_stale_htmx_save_comes_back_on_the_form(client, bob, judge_run):
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    pair = judge_run.trial_ids[0]
    client.force_login(bob)
    client.post(url, {"pair": pair, "verdict": "tie", "expected_version": 0})
    response = client.post(
        url, {"pair": pair, "verdict": "A", "expected_version": 0}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200  # htmx swaps 2xx answers only
    assert "now a tie, revision 1" in html and 'id="preference-errors"' in html
    assert PreferenceLabel.objects.get().preferred == "tie"


def test_a_post_without_the_version_is_refused_naming_the_field(client, bob, judge_run):
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    client.force_login(bob)
    response = client.post(
        url, {"pair": judge_run.trial_ids[0], "verdict": "A", "critique": "KEPT"}
    )
    html = response.content.decode()
    assert "expected_version: missing or not a version of your preference" in html
    assert "nothing was saved" in html and "KEPT</textarea>" in html
    assert not PreferenceLabel.objects.exists()
    with pytest.raises(DomainError) as refused:
        preference_label_save(
            judge_run=judge_run,
            pair_id=judge_run.trial_ids[0],
            reviewer=bob,
            preferred="A",
            expected_version=None,
        )
    assert refused.value.field == "expected_version"
    assert not PreferenceLabel.objects.exists()


def test_the_service_refuses_a_stale_version_and_keeps_an_identical_retry(bob, judge_run):
    pair = judge_run.trial_ids[0]

    def save(preferred, expected, critique=""):
        return preference_label_save(
            judge_run=judge_run,
            pair_id=pair,
            reviewer=bob,
            preferred=preferred,
            critique=critique,
            expected_version=expected,
        )

    assert save("A", 0).version == 1
    assert save("A", 0).version == 1  # the same save posted twice: nothing changes
    assert save("B", 1).version == 2
    with pytest.raises(DomainError) as stale:
        save("tie", 1)
    err = stale.value
    assert (err.code, err.field, err.extra["current_version"]) == (
        "conflict",
        "expected_version",
        2,
    )
    assert "now B is better, revision 2" in str(err)
    with pytest.raises(DomainError, match="now no preference"):
        preference_label_save(
            judge_run=judge_run,
            pair_id=judge_run.trial_ids[1],
            reviewer=bob,
            preferred="A",
            expected_version=3,
        )
    assert list(PreferenceLabel.objects.values_list("pair_id", "preferred", "version")) == [
        (pair, "B", 2)
    ]


def _labeled_by(reviewer, rows):
    """A pairwise judge over ``rows`` whose human preferences ``reviewer`` saved through the
    queue's service, with the judge run they were saved on (pairs shown in their order)."""
    version, suite = pairwise_judge([(o, s, None) for o, s, _ in rows], suite_name="trusted")
    pairs = list(TrialPair.objects.filter(case__suite=suite).order_by("id"))
    PreferenceOrder.objects.bulk_create(PreferenceOrder(pair=p, swapped=False) for p in pairs)
    jr = JudgeRun.objects.create(
        run=Run.objects.get(name="trusted-head"),
        base_run=Run.objects.get(name="trusted-base"),
        judge_version=version,
        grader=version.grader_key,
        status=JudgeRun.Status.SUCCEEDED,
        trial_ids=[p.id for p in pairs],
        trials_total=len(pairs),
    )
    for pair, (_, _, human) in zip(pairs, rows, strict=True):
        preference_label_save(
            judge_run=jr, pair_id=pair.id, reviewer=reviewer, preferred=human, expected_version=0
        )
    return version, suite, jr, pairs


def test_a_pairwise_approval_lapses_when_changed_preferences_break_its_rule(alice, bob):
    version, suite, jr, pairs = _labeled_by(bob, agreeing_rows(40))
    approval = judge_trust_approve(judge_version=version, by=alice, suite=suite)

    def flip(pair):
        label = PreferenceLabel.objects.get(pair=pair, reviewer=bob)
        preference_label_save(
            judge_run=jr,
            pair_id=pair.id,
            reviewer=bob,
            preferred="A" if label.preferred == "B" else "B",
            expected_version=label.version,
        )

    flip(pairs[0])  # 39 of 40 agree: the kappa bound still holds
    approval.refresh_from_db()
    assert pairwise_calibration_compute(judge_version=version, suite=suite).trust_ok
    assert approval.revoked_at is None

    flipped = 1
    while pairwise_calibration_compute(judge_version=version, suite=suite).trust_ok:
        flip(pairs[flipped])
        flipped += 1
        approval.refresh_from_db()
        assert (approval.revoked_at is None) == pairwise_calibration_compute(
            judge_version=version, suite=suite
        ).trust_ok
    assert flipped > 2
    approval.refresh_from_db()
    assert approval.revoked_at is not None and approval.revoked_by == bob
    last = pairs[flipped - 1]
    assert approval.revoke_reason.startswith(
        f"lapsed: bob's preference on pair {last.uuid} changed the labels this approval "
        "rests on, and the rule no longer holds: "
    )
    assert "kappa" in approval.revoke_reason
    assert not JudgeApproval.objects.active().filter(judge_version=version).exists()


def test_a_preference_outside_the_approvals_suite_leaves_it_alone(alice, bob, judge_run):
    version, suite, jr, pairs = _labeled_by(bob, agreeing_rows(32))
    approval = judge_trust_approve(judge_version=version, by=alice, suite=suite)
    # Another judge run's pair, not judged by this version: no recheck reaches the approval.
    preference_label_save(
        judge_run=judge_run,
        pair_id=judge_run.trial_ids[0],
        reviewer=bob,
        preferred="A",
        expected_version=0,
    )
    approval.refresh_from_db()
    assert approval.revoked_at is None


def test_a_pairwise_approval_still_lapses_after_its_suite_is_renamed(alice, bob):
    """The approval's scope is the suite itself, not its name: a lead renaming the suite (the
    admin allows it) must not leave the approval unchecked, nor crash the preference save."""
    version, suite, jr, pairs = _labeled_by(bob, agreeing_rows(32))
    approval = judge_trust_approve(judge_version=version, by=alice, suite=suite)
    assert approval.figures["suite_uuid"] == str(suite.uuid)
    suite.name = f"{suite.name} (renamed)"
    suite.save(update_fields=["name"])

    for pair in pairs:
        label = PreferenceLabel.objects.get(pair=pair, reviewer=bob)
        preference_label_save(
            judge_run=jr,
            pair_id=pair.id,
            reviewer=bob,
            preferred="A" if label.preferred == "B" else "B",
            expected_version=label.version,
        )
        if not pairwise_calibration_compute(judge_version=version, suite=suite).trust_ok:
            break
    approval.refresh_from_db()
    assert approval.revoked_at is not None
    assert approval.revoke_reason.startswith("lapsed: bob's preference on pair ")


def test_the_migration_fills_the_suite_uuid_of_older_pairwise_approvals(alice, bob):
    migration = importlib.import_module("labeling.migrations.0013_pairwise_approval_suite_uuid")
    version, suite, jr, pairs = _labeled_by(bob, agreeing_rows(32))
    approval = judge_trust_approve(judge_version=version, by=alice, suite=suite)
    older = {k: v for k, v in approval.figures.items() if k != "suite_uuid"}
    JudgeApproval.objects.filter(pk=approval.pk).update(figures=older)

    migration.suite_uuid_fill(apps, None)
    approval.refresh_from_db()
    assert approval.figures["suite_uuid"] == str(suite.uuid)
    assert approval.figures["suite_name"] == suite.name
