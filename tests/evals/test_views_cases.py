"""The case editor's pages (issue 16, item 4): "Add as a case" from a trial (executed or
imported) and a comparison case, "New case", editing and retiring, the suite page's history,
and the roles (reviewers see no link and get 403)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from core.text import UNSTORABLE
from evals.models import Case, CaseChange, Grade, Run, Suite, Trial
from tests.comparison_builders import db_run
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def trial(db) -> Trial:
    suite = Suite.objects.create(name="golden")
    case = Case.objects.create(
        suite=suite, key="refund", input="Can I get a refund?", expected="old", tags=["billing"]
    )
    run = Run.objects.create(
        suite=suite,
        name="prod-import",
        source=Run.Source.IMPORTED,
        target_kind="imported",
        status=Run.Status.SUCCEEDED,
        graders=[{"key": "ok", "kind": "exact"}],
    )
    trial = Trial.objects.create(
        run=run, case=case, attempt=1, status="ok", output="Yes, within 30 days.\nAsk support."
    )
    Grade.objects.create(trial=trial, grader="ok", status="ok", passed=False, score=0.0)
    return trial


def login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def post_case(client, suite: Suite, **fields):
    data = {
        "suite": str(suite.uuid),
        "key": "refund-30-days",
        "input_format": "text",
        "input": "Can I get a refund?",
        "expected_format": "text",
        "expected": "Yes, within 30 days.",
        "context": "[]",
        "tags": "billing, from-prod",
        "goal_state": "",
    }
    data.update(fields)
    return client.post(reverse("evals:case-new"), data)


def test_a_reviewer_sees_no_link_and_gets_403_everywhere(client, bob, trial):
    login(client, bob)
    page = client.get(reverse("evals:trial-detail", args=[trial.uuid])).content.decode()
    assert "Add as a case" not in page and reverse("evals:case-new") not in page
    suite_page = client.get(reverse("evals:suite-detail", args=[trial.run.suite.uuid]))
    assert reverse("evals:case-new") not in suite_page.content.decode()
    assert 'class="case-edit-link"' not in suite_page.content.decode()
    case = trial.case
    urls = [
        ("get", reverse("evals:case-new") + f"?trial={trial.uuid}"),
        ("get", reverse("evals:case-edit", args=[case.suite.uuid, case.uuid])),
        ("post", reverse("evals:case-retire", args=[case.suite.uuid, case.uuid])),
        ("post", reverse("evals:case-new")),
    ]
    for method, url in urls:
        assert getattr(client, method)(url).status_code == 403, url
    assert Case.objects.get().retired_at is None


def test_add_as_a_case_from_an_imported_trial_prefills_its_output(client, carol, trial):
    login(client, carol)
    page = client.get(reverse("evals:trial-detail", args=[trial.uuid])).content.decode()
    link = reverse("evals:case-new") + f"?trial={trial.uuid}"
    assert f'href="{link}"' in page
    form = client.get(link)
    html = form.content.decode()
    assert form.status_code == 200
    assert "Yes, within 30 days.\nAsk support.</textarea>" in html
    assert f'<option value="{trial.run.suite.uuid}" selected>' in html
    assert "(imported)" in html and f'value="{trial.uuid}"' in html


def test_saving_records_the_case_and_the_suite_page_shows_who_and_when(client, carol, trial):
    login(client, carol)
    suite = trial.run.suite
    response = post_case(
        client, suite, source_trial=str(trial.uuid), expected="Yes,\r\nwithin 30 days."
    )
    assert response.status_code == 302
    case = Case.objects.get(key="refund-30-days")
    assert case.expected == "Yes,\nwithin 30 days."  # a textarea's CRLF is not content
    assert case.tags == ["billing", "from-prod"]
    change = CaseChange.objects.get(case=case)
    assert (change.by, change.source_trial, change.action) == (carol, trial, "created")
    page = client.get(reverse("evals:suite-detail", args=[suite.uuid])).content.decode()
    assert 'data-action="created" data-case="refund-30-days"' in page
    assert "carol" in page and "trial 1 of prod-import" in page


def test_a_key_clash_asks_for_an_explicit_choice(client, carol, trial):
    login(client, carol)
    suite = trial.run.suite
    response = post_case(client, suite, key="refund")
    assert response.status_code == 200  # the form again, with the choice
    html = response.content.decode()
    assert 'id="case-conflict"' in html and 'name="replace"' in html
    assert Case.objects.get(key="refund").expected == "old"  # nothing replaced silently
    response = post_case(client, suite, key="refund", replace="on")
    assert response.status_code == 302
    old = Case.objects.get(id=trial.case_id)
    assert old.retired_at is not None and old.replaced_by.expected == "Yes, within 30 days."


@pytest.mark.parametrize(
    ("fmt", "typed", "stored"),
    [("text", "false", "false"), ("json", "false", False), ("json", '"false"', "false")],
)
def test_the_expected_answer_keeps_its_type(client, carol, trial, fmt, typed, stored):
    login(client, carol)
    assert (
        post_case(client, trial.run.suite, expected_format=fmt, expected=typed).status_code == 302
    )
    assert Case.objects.get(key="refund-30-days").expected == stored


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"expected_format": "json", "expected": '{"a": NaN}'}, "NaN"),
        ({"expected_format": "json", "expected": '{"a": 1, "a": 2}'}, "twice"),
        ({"input_format": "json", "input": '{"q": "a\\u0000b"}'}, "U+0000"),
        ({"goal_state": '["\\ud800"]'}, "U+0000"),
        (
            {"context": '[{"id": 1, "text": "t"}]'},
            "context[0].id: expected a string, got a number (1)",
        ),
        ({"context": '[{"id": "d"}]'}, "context[0]: missing &quot;text&quot;"),
        (
            {"context": '[{"id": "d", "text": "t"}, {"id": "d", "text": "u"}]'},
            "context[1].id: &#x27;d&#x27; is already the id of context[0]: "
            "each document&#x27;s id once",
        ),
        (
            {"context": '[{"id": "d", "text": "a\\u0000b"}]'},
            "context[0].text: holds U+0000 (NUL)",
        ),
        ({"tags": "ok, " + "t" * 101}, "tags[1]: a tag is at most 100 characters, got 101"),
        ({"tags": "a, b, a"}, "tags[2]: &#x27;a&#x27; is already tags[0]: each tag once"),
        ({"context": '{"id": "d", "text": "t"}'}, "context: expected a list of documents"),
        ({"context": '[{"id": "d", "text": "t",}]'}, "context: not valid JSON (line 1"),
        ({"input_format": "json", "input": "[1, 2]"}, "object"),
    ],
)
def test_hostile_or_malformed_fields_are_refused_on_the_form(client, carol, trial, fields, says):
    login(client, carol)
    response = post_case(client, trial.run.suite, **fields)
    assert response.status_code == 200 and 'class="errorlist' in response.content.decode()
    assert says in response.content.decode()
    assert not Case.objects.filter(key="refund-30-days").exists()


@pytest.mark.parametrize("field", ["input", "key", "expected"])
def test_a_raw_nul_in_a_form_post_is_shown_on_the_field_with_the_typed_text(
    client, carol, trial, field
):
    login(client, carol)
    assert Case.objects.count() == 1
    response = post_case(client, trial.run.suite, **{field: "a\x00b"})
    page = response.content.decode()
    assert response.status_code == 200
    assert f"{field}: {UNSTORABLE}; nothing was saved" in page
    assert "a\ufffdb" in page and "\x00" not in page  # the typed text, the NUL shown as U+FFFD
    assert list(Case.objects.values_list("key", flat=True)) == [trial.case.key]  # none added


def test_a_raw_nul_in_the_case_edit_form_is_shown_on_the_field(client, carol, trial):
    login(client, carol)
    case = trial.case
    edit = reverse("evals:case-edit", args=[case.suite.uuid, case.uuid])
    data = {
        "key": case.key,
        "input_format": "text",
        "input": "Refund?\x00",
        "expected_format": "text",
        "expected": "Within 30 days.",
        "context": "[]",
        "tags": "billing",
        "goal_state": "",
    }
    response = client.post(edit, data)
    page = response.content.decode()
    assert response.status_code == 200
    assert f"input: {UNSTORABLE}; nothing was saved" in page
    assert "Refund?\ufffd</textarea>" in page
    case.refresh_from_db()
    assert case.retired_at is None and "\ufffd" not in str(case.input)
    assert Case.objects.filter(suite=case.suite).count() == 1


def test_hostile_keys_and_tags_are_escaped_on_the_suite_page(client, carol, trial):
    login(client, carol)
    assert post_case(client, trial.run.suite, key=HOSTILE, tags=HOSTILE).status_code == 302
    page = client.get(reverse("evals:suite-detail", args=[trial.run.suite.uuid])).content.decode()
    assert HOSTILE not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_the_editor_edits_content_then_tags_then_retires(client, alice, trial):
    login(client, alice)
    case = trial.case
    edit = reverse("evals:case-edit", args=[case.suite.uuid, case.uuid])
    form = client.get(edit)
    assert form.status_code == 200 and "Can I get a refund?</textarea>" in form.content.decode()
    data = {
        "key": "refund",
        "input_format": "text",
        "input": "Can I get a refund?",
        "expected_format": "text",
        "expected": "Within 30 days.",
        "context": "[]",
        "tags": "billing",
        "goal_state": "",
    }
    assert client.post(edit, data).status_code == 302
    case.refresh_from_db()
    new = case.replaced_by
    assert case.retired_at is not None and new.expected == "Within 30 days."
    # The old page is stale now: saving it again is a conflict, not an overwrite.
    stale = client.post(edit, {**data, "expected": "Never."})
    assert stale.status_code == 200 and "meanwhile by alice" in stale.content.decode()

    edit_new = reverse("evals:case-edit", args=[case.suite.uuid, new.uuid])
    assert client.post(edit_new, {**data, "tags": "billing, refunds"}).status_code == 302
    new.refresh_from_db()
    assert new.tags == ["billing", "refunds"] and new.retired_at is None

    retire = reverse("evals:case-retire", args=[case.suite.uuid, new.uuid])
    assert client.post(retire).status_code == 302
    new.refresh_from_db()
    assert new.retired_at is not None
    actions = list(CaseChange.objects.order_by("id").values_list("action", "by__username"))
    assert actions == [("replaced", "alice"), ("retagged", "alice"), ("retired", "alice")]
    page = client.get(reverse("evals:suite-detail", args=[case.suite.uuid])).content.decode()
    assert "tags billing → billing, refunds" in page


@pytest.mark.parametrize(
    ("context", "error"),
    [
        (
            '[{"id": "d", "txt": "t"}]',
            'context[0].txt: unknown field: a document has only "id" and "text"',
        ),
        ('[{"id": "d", "text": 3}]', "context[0].text: expected a string, got a number (3)"),
        ('[{"id": "d", "text": "t"}, "x"]', "context[1]: expected a document"),
    ],
)
def test_the_editor_names_the_context_item_and_what_is_wrong_on_its_field(
    client, alice, trial, context, error
):
    login(client, alice)
    case = trial.case
    edit = reverse("evals:case-edit", args=[case.suite.uuid, case.uuid])
    data = {
        "key": case.key,
        "input_format": "text",
        "input": "Can I get a refund?",
        "expected_format": "text",
        "expected": "Within 30 days.",
        "context": context,
        "tags": "",
        "goal_state": "",
    }
    response = client.post(edit, data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert list(errors) == ["context"] and errors["context"][0].startswith(error)
    assert "=" not in errors["context"][0]  # no TOML notation in a JSON field
    case.refresh_from_db()
    assert case.retired_at is None


def test_a_comparison_case_offers_add_as_a_case(client, carol):
    base = db_run({"c1": "PP"}, name="base")
    head = db_run({"c1": "PF"}, name="head")
    case = Case.objects.get(key="c1")
    login(client, carol)
    url = reverse("evals:comparison-case", args=[head.uuid, base.uuid, case.uuid])
    html = client.get(url).content.decode()
    assert f"{reverse('evals:case-new')}?case={case.uuid}" in html
    assert html.count('class="add-trial-as-case"') == 4
    form = client.get(f"{reverse('evals:case-new')}?case={case.uuid}").content.decode()
    assert 'value="c1-copy"' in form


EDIT_DATA = {
    "key": "refund",
    "input_format": "text",
    "input": "Can I get a refund?",
    "expected_format": "text",
    "expected": "old",
    "context": "[]",
    "tags": "billing",
    "goal_state": "",
}


def _form_initial(client, url) -> dict:
    """The edit form's fields as the page serves them (what a browser tab would send)."""
    form = client.get(url).context["form"]
    return {name: form[name].value() for name in form.fields}


def test_two_tabs_retagging_one_case_do_not_lose_a_write(client, alice, carol, trial):
    """Two tabs open the editor; the first saves new tags; the second, showing the old
    tags, is refused (naming who changed them), never silently overwriting them; the same
    holds for a content edit made from the stale page."""
    case = trial.case
    edit = reverse("evals:case-edit", args=[case.suite.uuid, case.uuid])
    login(client, alice)
    tab1 = _form_initial(client, edit)
    login(client, carol)
    tab2 = _form_initial(client, edit)
    assert tab1["tags_seen"] == '["billing"]'
    login(client, alice)
    assert client.post(edit, {**tab1, "tags": "billing, from-tab1"}).status_code == 302
    login(client, carol)
    stale = client.post(edit, {**tab2, "tags": "billing, from-tab2"})
    assert stale.status_code == 200
    assert "changed meanwhile by alice" in stale.content.decode()
    case.refresh_from_db()
    assert case.tags == ["billing", "from-tab1"]
    stale = client.post(edit, {**tab2, "expected": "new answer"})
    assert stale.status_code == 200 and "changed meanwhile by alice" in stale.content.decode()
    case.refresh_from_db()
    assert case.retired_at is None and case.tags == ["billing", "from-tab1"]
    # A page loaded after the change saves.
    fresh = _form_initial(client, edit)
    assert client.post(edit, {**fresh, "tags": "billing, from-tab1, from-tab2"}).status_code == 302
    case.refresh_from_db()
    assert case.tags == ["billing", "from-tab1", "from-tab2"]


def test_a_double_clicked_edit_saves_once_and_says_saved(client, alice, trial):
    """The same edit form sent twice: the first replaces the case, the second finds the
    replacement already holding that content and says it was saved (no conflict shown)."""
    case = trial.case
    edit = reverse("evals:case-edit", args=[case.suite.uuid, case.uuid])
    login(client, alice)
    data = {**_form_initial(client, edit), "expected": "Within 30 days."}
    assert client.post(edit, data).status_code == 302
    second = client.post(edit, data, follow=True)
    html = second.content.decode()
    assert second.redirect_chain and "meanwhile" not in html
    assert "already replaced by this content" in html
    assert Case.objects.filter(suite=case.suite, key="refund").count() == 2
    assert list(CaseChange.objects.values_list("action", flat=True)) == ["replaced"]


def test_a_tampered_hidden_field_is_shown_not_swallowed(client, carol, trial):
    login(client, carol)
    response = post_case(client, trial.run.suite, source_trial="not-a-uuid")
    assert response.status_code == 200
    assert 'class="error hidden-field-error"' in response.content.decode()
    assert not Case.objects.filter(key="refund-30-days").exists()


def test_a_source_trial_that_does_not_exist_is_refused_not_dropped(client, carol, trial):
    """Adding a case from a trial deleted meanwhile (or a tampered id) used to save the case
    without its provenance, silently; it is now refused naming the trial."""
    login(client, carol)
    response = post_case(
        client, trial.run.suite, source_trial="00000000-0000-0000-0000-000000000000"
    )
    assert response.status_code == 200
    assert "no trial 00000000-0000-0000-0000-000000000000" in response.content.decode()
    assert not Case.objects.filter(key="refund-30-days").exists()


def test_tags_holding_a_comma_or_spaces_survive_the_editor_unchanged(client, alice, trial):
    """The editor showed tags comma-separated and split them back on commas, so saving an
    untouched case whose imported tag was "refunds, EU" changed it into two tags. Such tags
    now show as a JSON list, and a JSON list is read back exactly."""
    login(client, alice)
    case = trial.case
    Case.objects.filter(pk=case.pk).update(tags=["refunds, EU", " lead", "billing"])
    edit = reverse("evals:case-edit", args=[case.suite.uuid, case.uuid])
    initial = client.get(edit).context["form"].initial
    assert initial["tags"] == '["refunds, EU", " lead", "billing"]'
    data = {k: v for k, v in initial.items() if v is not None}
    unchanged = client.post(edit, data)
    assert unchanged.status_code == 302
    case.refresh_from_db()
    assert case.tags == ["refunds, EU", " lead", "billing"] and case.retired_at is None
    assert not CaseChange.objects.filter(case=case).exists()  # nothing changed, nothing written
    refused = client.post(edit, {**data, "tags": '["ok", 3]'})
    assert "tags: expected a JSON list of strings" in refused.content.decode()
    assert client.post(edit, {**data, "tags": "a, b"}).status_code == 302
    case.refresh_from_db()
    assert case.tags == ["a", "b"]
