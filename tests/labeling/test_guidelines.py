"""Guidelines for reviewers (issue 12, point 9): a calibration set's instructions, written
in Markdown on the set page by engineers and leads, shown in the queue with each item and
behind "?", never as raw HTML; and a save whose session expired (htmx gets a 401, not the
login page swapped into the item)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from core.errors import DomainError
from core.text import UNSTORABLE
from labeling.guidelines import INSTRUCTIONS_MAX, calibration_set_instructions_set
from labeling.models import Label
from tests.labeling_builders import calibration_set, judged_run

HTMX = {"HTTP_HX_REQUEST": "true"}
GUIDE = "## Criterion\n\nFail an answer that **invents** a policy.\n\n<script>alert(1)</script>"


@pytest.fixture
def cset(db):
    run, version, trials = judged_run(3)
    return calibration_set(run, version, trials)


def _edit(client, cset, text):
    """Post ``text`` from a form loaded now (the set's current guidelines version)."""
    version = type(cset).objects.get(pk=cset.pk).instructions_version
    return client.post(
        reverse("labeling:set-instructions", kwargs={"set_id": cset.uuid}),
        {"instructions": text, "expected_version": version},
    )


@pytest.mark.parametrize("who", ["alice", "carol"])
def test_engineers_and_leads_write_the_guidelines_on_the_set_page(client, cset, who, request):
    client.force_login(request.getfixturevalue(who))
    page = client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))
    assert b'id="guidelines-form"' in page.content
    response = _edit(client, cset, GUIDE.replace("\n", "\r\n"))
    assert response.status_code == 302
    cset.refresh_from_db()
    assert cset.instructions == GUIDE  # line ends normalised
    body = client.get(response["Location"]).content.decode()
    assert "<strong>invents</strong>" in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body


@pytest.mark.parametrize("who", ["bob", "mallory"])
def test_reviewers_and_outsiders_cannot_edit_them(client, cset, who, request):
    client.force_login(request.getfixturevalue(who))
    assert _edit(client, cset, "mine now").status_code == 403
    cset.refresh_from_db()
    assert cset.instructions == ""
    if who == "bob":
        page = client.get(reverse("labeling:set-detail", kwargs={"set_id": cset.uuid}))
        assert b'id="guidelines-form"' not in page.content


def test_the_service_checks_the_role_and_the_length(cset, bob, carol):
    with pytest.raises(PermissionDenied):
        calibration_set_instructions_set(calibration_set=cset, instructions="x", by=bob)
    with pytest.raises(DomainError) as exc:
        calibration_set_instructions_set(
            calibration_set=cset, instructions="x" * (INSTRUCTIONS_MAX + 1), by=carol
        )
    assert exc.value.field == "instructions"
    calibration_set_instructions_set(calibration_set=cset, instructions="  ok  ", by=carol)
    cset.refresh_from_db()
    assert cset.instructions == "ok"


def test_the_queue_shows_the_guidelines_with_the_item_and_behind_the_help_key(client, cset, bob):
    cset.instructions = GUIDE
    cset.save()
    client.force_login(bob)
    url = reverse("labeling:queue", kwargs={"set_id": cset.uuid})
    body = client.get(url).content.decode()
    assert 'id="queue-guidelines"' in body and 'id="queue-help-guidelines"' in body
    assert 'id="queue-help-button"' in body
    assert body.count("<strong>invents</strong>") == 2
    assert "<script>alert" not in body
    # The htmx fragment of the next item carries them too (they stay with every item).
    fragment = client.get(url, **HTMX).content.decode()
    assert 'id="queue-guidelines"' in fragment and "<strong>invents</strong>" in fragment


def test_a_queue_without_guidelines_shows_only_the_keys(client, cset, bob):
    client.force_login(bob)
    body = client.get(reverse("labeling:queue", kwargs={"set_id": cset.uuid})).content.decode()
    assert 'id="queue-guidelines"' not in body and 'id="queue-help-guidelines"' not in body
    assert 'id="queue-session-expired"' in body  # the hidden banner the script shows on 401


def test_an_expired_session_gets_a_401_from_htmx_and_never_the_login_page(client, cset):
    trial = cset.items.first().trial
    save = reverse("labeling:label-save", kwargs={"set_id": cset.uuid})
    data = {"trial": str(trial.uuid), "verdict": "fail", "critique": "kept", "expected_version": 0}
    response = client.post(save, data, **HTMX)  # nobody logged in: the session expired
    assert response.status_code == 401
    assert b"log in again" in response.content
    assert b"<form" not in response.content and b"id_password" not in response.content
    assert Label.objects.count() == 0
    # A page (no htmx) still goes to the login page, with the way back.
    page = client.get(reverse("labeling:queue", kwargs={"set_id": cset.uuid}))
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/?next=")


def test_after_logging_in_again_the_same_save_goes_through(client, cset, bob):
    trial = cset.items.first().trial
    save = reverse("labeling:label-save", kwargs={"set_id": cset.uuid})
    data = {"trial": str(trial.uuid), "verdict": "fail", "critique": "kept", "expected_version": 0}
    assert client.post(save, data, **HTMX).status_code == 401
    client.force_login(bob)
    response = client.post(save, data, **HTMX)
    assert response.status_code == 200 and b"Saved fail." in response.content
    label = Label.objects.get(reviewer=bob, trial=trial)
    assert (label.verdict, label.critique) == ("fail", "kept")


def test_guidelines_holding_a_nul_come_back_on_the_set_page_and_nothing_is_saved(
    client, cset, carol
):
    cset.instructions = "kept as it was"
    cset.save()
    client.force_login(carol)
    response = _edit(client, cset, "Fail an\x00 invented policy.")
    page = response.content.decode()
    assert response.status_code == 200
    assert f"instructions: {UNSTORABLE}; nothing was saved" in page
    assert "Fail an\ufffd invented policy.</textarea>" in page and "\x00" not in page
    assert "<details open>" in page  # the form shown open, with the error
    cset.refresh_from_db()
    assert cset.instructions == "kept as it was"


def test_guidelines_too_long_come_back_on_the_set_page_with_the_error(client, cset, carol):
    client.force_login(carol)
    text = "x" * (INSTRUCTIONS_MAX + 1)
    response = _edit(client, cset, text)
    page = response.content.decode()
    assert response.status_code == 200
    assert "Guidelines not saved: instructions:" in page
    assert f"{text}</textarea>" in page
    cset.refresh_from_db()
    assert cset.instructions == ""


def test_each_edit_is_a_version_and_a_stale_form_is_refused_with_the_current_text_shown(
    client, cset, alice, carol
):
    url = reverse("labeling:set-instructions", kwargs={"set_id": cset.uuid})
    client.force_login(carol)
    assert client.post(url, {"instructions": "v1 CAROL", "expected_version": 0}).status_code == 302
    client.force_login(alice)
    assert client.post(url, {"instructions": "v2 ALICE", "expected_version": 1}).status_code == 302
    client.force_login(carol)  # her tab still holds version 1
    response = client.post(url, {"instructions": "CAROL-STALE-EDIT", "expected_version": 1})
    page = response.content.decode()
    assert response.status_code == 409
    assert '<pre class="text" id="guidelines-current">v2 ALICE</pre>' in page
    assert "CAROL-STALE-EDIT</textarea>" in page  # her text kept in the form
    assert 'name="expected_version" value="2"' in page  # saving again replaces deliberately
    cset.refresh_from_db()
    assert (cset.instructions, cset.instructions_version) == ("v2 ALICE", 2)
    assert [(v.version, v.text, v.created_by.username) for v in cset.guidelines_versions.all()] == [
        (1, "v1 CAROL", "carol"),
        (2, "v2 ALICE", "alice"),
    ]


def test_a_post_without_the_version_it_was_loaded_with_cannot_skip_the_check(
    client, cset, alice, carol
):
    url = reverse("labeling:set-instructions", kwargs={"set_id": cset.uuid})
    client.force_login(alice)
    assert client.post(url, {"instructions": "ALICE", "expected_version": 0}).status_code == 302
    client.force_login(carol)
    response = client.post(url, {"instructions": "CAROL-BLIND-OVERWRITE"})
    assert response.status_code != 302
    cset.refresh_from_db()
    assert (cset.instructions, cset.instructions_version) == ("ALICE", 1)


def test_a_post_without_the_version_shows_the_refusal_on_the_form_with_the_text_kept(
    client, cset, carol
):
    url = reverse("labeling:set-instructions", kwargs={"set_id": cset.uuid})
    client.force_login(carol)
    response = client.post(url, {"instructions": "CAROL-UNVERSIONED"})
    page = response.content.decode()
    assert response.status_code == 200
    assert (
        '<p class="error guidelines-error" id="guidelines-version-error">Guidelines not saved: '
        "expected_version: missing or not a guidelines version; reload the page to edit the "
        "current guidelines — nothing was saved</p>" in page
    )
    assert "CAROL-UNVERSIONED</textarea>" in page and "<details open>" in page
    cset.refresh_from_db()
    assert (cset.instructions, cset.instructions_version) == ("", 0)


def test_every_label_stores_the_guidelines_version_it_was_given_under(client, cset, bob, carol):
    trials = [item.trial for item in cset.items.order_by("position")]
    save = reverse("labeling:label-save", kwargs={"set_id": cset.uuid})
    for text, trial in (("first rule", trials[0]), ("second rule", trials[1])):
        calibration_set_instructions_set(calibration_set=cset, instructions=text, by=carol)
        client.force_login(bob)
        client.post(save, {"trial": trial.uuid, "verdict": "pass", "expected_version": 0}, **HTMX)
    labels = {
        lb.trial_id: lb.guidelines.version for lb in Label.objects.select_related("guidelines")
    }
    assert labels == {trials[0].id: 1, trials[1].id: 2}
    client.force_login(carol)
    url = reverse("labeling:calibration", args=[cset.judge_version.uuid]) + f"?set={cset.uuid}"
    page = client.get(url).content.decode()
    assert "1 label given under guidelines v2 · 1 label given under guidelines v1" in page
    export = client.get(reverse("interop:set-export", args=[cset.uuid]) + "?format=csv")
    assert b"label.bob.guidelines_version" in export.content
