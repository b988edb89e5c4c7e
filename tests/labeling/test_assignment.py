"""Assignment with overlap (labeling.assignment): k distinct reviewers per item, balanced,
deterministic; each reviewer's queue holds only their items on every path; a leaving
reviewer's unlabeled items move; leads only."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import DomainError
from labeling.assignment import (
    assignment_plan,
    assignment_progress_get,
    assignment_reassign,
    assignment_set,
)
from labeling.calibration_sets import calibration_item_add
from labeling.labels import label_submit
from labeling.models import AssignmentChange, ItemAssignment, Label
from labeling.queue import queue_state_get
from tests.conftest import PASSWORD
from tests.core.test_api_core import client_for
from tests.labeling_builders import calibration_set, judged_run


def _reviewers(n: int, prefix: str = "r") -> list[User]:
    group = Group.objects.get(name="reviewer")
    users = []
    for i in range(n):
        user = User.objects.create_user(username=f"{prefix}{i}", password=PASSWORD)
        user.groups.add(group)
        users.append(user)
    return users


def _check_plan(plan: dict[int, list[int]], reviewers: list[int], k: int) -> None:
    counts = Counter(r for chosen in plan.values() for r in chosen)
    for chosen in plan.values():
        assert len(chosen) == k and len(set(chosen)) == k
    loads = [counts[r] for r in reviewers]
    assert max(loads) - min(loads) <= 1, loads


@settings(max_examples=50, deadline=None)
@given(
    n_reviewers=st.integers(2, 8),
    n_items=st.integers(1, 60),
    data=st.data(),
    seed=st.integers(0, 2**63 - 1),
)
def test_every_item_gets_k_distinct_reviewers_balanced_and_the_same_for_a_seed(
    n_reviewers, n_items, data, seed
):
    k = data.draw(st.integers(1, n_reviewers))
    reviewers = list(range(100, 100 + n_reviewers))
    items = list(range(1, n_items + 1))
    plan = assignment_plan(item_ids=items, reviewer_ids=reviewers, overlap=k, seed=seed)
    assert sorted(plan) == items
    _check_plan(plan, reviewers, k)
    again = assignment_plan(
        item_ids=list(reversed(items)), reviewer_ids=reviewers[::-1], overlap=k, seed=seed
    )
    assert again == plan


@pytest.fixture
def three(db, alice):
    run, version, trials = judged_run(12, judge_fails=4)
    cset = calibration_set(run, version, trials)
    reviewers = _reviewers(3)
    assignment_set(calibration_set=cset, reviewers=reviewers, overlap=2, by=alice, seed=7)
    return cset, trials, reviewers


def _queue_uuids(cset, user) -> set[str]:
    return set(
        ItemAssignment.objects.filter(item__calibration_set=cset, reviewer=user).values_list(
            "item__trial__uuid", flat=True
        )
    )


def _label_queue_through_htmx(client, cset, user) -> int:
    """Label every item the queue offers ``user``, following the htmx next item."""
    assert client.login(username=user.username, password=PASSWORD)
    saved = 0
    state = queue_state_get(calibration_set=cset, reviewer=user)
    while state.current is not None:
        trial = state.current.item.trial
        response = client.post(
            reverse("labeling:label-save", kwargs={"set_id": cset.uuid}),
            {"trial": str(trial.uuid), "verdict": "pass", "expected_version": 0},
            HTTP_HX_REQUEST="true",
        )
        assert response.status_code == 200 and "Saved pass." in response.content.decode()
        saved += 1
        state = queue_state_get(calibration_set=cset, reviewer=user)
    client.logout()
    return saved


def test_three_reviewers_with_overlap_two_each_label_their_queue_and_every_item_gets_two(
    three, client
):
    cset, trials, reviewers = three
    for user in reviewers:
        state = queue_state_get(calibration_set=cset, reviewer=user)
        assert state.total == 8  # 12 items x 2 / 3 reviewers
        assert state.current is not None
        assert str(state.current.item.trial.uuid) in {str(u) for u in _queue_uuids(cset, user)}
    for user in reviewers:
        assert _label_queue_through_htmx(client, cset, user) == 8
    assert client.login(username=reviewers[0].username, password=PASSWORD)
    done = client.get(reverse("labeling:queue", kwargs={"set_id": cset.uuid})).content.decode()
    assert "every item assigned to you" in done and "queue-done-frozen" not in done
    client.force_login(User.objects.get(username="alice"))  # a lead not among the reviewers
    empty = client.get(reverse("labeling:queue", kwargs={"set_id": cset.uuid})).content.decode()
    assert "No item of this calibration set is assigned to you." in empty
    per_trial = Counter(Label.objects.values_list("trial_id", flat=True))
    assert per_trial == {t.id: 2 for t in trials}
    progress = assignment_progress_get(calibration_set=cset)
    assert [(p.assigned, p.labeled, p.remaining) for p in progress.reviewers] == [(8, 8, 0)] * 3
    assert set(progress.items.values()) == {(2, 2)}
    # A reviewer sees only their own row and no per-item figures.
    own = assignment_progress_get(calibration_set=cset, reviewer=reviewers[0])
    assert [p.reviewer for p in own.reviewers] == [reviewers[0]] and own.items == {}


def test_the_queue_page_and_the_set_page_list_only_the_reviewers_items(three, client):
    cset, trials, reviewers = three
    user = reviewers[1]
    mine = {str(u) for u in _queue_uuids(cset, user)}
    other = next(t for t in trials if str(t.uuid) not in mine)
    assert client.login(username=user.username, password=PASSWORD)
    queue = reverse("labeling:queue", kwargs={"set_id": cset.uuid})
    page = client.get(queue).content.decode()
    assert "0 of 8 labeled" in page
    first = queue_state_get(calibration_set=cset, reviewer=user).current.item.trial
    assert f'value="{first.uuid}"' in page and str(first.uuid) in mine
    # ?trial= naming an item of others shows one of theirs instead.
    shown = client.get(queue, {"trial": str(other.uuid)}).content.decode()
    assert f'value="{other.uuid}"' not in shown and "0 of 8 labeled" in shown
    detail = client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))
    text = detail.content.decode()
    assert detail.status_code == 200 and "Items (8)" in text and "Your progress" in text
    assert other.case.key not in text.split("Items (8)")[1]
    assert "assignment-form" not in text


def test_a_label_on_an_item_of_others_is_refused_on_every_path(three, client):
    cset, trials, reviewers = three
    user = reviewers[0]
    mine = {str(u) for u in _queue_uuids(cset, user)}
    other = next(t for t in trials if str(t.uuid) not in mine)
    # The API: 409 naming the trial and its case, nothing written.
    response = client_for(user).post(
        "/api/labels", {"trial": str(other.uuid), "verdict": "pass"}, format="json"
    )
    assert response.status_code == 409
    body = response.json()
    assert body["field"] == "trial" and str(other.uuid) in body["detail"]
    assert other.case.key in body["detail"] and "not assigned to you" in body["detail"]
    # The service itself, and the HTML queue's save (a stale tab or a forged post).
    with pytest.raises(DomainError, match="not assigned to you"):
        label_submit(trial=other, reviewer=user, verdict="fail", calibration_set=cset)
    assert client.login(username=user.username, password=PASSWORD)
    save = reverse("labeling:label-save", kwargs={"set_id": cset.uuid})
    post = {"trial": str(other.uuid), "verdict": "pass", "expected_version": 0}
    plain = client.post(save, post)
    assert plain.status_code == 409 and "not assigned to you" in plain.content.decode()
    htmx = client.post(save, post, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 200 and "not assigned to you" in htmx.content.decode()
    assert not Label.objects.exists()


def test_a_stale_tab_posting_to_an_item_reassigned_away_is_refused(three, client, alice):
    cset, _, reviewers = three
    leaver = reviewers[2]
    assert client.login(username=leaver.username, password=PASSWORD)
    state = queue_state_get(calibration_set=cset, reviewer=leaver)
    opened = state.current.item.trial  # the tab shows this item
    assignment_reassign(calibration_set=cset, from_reviewer=leaver, by=alice)
    response = client.post(
        reverse("labeling:label-save", kwargs={"set_id": cset.uuid}),
        {"trial": str(opened.uuid), "verdict": "pass", "expected_version": 0},
        HTTP_HX_REQUEST="true",
    )
    assert "not assigned to you" in response.content.decode()
    assert not Label.objects.filter(reviewer=leaver).exists()


def test_reassignment_moves_only_unlabeled_items_keeping_k_distinct_and_balance(three, alice):
    cset, _, reviewers = three
    leaver, stay = reviewers[0], reviewers[1:]
    theirs = list(ItemAssignment.objects.filter(reviewer=leaver).select_related("item__trial"))
    done = [a.item.trial for a in theirs[:3]]
    for trial in done:
        label_submit(trial=trial, reviewer=leaver, verdict="fail", calibration_set=cset)
    moved = assignment_reassign(calibration_set=cset, from_reviewer=leaver, by=alice)
    assert moved == 5
    rows = list(ItemAssignment.objects.filter(item__calibration_set=cset))
    per_item: dict[int, list[int]] = {}
    for row in rows:
        per_item.setdefault(row.item_id, []).append(row.reviewer_id)
    assert all(len(v) == 2 == len(set(v)) for v in per_item.values())
    kept = {a.item.trial_id for a in ItemAssignment.objects.filter(reviewer=leaver)}
    assert kept == {t.id for t in done}  # finished labels stay, with their assignment
    assert Label.objects.filter(reviewer=leaver).count() == 3
    loads = Counter(r.reviewer_id for r in rows if r.reviewer_id != leaver.id)
    assert abs(loads[stay[0].id] - loads[stay[1].id]) <= 1
    assert queue_state_get(calibration_set=cset, reviewer=leaver).current is None
    change = AssignmentChange.objects.first()
    assert (change.action, change.by, change.details["from"]) == ("reassign", alice, "r0")
    assert change.details["moved"] >= 5


def test_reassignment_to_named_reviewers_and_its_refusals(three, alice):
    cset, _, reviewers = three
    newcomer = _reviewers(1, prefix="new")[0]
    assignment_reassign(
        calibration_set=cset, from_reviewer=reviewers[0], to_reviewers=[newcomer], by=alice
    )
    assert queue_state_get(calibration_set=cset, reviewer=newcomer).total == 8
    assert set(cset.assignment.reviewers.all()) == {reviewers[1], reviewers[2], newcomer}
    with pytest.raises(DomainError, match="not a reviewer of this set"):
        assignment_reassign(calibration_set=cset, from_reviewer=reviewers[0], by=alice)
    # Overlap 2 with two reviewers: one leaving leaves items no one can take.
    run, version, trials = judged_run(4, suite_name="s2", run_name="r2", judge_name="j2")
    small = calibration_set(run, version, trials, name="two")
    assignment_set(calibration_set=small, reviewers=reviewers[1:], overlap=2, by=alice)
    with pytest.raises(DomainError, match="cannot keep 2 distinct reviewers"):
        assignment_reassign(calibration_set=small, from_reviewer=reviewers[1], by=alice)
    assert ItemAssignment.objects.filter(item__calibration_set=small).count() == 8


def test_reassignment_keeps_distinctness_and_balance_over_seeded_sets(db, alice):
    rng = random.Random(2026)
    users = _reviewers(8)
    run, version, trials = judged_run(30, judge_fails=5)
    for case in range(12):
        n_reviewers = rng.randint(3, 8)
        k = rng.randint(1, n_reviewers - 1)
        items = trials[: rng.randint(1, 30)]
        cset = calibration_set(run, version, items, name=f"set{case}")
        chosen = users[:n_reviewers]
        assignment_set(calibration_set=cset, reviewers=chosen, overlap=k, by=alice, seed=case)
        assignment_reassign(calibration_set=cset, from_reviewer=chosen[0], by=alice)
        rows = ItemAssignment.objects.filter(item__calibration_set=cset)
        plan: dict[int, list[int]] = {}
        for item_id, reviewer_id in rows.values_list("item_id", "reviewer_id"):
            plan[item_id] = [*plan.get(item_id, []), reviewer_id]
        assert len(plan) == len(items)
        _check_plan(plan, [u.pk for u in chosen[1:]], k)


def test_only_a_lead_assigns_and_bad_input_is_refused(db, alice, bob, carol, mallory):
    run, version, trials = judged_run(5)
    cset = calibration_set(run, version, trials)
    reviewers = _reviewers(2)
    for user in (bob, carol, mallory):
        with pytest.raises(PermissionDenied, match="needs the role lead"):
            assignment_set(calibration_set=cset, reviewers=reviewers, overlap=1, by=user)
    with pytest.raises(DomainError, match="between 1 and the number of reviewers"):
        assignment_set(calibration_set=cset, reviewers=reviewers, overlap=3, by=alice)
    with pytest.raises(DomainError, match="carol does not have the role reviewer"):
        assignment_set(calibration_set=cset, reviewers=[carol], overlap=1, by=alice)
    assignment_set(calibration_set=cset, reviewers=reviewers, overlap=1, by=alice)
    for user in (bob, carol, mallory):
        with pytest.raises(PermissionDenied):
            assignment_reassign(calibration_set=cset, from_reviewer=reviewers[0], by=user)
    change = AssignmentChange.objects.get()
    assert (change.action, change.by, change.details["reviewers"]) == (
        "assign",
        alice,
        ["r0", "r1"],
    )


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 302), ("bob", 403), ("carol", 403), ("mallory", 403)]
)
def test_the_assignment_form_is_for_leads_only(db, client, alice, bob, carol, mallory, who, status):
    run, version, trials = judged_run(6)
    cset = calibration_set(run, version, trials)
    reviewers = _reviewers(3)
    assert client.login(username=who, password=PASSWORD)
    response = client.post(
        reverse("labeling:assignment", kwargs={"set_id": cset.uuid}),
        {"reviewers": [u.pk for u in reviewers], "overlap": 2, "seed": 1},
    )
    assert response.status_code == status
    assert ItemAssignment.objects.count() == (12 if who == "alice" else 0)


def test_a_refused_assignment_shows_the_error_on_the_set_page(db, client, alice):
    run, version, trials = judged_run(6)
    cset = calibration_set(run, version, trials)
    reviewers = _reviewers(2)
    assert client.login(username="alice", password=PASSWORD)
    response = client.post(
        reverse("labeling:assignment", kwargs={"set_id": cset.uuid}),
        {"reviewers": [u.pk for u in reviewers], "overlap": 3, "seed": 0},
    )
    assert response.status_code == 400
    assert "between 1 and the number of reviewers (2), got 3" in response.content.decode()
    assert not ItemAssignment.objects.exists()


def test_without_an_assignment_every_reviewer_sees_every_item(db, bob):
    run, version, trials = judged_run(5)
    cset = calibration_set(run, version, trials)
    assert queue_state_get(calibration_set=cset, reviewer=bob).total == 5
    label_submit(trial=trials[0], reviewer=bob, verdict="pass", calibration_set=cset)
    assert assignment_progress_get(calibration_set=cset) is None


def test_an_item_added_after_the_assignment_gets_k_reviewers(db, alice, carol):
    run, version, trials = judged_run(7)
    cset = calibration_set(run, version, trials[:6])
    reviewers = _reviewers(3)
    assignment_set(calibration_set=cset, reviewers=reviewers, overlap=2, by=alice)
    item = calibration_item_add(calibration_set=cset, trial=trials[6], by=carol)
    assert ItemAssignment.objects.filter(item=item).count() == 2
    loads = Counter(
        ItemAssignment.objects.filter(item__calibration_set=cset).values_list(
            "reviewer_id", flat=True
        )
    )
    assert sorted(loads.values()) == [4, 5, 5]
    assert AssignmentChange.objects.first().action == "extend"


def test_reviewers_who_labeled_keep_their_items_and_loads_stay_even(db, alice):
    run, version, trials = judged_run(10)
    cset = calibration_set(run, version, trials)
    reviewers = _reviewers(4)
    for user in reviewers[:3]:  # three labeled everything before the assignment
        for trial in trials:
            label_submit(trial=trial, reviewer=user, verdict="pass")
    assignment_set(calibration_set=cset, reviewers=reviewers, overlap=2, by=alice)
    rows = ItemAssignment.objects.values_list("item_id", "reviewer_id")
    plan: dict[int, list[int]] = {}
    for item_id, reviewer_id in rows:
        plan[item_id] = [*plan.get(item_id, []), reviewer_id]
    labeled = {u.pk for u in reviewers[:3]}
    assert all(set(v) <= labeled for v in plan.values())  # each kept two who labeled it
    loads = Counter(r for _, r in rows)
    assert sorted(loads[u.pk] for u in reviewers[:3]) == [6, 7, 7] and loads[reviewers[3].pk] == 0


def test_the_lead_moves_a_leaving_reviewers_items_from_the_set_page(three, client, bob):
    cset, _, reviewers = three
    url = reverse("labeling:assignment-reassign", kwargs={"set_id": cset.uuid})
    assert client.login(username="bob", password=PASSWORD)
    assert client.post(url, {"from_reviewer": reviewers[0].pk}).status_code == 403
    assert client.login(username="alice", password=PASSWORD)
    refused = client.post(url, {"from_reviewer": bob.pk})  # not a reviewer of this set
    assert refused.status_code == 400 and "assignment-error" in refused.content.decode()
    response = client.post(url, {"from_reviewer": reviewers[0].pk})
    assert response.status_code == 302
    assert not ItemAssignment.objects.filter(reviewer=reviewers[0]).exists()
    page = client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))
    text = page.content.decode()
    assert "Moved 8 unlabeled items of r0." in text and "8 moved from r0 to r1, r2" in text
    assert "Progress per reviewer" in text
