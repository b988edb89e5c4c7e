"""Calibration-set pages and the reviewer's labeling queue: permissions per the cast,
saving through htmx, blindness, stale forms, resume, undo, escaping."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from core.text import UNSTORABLE
from labeling.labels import label_submit
from labeling.models import CalibrationSet, Label, LabelRevision
from tests.conftest import PASSWORD
from tests.labeling_builders import JUDGE_REASON, calibration_set, judged_run

HTMX = {"HTTP_HX_REQUEST": "true"}
HOSTILE_OUTPUT = "<img src=x onerror=alert(1)>"


@pytest.fixture
def queue_set(db):
    run, version, trials = judged_run(30)
    return calibration_set(run, version, trials), trials


def login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def queue_url(cset) -> str:
    return reverse("labeling:queue", kwargs={"set_id": cset.uuid})


def save_url(cset) -> str:
    return reverse("labeling:label-save", kwargs={"set_id": cset.uuid})


def save(client, cset, trial, verdict="pass", critique="", expected_version=0, **extra):
    return client.post(
        save_url(cset),
        {
            "trial": str(trial.uuid),
            "verdict": verdict,
            "critique": critique,
            "expected_version": expected_version,
        },
        **extra,
    )


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 200), ("carol", 403), ("mallory", 403)]
)
def test_it_lets_reviewers_and_leads_open_the_queue_and_nobody_else(
    client, queue_set, alice, bob, carol, mallory, who, status
):
    cset, _ = queue_set
    login(client, {"alice": alice, "bob": bob, "carol": carol, "mallory": mallory}[who])
    assert client.get(queue_url(cset)).status_code == status


@pytest.mark.parametrize("who", ["carol", "mallory"])
def test_it_refuses_a_label_from_an_engineer_or_an_outsider(client, queue_set, carol, mallory, who):
    cset, trials = queue_set
    login(client, carol if who == "carol" else mallory)
    assert save(client, cset, trials[0], **HTMX).status_code == 403
    assert not Label.objects.exists()


def test_a_reviewer_saves_a_label_through_htmx_and_gets_the_next_item(client, queue_set, bob):
    cset, trials = queue_set
    login(client, bob)
    response = save(client, cset, trials[0], verdict="fail", critique="misses the policy", **HTMX)
    assert response.status_code == 200
    label = Label.objects.get(trial=trials[0], reviewer=bob)
    assert (label.verdict, label.critique, label.version) == ("fail", "misses the policy", 1)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="queue-item"')  # the fragment, not a page
    assert "<html" not in html
    assert f'value="{trials[1].uuid}"' in html  # the next item is swapped in
    assert '<progress id="queue-progress" value="1" max="30">' in html
    assert "1 of 30 labeled" in html
    cset.refresh_from_db()
    assert cset.is_frozen


def test_a_plain_form_post_saves_and_redirects_to_the_queue(client, queue_set, bob):
    cset, trials = queue_set
    login(client, bob)
    response = save(client, cset, trials[0], verdict="pass")
    assert response.status_code == 302
    assert response.url == queue_url(cset)
    assert Label.objects.filter(reviewer=bob).count() == 1


def test_the_progress_bar_reads_12_of_30(client, queue_set, bob):
    cset, trials = queue_set
    for trial in trials[:12]:
        label_submit(trial=trial, reviewer=bob, verdict="pass", critique="", expected_version=0)
    login(client, bob)
    html = client.get(queue_url(cset)).content.decode()
    assert '<progress id="queue-progress" value="12" max="30">12 of 30</progress>' in html
    assert "12 of 30 labeled" in html
    assert "Item 13 of 30" in html


def test_the_queue_resumes_at_the_first_item_the_reviewer_has_not_labeled(
    client, queue_set, alice, bob
):
    cset, trials = queue_set
    for trial in trials[:3] + trials[4:6]:
        label_submit(trial=trial, reviewer=bob, verdict="pass", expected_version=0)
    label_submit(trial=trials[3], reviewer=alice, verdict="fail", expected_version=0)
    login(client, bob)
    html = client.get(queue_url(cset)).content.decode()
    assert "Item 4 of 30" in html  # alice's label on item 4 does not count for bob
    assert f'name="trial" value="{trials[3].uuid}"' in html
    # after saving item 4, the next unlabeled is item 7 (5 and 6 are done)
    html = save(client, cset, trials[3], **HTMX).content.decode()
    assert "Item 7 of 30" in html


def test_the_queue_is_blind_to_the_judge_and_to_other_reviewers(client, queue_set, alice, bob):
    cset, trials = queue_set
    label_submit(
        trial=trials[0],
        reviewer=alice,
        verdict="fail",
        critique="ALICE-SECRET-CRITIQUE",
        expected_version=0,
    )
    login(client, bob)
    pages = [
        client.get(queue_url(cset)).content.decode(),
        client.get(queue_url(cset), {"trial": str(trials[0].uuid)}, **HTMX).content.decode(),
        save(client, cset, trials[0], **HTMX).content.decode(),
        client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})).content.decode(),
    ]
    for html in pages:
        assert "JUDGE-REASONING" not in html
        assert JUDGE_REASON.format(i=1) not in html
        assert "ALICE-SECRET-CRITIQUE" not in html
        assert "judge-model" not in html


def test_it_shows_the_case_documents_output_with_whitespace_and_the_expected_answer(
    client, queue_set, bob
):
    cset, trials = queue_set
    login(client, bob)
    html = client.get(queue_url(cset)).content.decode()
    assert "Question 1: may I get a refund?" in html
    assert "Refund policy paragraph 1." in html
    assert (
        '<pre class="output full" id="queue-output">Answer 1:\n  yes, within 30 days.</pre>'
    ) in html
    assert "expected answer 1" in html


def test_a_long_output_is_collapsible(client, bob):
    run, version, trials = judged_run(2, judge_fails=1, outputs=["x" * 5000, "short"])
    cset = calibration_set(run, version, trials)
    login(client, bob)
    html = client.get(queue_url(cset)).content.decode()
    assert '<details class="long" open><summary>Output (5000 characters)</summary>' in html


def test_a_stale_form_is_refused_with_the_message_and_keeps_the_input(client, queue_set, bob):
    cset, trials = queue_set
    label_submit(
        trial=trials[0], reviewer=bob, verdict="pass", critique="first", expected_version=0
    )
    # another tab revised it: version 2
    label_submit(
        trial=trials[0], reviewer=bob, verdict="fail", critique="second tab", expected_version=1
    )
    login(client, bob)
    # this form was loaded at version 1
    response = save(
        client,
        cset,
        trials[0],
        verdict="pass",
        critique="my careful critique",
        expected_version=1,
        **HTMX,
    )
    assert response.status_code == 200  # htmx swaps only 2xx: the message must show
    html = response.content.decode()
    assert "Not saved: this label changed since you opened it" in html
    assert "my careful critique</textarea>" in html
    assert re.search(r'value="pass"[^>]*checked', html)
    label = Label.objects.get(trial=trials[0], reviewer=bob)
    assert (label.verdict, label.critique, label.version) == ("fail", "second tab", 2)
    # the kept form now carries the current version: saving again overwrites on purpose
    assert 'name="expected_version" value="2"' in html
    plain = save(
        client, cset, trials[0], verdict="pass", critique="my careful critique", expected_version=1
    )
    assert plain.status_code == 409
    assert (
        save(
            client,
            cset,
            trials[0],
            verdict="pass",
            critique="my careful critique",
            expected_version=2,
            **HTMX,
        ).status_code
        == 200
    )
    label.refresh_from_db()
    assert (label.verdict, label.version) == ("pass", 3)
    assert LabelRevision.objects.filter(label=label).count() == 3


def test_a_missing_verdict_is_refused_with_a_clear_message(client, queue_set, bob):
    cset, trials = queue_set
    login(client, bob)
    response = client.post(
        save_url(cset),
        {"trial": str(trials[0].uuid), "critique": "hmm", "expected_version": 0},
        **HTMX,
    )
    html = response.content.decode()
    assert "Choose pass (p) or fail (f)." in html
    assert "hmm</textarea>" in html
    assert not Label.objects.exists()


def test_a_trial_outside_the_set_is_404(client, queue_set, bob):
    cset, _ = queue_set
    run, version, others = judged_run(1, suite_name="other", judge_name="other")
    login(client, bob)
    assert save(client, cset, others[0], **HTMX).status_code == 404


def test_undo_takes_back_the_reviewers_last_label_only(client, queue_set, alice, bob):
    cset, trials = queue_set
    label_submit(trial=trials[0], reviewer=bob, verdict="pass", expected_version=0)
    label_submit(trial=trials[1], reviewer=bob, verdict="fail", expected_version=0)
    label_submit(trial=trials[1], reviewer=alice, verdict="pass", expected_version=0)
    login(client, bob)
    response = client.post(reverse("labeling:label-undo", kwargs={"set_id": cset.uuid}), **HTMX)
    html = response.content.decode()
    assert "Undid your last label (case c02)" in html
    assert "Item 2 of 30" in html
    assert list(Label.objects.filter(reviewer=bob).values_list("trial_id", flat=True)) == [
        trials[0].id
    ]
    assert Label.objects.filter(reviewer=alice, trial=trials[1]).exists()


def test_undo_with_nothing_to_undo_says_so(client, queue_set, bob):
    cset, _ = queue_set
    login(client, bob)
    response = client.post(reverse("labeling:label-undo", kwargs={"set_id": cset.uuid}), **HTMX)
    assert "Nothing to undo." in response.content.decode()


def test_j_and_k_links_point_at_the_neighbouring_items(client, queue_set, bob):
    cset, trials = queue_set
    login(client, bob)
    html = client.get(queue_url(cset), {"trial": str(trials[5].uuid)}).content.decode()
    assert f'id="queue-prev" href="{queue_url(cset)}?trial={trials[4].uuid}"' in html
    assert f'id="queue-next" href="{queue_url(cset)}?trial={trials[6].uuid}"' in html


def test_a_reviewer_who_labeled_everything_sees_done(client, bob):
    run, version, trials = judged_run(2, judge_fails=1)
    cset = calibration_set(run, version, trials)
    for trial in trials:
        label_submit(trial=trial, reviewer=bob, verdict="pass", expected_version=0)
    login(client, bob)
    html = client.get(queue_url(cset)).content.decode()
    assert "Done: you have labeled every item in this set." in html


def test_hostile_output_and_case_text_are_escaped_in_the_queue(client, bob):
    run, version, trials = judged_run(1, judge_fails=0, outputs=[HOSTILE_OUTPUT])
    case = trials[0].case
    case.input = '"><svg onload=alert(3)>'
    case.save()
    cset = calibration_set(run, version, trials, name="<b onclick=alert(4)>set</b>")
    login(client, bob)
    html = client.get(queue_url(cset)).content.decode()
    assert HOSTILE_OUTPUT not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<svg" not in html
    assert "<b onclick" not in html


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 302), ("bob", 403), ("carol", 302), ("mallory", 403)]
)
def test_engineers_and_leads_build_a_calibration_set_from_a_run(
    client, alice, bob, carol, mallory, who, status
):
    run, version, _ = judged_run(40)
    login(client, {"alice": alice, "bob": bob, "carol": carol, "mallory": mallory}[who])
    response = client.post(
        reverse("labeling:set-new"),
        {
            "name": "cal-new",
            "run": str(run.uuid),
            "judge_version": str(version.uuid),
            "size": 30,
            "seed": 7,
        },
    )
    assert response.status_code == status
    if status == 302:
        cset = CalibrationSet.objects.get(name="cal-new")
        assert response.url == reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})
        assert cset.items.count() == 30
    else:
        assert not CalibrationSet.objects.exists()


def test_the_build_form_defaults_to_30_trials_and_prefills_the_judge(client, carol):
    run, version, _ = judged_run(3, judge_fails=1)
    login(client, carol)
    html = client.get(
        reverse("labeling:set-new"), {"judge_version": str(version.uuid)}
    ).content.decode()
    assert 'name="size" value="30"' in html
    assert f'<option value="{version.uuid}" selected>' in html


def test_items_are_added_and_removed_by_hand_until_the_set_is_frozen(client, carol, bob):
    run, version, trials = judged_run(4, judge_fails=2)
    cset = calibration_set(run, version, trials[:2])
    login(client, carol)
    add = reverse("labeling:item-add", kwargs={"set_id": cset.uuid})
    remove = reverse("labeling:item-remove", kwargs={"set_id": cset.uuid})
    client.post(add, {"trial": str(trials[2].uuid)})
    client.post(remove, {"trial": str(trials[0].uuid)})
    assert sorted(cset.items.values_list("trial_id", flat=True)) == [trials[1].id, trials[2].id]
    label_submit(trial=trials[1], reviewer=bob, verdict="pass", expected_version=0)
    response = client.post(add, {"trial": str(trials[3].uuid)}, follow=True)
    assert "is frozen: labeling started" in response.content.decode()
    assert cset.items.count() == 2


def test_a_trial_uuid_holding_a_nul_or_naming_no_trial_comes_back_on_the_field(client, carol):
    run, version, trials = judged_run(2, judge_fails=1)
    cset = calibration_set(run, version, trials[:1])
    login(client, carol)
    add = reverse("labeling:item-add", kwargs={"set_id": cset.uuid})
    response = client.post(add, {"trial": f"{trials[1].uuid}\x00"})
    page = response.content.decode()
    assert response.status_code == 200
    assert f"trial: {UNSTORABLE}; nothing was saved" in page
    assert f'value="{trials[1].uuid}\ufffd"' in page and "\x00" not in page
    unknown = "00000000-0000-4000-8000-000000000000"
    response = client.post(add, {"trial": unknown})
    page = response.content.decode()
    assert response.status_code == 200
    assert f"trial {unknown}: no such trial." in page and f'value="{unknown}"' in page
    assert cset.items.count() == 1


def test_reviewers_cannot_edit_a_sets_items(client, bob):
    run, version, trials = judged_run(2, judge_fails=1)
    cset = calibration_set(run, version, trials[:1])
    login(client, bob)
    response = client.post(
        reverse("labeling:item-add", kwargs={"set_id": cset.uuid}), {"trial": str(trials[1].uuid)}
    )
    assert response.status_code == 403
    assert cset.items.count() == 1


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 200), ("carol", 200), ("mallory", 403)]
)
def test_every_role_sees_the_set_list_and_detail(
    client, queue_set, alice, bob, carol, mallory, who, status
):
    cset, _ = queue_set
    login(client, {"alice": alice, "bob": bob, "carol": carol, "mallory": mallory}[who])
    assert client.get(reverse("labeling:set-list")).status_code == status
    assert (
        client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})).status_code
        == status
    )


@pytest.mark.parametrize(("who", "shown"), [("alice", True), ("bob", True), ("carol", False)])
def test_the_queue_links_show_only_to_those_who_may_label(
    client, queue_set, alice, bob, carol, who, shown
):
    """An engineer saw "Label" on the set list and "Label this set" on the set page, and
    followed them to a 403 (found by crawling the demo as an engineer)."""
    cset, _ = queue_set
    login(client, {"alice": alice, "bob": bob, "carol": carol}[who])
    for page in (
        reverse("labeling:set-list"),
        reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}),
    ):
        assert (queue_url(cset) in client.get(page).content.decode()) is shown, page


def test_the_aba_sequence_in_the_queue_refuses_the_stale_tab(client, queue_set, bob):
    """Two tabs on one item. Tab 1 saves (v1); undo (u) clears it (v2); tab 2, loaded after
    the undo, saves (v3); tab 1's form (still at version 1) saves: a conflict message."""
    cset, trials = queue_set
    login(client, bob)
    undo_url = reverse("labeling:label-undo", kwargs={"set_id": cset.uuid})
    item_url = queue_url(cset) + f"?trial={trials[0].uuid}"
    assert 'name="expected_version" value="0"' in client.get(item_url).content.decode()
    saved = save(client, cset, trials[0], verdict="pass", expected_version=0, **HTMX)
    assert "Saved pass." in saved.content.decode()
    undone = client.post(undo_url, **HTMX).content.decode()
    assert "Undid your last label (case c01)" in undone
    # the item is unlabeled again, its form at the clearing's version
    assert 'name="expected_version" value="2"' in undone
    assert 'name="expected_version" value="2"' in client.get(item_url).content.decode()
    tab2 = save(client, cset, trials[0], verdict="fail", critique="tab 2", expected_version=2)
    assert tab2.status_code == 302
    stale = save(
        client, cset, trials[0], verdict="pass", critique="tab 1", expected_version=1, **HTMX
    )
    html = stale.content.decode()
    assert "Not saved: this label changed since you opened it (now revision 3" in html
    assert 'name="expected_version" value="3"' in html
    assert save(client, cset, trials[0], verdict="pass", expected_version=1).status_code == 409
    label = Label.objects.get(trial=trials[0], reviewer=bob)
    assert (label.verdict, label.critique, label.version) == ("fail", "tab 2", 3)
    assert list(
        LabelRevision.objects.filter(trial=trials[0]).values_list("version", "verdict")
    ) == [(1, "pass"), (2, ""), (3, "fail")]
