"""Notes on calibration items (labeling.notes): who reads which note on every path (the queue
page, its htmx fragments, the API, the set page's open questions, the admin), hostile text."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.urls import reverse

from core.errors import DomainError
from core.text import UNSTORABLE
from labeling.labels import label_submit, label_undo
from labeling.models import ItemNote
from labeling.notes import item_note_add, item_notes_get, open_questions_get
from tests.conftest import PASSWORD
from tests.core.test_api_core import client_for
from tests.labeling_builders import calibration_set, judged_run

HTMX = {"HTTP_HX_REQUEST": "true"}
QUESTION = "QUESTION-by-bob: is a **partial** refund a pass?"
ANSWER = "ANSWER-by-alice: a fail, the policy says full refunds only"


@pytest.fixture
def dave(db) -> User:
    user = User.objects.create_user(username="dave", password=PASSWORD)
    user.groups.add(Group.objects.get(name="reviewer"))
    return user


@pytest.fixture
def thread(db, alice, bob):
    """A set of 3 items; bob labeled item 0 and asked on it; alice answered."""
    run, version, trials = judged_run(3)
    cset = calibration_set(run, version, trials)
    item = cset.items.get(position=0)
    label_submit(trial=item.trial, reviewer=bob, verdict="pass", critique="")
    item_note_add(item=item, author=bob, text=QUESTION)
    item_note_add(item=item, author=alice, text=ANSWER)
    return cset, item


def login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def item_page(client, cset, item, **extra) -> tuple[int, str]:
    url = reverse("labeling:queue", kwargs={"set_id": cset.uuid}) + f"?trial={item.trial.uuid}"
    response = client.get(url, **extra)
    return response.status_code, response.content.decode()


def api_notes(user, cset, item):
    url = reverse("api:item-notes", kwargs={"set_id": cset.uuid, "trial_id": item.trial.uuid})
    return client_for(user).get(url)


def api_post(user, cset, item, body):
    url = reverse("api:item-notes", kwargs={"set_id": cset.uuid, "trial_id": item.trial.uuid})
    return client_for(user).post(url, data=json.dumps(body), content_type="application/json")


def seen(user, cset, item, client) -> set[str]:
    """Which of the two notes ``user`` reads on each path: the item page, its htmx fragment,
    the API; asserts the paths agree."""
    shown = []
    if user is not None:
        login(client, user)
    for extra in ({}, HTMX):
        status, page = item_page(client, cset, item, **extra)
        shown.append({m for m in ("QUESTION-by-bob", "ANSWER-by-alice") if m in page})
    response = api_notes(user, cset, item)
    api = set()
    if response.status_code == 200:
        texts = " ".join(n["text"] for n in response.json()["notes"])
        api = {m for m in ("QUESTION-by-bob", "ANSWER-by-alice") if m in texts}
    assert shown[0] == shown[1] == api, (shown, api)
    return api


def test_the_author_and_leads_read_the_thread(client, thread, alice, bob):
    cset, item = thread
    assert seen(bob, cset, item, client) == {"QUESTION-by-bob", "ANSWER-by-alice"}
    client.logout()
    assert seen(alice, cset, item, client) == {"QUESTION-by-bob", "ANSWER-by-alice"}


def test_another_reviewer_reads_it_only_while_holding_a_label(client, thread, dave):
    cset, item = thread
    assert seen(dave, cset, item, client) == set()  # not labeled yet: blind
    label_submit(trial=item.trial, reviewer=dave, verdict="fail", critique="")
    assert seen(dave, cset, item, client) == {"QUESTION-by-bob", "ANSWER-by-alice"}
    label_undo(trial=item.trial, reviewer=dave)  # undone: blind again
    assert seen(dave, cset, item, client) == set()


def test_a_reviewer_always_reads_their_own_note_but_no_other(client, thread, dave):
    cset, item = thread
    item_note_add(item=item, author=dave, text="DAVE-asks")
    assert [n.text for n in item_notes_get(item=item, user=dave)] == ["DAVE-asks"]
    assert seen(dave, cset, item, client) == set()


def test_a_label_on_another_item_shows_nothing_of_this_one(client, thread, dave):
    cset, item = thread
    other = cset.items.get(position=1)
    label_submit(trial=other.trial, reviewer=dave, verdict="pass", critique="")
    assert seen(dave, cset, item, client) == set()


@pytest.mark.parametrize("who", ["carol", "mallory", "anonymous"])
def test_engineers_outsiders_and_anonymous_read_nothing(client, thread, carol, mallory, who):
    cset, item = thread
    user = {"carol": carol, "mallory": mallory, "anonymous": None}[who]
    if user is not None:
        login(client, user)
    status, page = item_page(client, cset, item)
    assert status in (302, 403) and "QUESTION-by-bob" not in page
    assert api_notes(user, cset, item).status_code in (401, 403)
    response = client.post(
        reverse("labeling:note-save", kwargs={"set_id": cset.uuid}),
        {"trial": str(item.trial.uuid), "text": "sneaky"},
    )
    assert response.status_code in (302, 403)
    assert api_post(user, cset, item, {"text": "sneaky"}).status_code in (401, 403)
    assert not ItemNote.objects.filter(text="sneaky").exists()


def test_a_reviewer_asks_through_the_form_and_gets_the_thread_back(client, thread, dave):
    cset, item = thread
    login(client, dave)
    url = reverse("labeling:note-save", kwargs={"set_id": cset.uuid})
    response = client.post(url, {"trial": str(item.trial.uuid), "text": "DAVE-Q <b>x</b>"}, **HTMX)
    page = response.content.decode()
    assert response.status_code == 200 and 'id="item-notes"' in page
    assert "DAVE-Q &lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page  # escaped
    assert "QUESTION-by-bob" not in page  # the fragment applies the rule too
    note = ItemNote.objects.get(author=dave)
    assert note.by_lead is False and note.item == item
    response = client.post(url, {"trial": str(item.trial.uuid), "text": "plain post"})
    assert response.status_code == 302


def test_markdown_is_rendered_and_html_never_raw(client, thread, bob):
    cset, item = thread
    item_note_add(item=item, author=bob, text="<script>alert(1)</script> [x](javascript:alert(1))")
    login(client, bob)
    _, page = item_page(client, cset, item)
    assert "<strong>partial</strong>" in page
    assert "<script>alert(1)</script>" not in page and 'href="javascript:' not in page


@pytest.mark.parametrize(
    ("text", "code", "status"),
    [
        ("a\x00b", "invalid", 400),
        ("a\ud800b", "invalid", 400),
        ("x" * 10_001, "too_large", 413),
        ("   \n ", "invalid", 400),
    ],
)
def test_hostile_text_is_refused_the_same_way_on_every_path(
    client, thread, bob, text, code, status
):
    cset, item = thread
    before = ItemNote.objects.count()
    with pytest.raises(DomainError) as caught:
        item_note_add(item=item, author=bob, text=text)
    assert caught.value.field == "text" and caught.value.code == code
    response = api_post(bob, cset, item, {"text": text})
    assert response.status_code == status, response.content
    assert response.json()["field"] == "text"
    if "\ud800" not in text:  # a form's UTF-8 body cannot carry a lone surrogate
        login(client, bob)
        url = reverse("labeling:note-save", kwargs={"set_id": cset.uuid})
        response = client.post(url, {"trial": str(item.trial.uuid), "text": text}, **HTMX)
        page = response.content.decode()
        assert response.status_code == 200 and 'id="item-notes-error"' in page
        assert "\x00" not in page
    assert ItemNote.objects.count() == before
    if "\x00" in text:
        assert UNSTORABLE in str(caught.value)


def test_a_note_at_the_limit_is_kept(thread, bob):
    _, item = thread
    assert len(item_note_add(item=item, author=bob, text="y" * 10_000).text) == 10_000


def test_an_unknown_trial_or_set_is_a_404(client, thread, bob):
    cset, item = thread
    run, version, trials = judged_run(1, suite_name="other", judge_name="other")
    other_cset = calibration_set(run, version, trials, name="other")
    login(client, bob)
    url = reverse("labeling:note-save", kwargs={"set_id": other_cset.uuid})
    assert client.post(url, {"trial": str(item.trial.uuid), "text": "q"}).status_code == 404
    url = reverse("api:item-notes", kwargs={"set_id": other_cset.uuid, "trial_id": item.trial.uuid})
    assert client_for(bob).get(url).status_code == 404


def test_leads_see_open_questions_on_the_set_page(client, thread, alice, bob, dave):
    cset, item = thread
    assert open_questions_get(calibration_set=cset) == []  # bob's question was answered
    second = cset.items.get(position=2)
    item_note_add(item=second, author=dave, text="DAVE-open")
    item_note_add(item=item, author=bob, text="and a follow-up")  # reopened
    open_items = [q.item.position for q in open_questions_get(calibration_set=cset)]
    assert open_items == [0, 2]
    login(client, alice)
    page = client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})).content
    assert b'id="open-questions"' in page and b"case c03" in page
    client.logout()
    login(client, bob)
    page = client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})).content
    assert b'id="open-questions"' not in page  # a lead's list only
    item_note_add(item=second, author=alice, text="answered")
    assert [q.item.position for q in open_questions_get(calibration_set=cset)] == [0]


def test_the_admin_shows_notes_read_only():
    model_admin = admin.site._registry[ItemNote]
    assert not model_admin.has_add_permission(None)
    assert not model_admin.has_change_permission(None)
    assert not model_admin.has_delete_permission(None)


def test_exports_carry_no_notes(client, thread, alice):
    cset, item = thread
    login(client, alice)
    for url in (
        reverse("interop:set-export", kwargs={"set_id": cset.uuid}) + "?format=csv",
        reverse("interop:labels-export", kwargs={"run_id": cset.run.uuid}),
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert b"QUESTION-by-bob" not in body and b"ANSWER-by-alice" not in body
        assert b"c01" in body  # the export is about the item
