"""Growing the golden set (issue 16, item 4): adding, editing and retiring cases through
``evals.case_changes``, each change recorded with who and when, one content rule on every path
(``evals.cases.case_spec_check``), and a changed case that never compares with its old self."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from core.errors import DomainError
from core.text import UNSTORABLE
from evals.case_changes import case_add, case_edit, case_prefill, case_retire, suites_editable_by
from evals.cases import (
    FIELD_MAX_CHARS,
    CaseSpec,
    case_graduate,
    case_spec_parse,
    cases_upsert,
    suite_config_apply,
)
from evals.comparison.selectors import comparison_get
from evals.models import Case, CaseChange, Grade, Run, Suite, Trial, content_hash
from tests.import_helpers import import_bytes, jsonl, record

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "ok", "kind": "exact"}]


@pytest.fixture
def suite(db) -> Suite:
    return Suite.objects.create(name="golden")


def spec(key="c1", input="What is 2+2?", expected="4", tags=None, **kw) -> CaseSpec:
    return CaseSpec(key=key, input=input, expected=expected, tags=tags or [], **kw)


def run_on(suite: Suite, name: str, verdicts: dict[Case, str]) -> Run:
    """A succeeded run whose trials of each case carry the gating verdicts ("P"/"F")."""
    n = max(len(v) for v in verdicts.values())
    run = Run.objects.create(
        suite=suite,
        name=name,
        target_kind="callable",
        graders=GRADERS,
        trials_per_case=n,
        status=Run.Status.SUCCEEDED,
    )
    for case, marks in verdicts.items():
        for attempt, mark in enumerate(marks, start=1):
            trial = Trial.objects.create(
                run=run, case=case, attempt=attempt, status="ok", output=f"out {attempt}"
            )
            Grade.objects.create(
                trial=trial, grader="ok", status="ok", passed=mark == "P", score=float(mark == "P")
            )
    return run


# Adding ---------------------------------------------------------------------------------


def test_an_engineer_adds_a_case_and_the_change_names_who_when_and_from_which_trial(suite, carol):
    source = Case.objects.create(suite=suite, key="seed", input="q", expected="a")
    run = run_on(suite, "r1", {source: "F"})
    trial = run.trials.get()
    done = case_add(suite=suite, spec=spec(key="new"), by=carol, source_trial=trial)
    assert done.action == "created"
    assert done.case.content_hash == content_hash(input="What is 2+2?", expected="4", context=[])
    change = CaseChange.objects.get(case=done.case)
    assert (change.action, change.by, change.via, change.source_trial) == (
        "created",
        carol,
        "editor",
        trial,
    )
    assert change.at is not None and change.previous is None


def test_adding_the_same_content_under_its_key_changes_nothing(suite, carol):
    first = case_add(suite=suite, spec=spec(), by=carol).case
    again = case_add(suite=suite, spec=spec(), by=carol)
    assert (again.action, again.case.id) == ("unchanged", first.id)
    assert Case.objects.count() == 1 and CaseChange.objects.count() == 1


def test_a_key_clash_with_other_content_is_refused_unless_replace_is_chosen(suite, carol):
    old = case_add(suite=suite, spec=spec(), by=carol).case
    with pytest.raises(DomainError) as caught:
        case_add(suite=suite, spec=spec(expected="5"), by=carol)
    assert (caught.value.code, caught.value.field) == ("conflict", "key")
    assert Case.objects.count() == 1  # nothing written, nothing retired

    done = case_add(suite=suite, spec=spec(expected="5"), by=carol, replace=True)
    old.refresh_from_db()
    assert done.action == "replaced"
    assert old.retired_at is not None and old.replaced_by == done.case
    change = CaseChange.objects.get(case=done.case)
    assert (change.action, change.previous) == ("replaced", old)


def test_reviewers_and_outsiders_may_not_add_edit_or_retire(suite, bob, mallory, carol):
    case = case_add(suite=suite, spec=spec(), by=carol).case
    for user in (bob, mallory):
        with pytest.raises(PermissionDenied):
            case_add(suite=suite, spec=spec(key="x"), by=user)
        with pytest.raises(PermissionDenied):
            case_edit(case=case, spec=spec(expected="5"), by=user)
        with pytest.raises(PermissionDenied):
            case_retire(case=case, by=user)
        assert list(suites_editable_by(user)) == []
    assert list(suites_editable_by(carol)) == [suite]
    assert Case.objects.get().retired_at is None


# Editing --------------------------------------------------------------------------------


def test_editing_content_retires_the_case_and_creates_its_replacement(suite, carol, alice):
    old = case_add(suite=suite, spec=spec(tags=["math"]), by=carol).case
    done = case_edit(case=old, spec=spec(expected="four", tags=["math"]), by=alice)
    old.refresh_from_db()
    assert done.action == "replaced" and done.case.id != old.id
    assert old.retired_at is not None and old.replaced_by == done.case
    assert done.case.content_hash != old.content_hash
    change = CaseChange.objects.get(case=done.case)
    assert (change.action, change.previous, change.by) == ("replaced", old, alice)


def test_editing_only_tags_keeps_the_case_and_records_old_and_new_tags(suite, carol):
    case = case_add(suite=suite, spec=spec(tags=["a"]), by=carol).case
    done = case_edit(case=case, spec=spec(tags=["a", "b"]), by=carol)
    assert (done.action, done.case.id) == ("retagged", case.id)
    case.refresh_from_db()
    assert case.tags == ["a", "b"] and case.retired_at is None and Case.objects.count() == 1
    change = CaseChange.objects.get(action="retagged")
    assert change.details == {"tags": [["a"], ["a", "b"]]}


def test_an_edit_that_changes_nothing_writes_nothing(suite, carol):
    case = case_add(suite=suite, spec=spec(), by=carol).case
    assert case_edit(case=case, spec=spec(), by=carol).action == "unchanged"
    assert CaseChange.objects.count() == 1


def test_a_new_key_is_a_new_case_replacing_the_old_and_must_be_free(suite, carol):
    a = case_add(suite=suite, spec=spec(key="a"), by=carol).case
    case_add(suite=suite, spec=spec(key="b", input="other"), by=carol)
    with pytest.raises(DomainError) as caught:
        case_edit(case=a, spec=spec(key="b"), by=carol)
    assert (caught.value.code, caught.value.field) == ("conflict", "key")
    done = case_edit(case=a, spec=spec(key="a2"), by=carol)
    a.refresh_from_db()
    assert a.retired_at is not None and a.replaced_by == done.case and done.case.key == "a2"
    assert CaseChange.objects.get(case=done.case).details == {"key": ["a", "a2"]}


def test_editing_a_case_retired_meanwhile_is_a_conflict_naming_who(suite, carol, alice):
    case = case_add(suite=suite, spec=spec(), by=carol).case
    stale = Case.objects.get(id=case.id)
    case_edit(case=case, spec=spec(expected="5"), by=alice)
    with pytest.raises(DomainError) as caught:
        case_edit(case=stale, spec=spec(expected="6"), by=carol)
    assert caught.value.code == "conflict" and "alice" in str(caught.value)
    assert Case.objects.active().get().expected == "5"


def test_goal_state_is_content_an_edit_of_it_makes_a_new_case(suite, carol):
    case = case_add(suite=suite, spec=spec(goal_state={"door": "open"}), by=carol).case
    assert case.goal_state == {"door": "open"}
    done = case_edit(case=case, spec=spec(goal_state={"door": "shut"}), by=carol)
    assert done.action == "replaced" and done.case.goal_state == {"door": "shut"}


# Retiring -------------------------------------------------------------------------------


def test_retiring_is_recorded_and_retiring_twice_is_a_conflict(suite, carol):
    case = case_add(suite=suite, spec=spec(), by=carol).case
    case_retire(case=case, by=carol)
    case.refresh_from_db()
    assert case.retired_at is not None
    assert CaseChange.objects.filter(case=case, action="retired", by=carol).count() == 1
    with pytest.raises(DomainError) as caught:
        case_retire(case=case, by=carol)
    assert caught.value.code == "conflict"


# One rule for content, on every path ----------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"input": "a\x00b"}, "input", UNSTORABLE),
        ({"tags": ["ok", "bad\ud800"]}, "tags[1]", UNSTORABLE),
        (
            {"context": [{"id": "d", "text": "a\x00b"}]},
            "context[0].text",
            UNSTORABLE,
        ),
        ({"expected": {"n": float("nan")}}, "expected.n", "NaN"),
        ({"goal_state": [float("inf")]}, "goal_state[0]", "NaN"),
        ({"key": " padded"}, "key", "spaces"),
        ({"key": "k" * 201}, "key", "200"),
        ({"tags": ["a", "a"]}, "tags[1]", "'a' is already tags[0]: each tag once"),
        ({"tags": ["ok", "t" * 101]}, "tags[1]", "a tag is at most 100 characters, got 101"),
        ({"tags": ["ok", " "]}, "tags[1]", "expected a non-empty string, got an empty string"),
        ({"tags": [f"t{i}" for i in range(51)]}, "tags", "at most 50 tags, got 51"),
        (
            {"context": [{"id": "d", "text": "t"}, {"id": "d", "text": "u"}]},
            "context[1].id",
            "'d' is already the id of context[0]: each document's id once",
        ),
        ({"input": ["not", "a", "table"]}, "input", "a string or an object, got a list"),
        ({"context": {"id": "d"}}, "context", "expected a list of documents"),
        ({"context": ["d"]}, "context[0]", "expected a document"),
        (
            {"context": [{"id": "d", "text": "t"}, {"id": 1, "text": "t"}]},
            "context[1].id",
            "a number (1)",
        ),
        ({"context": [{"id": "d"}]}, "context[0]", 'missing "text"'),
        ({"context": [{"id": "d", "text": "t", "src": "x"}]}, "context[0].src", "unknown field"),
    ],
)
def test_hostile_content_is_refused_the_same_way_by_the_editor_and_config_files(
    suite, carol, changes, field, message
):
    base = {"key": "c1", "input": "q", "expected": "a", "tags": []}
    with pytest.raises(DomainError) as editor:
        case_add(suite=suite, spec=CaseSpec(**{**base, **changes}), by=carol)
    assert editor.value.field == field and message in str(editor.value)
    with pytest.raises(DomainError) as config:
        case_spec_parse({**base, **changes}, "suites.s.cases[0]")
    assert config.value.field == f"suites.s.cases[0].{field}"
    assert config.value.message == editor.value.message
    assert not Case.objects.exists()


def test_a_huge_field_is_too_large(suite, carol):
    with pytest.raises(DomainError) as caught:
        case_add(suite=suite, spec=spec(expected="x" * FIELD_MAX_CHARS), by=carol)
    assert (caught.value.code, caught.value.field) == ("too_large", "expected")


def test_the_text_false_and_the_boolean_false_are_different_cases(suite, carol):
    text = case_add(suite=suite, spec=spec(key="t", expected="false"), by=carol).case
    boolean = case_add(suite=suite, spec=spec(key="b", expected=False), by=carol).case
    assert text.expected == "false" and boolean.expected is False
    assert text.content_hash != boolean.content_hash


def test_imports_and_config_files_record_their_changes_too(suite, alice):
    cases_upsert(suite=suite, specs=[spec()], by=alice, via="import")
    cases_upsert(suite=suite, specs=[spec(expected="5")], via="config")
    created, replaced = CaseChange.objects.order_by("id")
    assert (created.action, created.via, created.by) == ("created", "import", alice)
    assert (replaced.action, replaced.via, replaced.by) == ("replaced", "config", None)


# Prefill ---------------------------------------------------------------------------------


def test_add_as_a_case_prefills_from_the_trial_output_or_the_case_expected(suite):
    source = Case.objects.create(
        suite=suite, key="seed", input={"q": 1}, expected="old", tags=["t"], goal_state={"a": 1}
    )
    run = run_on(suite, "r1", {source: "PF"})
    ok, _ = run.trials.order_by("attempt")
    Trial.objects.filter(id=ok.id).update(final_state={"a": 2})
    ok.refresh_from_db()
    prefill = case_prefill(trial=ok)
    assert prefill.suite == suite and prefill.source_trial == ok
    assert prefill.spec.input == {"q": 1} and prefill.spec.expected == "out 1"
    assert prefill.spec.tags == ["t"] and prefill.spec.goal_state == {"a": 2}
    assert prefill.spec.key.startswith("seed-")
    Trial.objects.filter(id=ok.id).update(status="error", output="")
    ok.refresh_from_db()
    assert case_prefill(trial=ok).spec.expected == "old"
    copy = case_prefill(case=source)
    assert (copy.spec.key, copy.spec.expected) == ("seed-copy", "old")


# A changed case never compares with its old self ------------------------------------------


def test_a_changed_case_does_not_compare_with_its_old_self(suite, carol):
    """The comparison pairs cases by content hash (``evals.comparison.compute._match_cases``):
    after an edit, the run on the old case and the run on the new case share the key but not
    the hash, so the case is listed as changed and left out of the test, while a case whose
    tags alone changed still pairs with itself."""
    edited = case_add(suite=suite, spec=spec(key="edited", tags=["x"]), by=carol).case
    retagged = case_add(suite=suite, spec=spec(key="retagged", input="q2"), by=carol).case
    base = run_on(suite, "base", {edited: "PP", retagged: "PP"})
    new = case_edit(case=edited, spec=spec(key="edited", expected="four", tags=["x"]), by=carol)
    case_edit(case=retagged, spec=spec(key="retagged", input="q2", tags=["y"]), by=carol)
    head = run_on(suite, "head", {new.case: "FF", retagged: "FF"})

    comparison = comparison_get(base=base, head=head)
    assert [c.key for c in comparison.changed] == ["edited"]
    assert comparison.changed[0].other_hash == edited.content_hash
    assert comparison.changed[0].content_hash == new.case.content_hash
    assert [c.key for c in comparison.cases] == ["retagged"]  # tags are not content
    assert not comparison.added and not comparison.removed


def test_a_config_file_retags_in_place_and_records_it(db):
    first = [CaseSpec(key="c1", input="q", expected="a", tags=["x"])]
    suite_config_apply(name="cfg", config={}, cases=first)
    case = Case.objects.get()
    again = suite_config_apply(
        name="cfg", config={}, cases=[CaseSpec(key="c1", input="q", expected="a", tags=["y"])]
    )
    assert again["action"] == "updated" and again["cases"]["retagged"] == 1
    assert Case.objects.get().id == case.id and Case.objects.get().tags == ["y"]
    change = CaseChange.objects.get(action="retagged")
    assert (change.via, change.details) == ("config", {"tags": [["x"], ["y"]]})
    unchanged = suite_config_apply(
        name="cfg", config={}, cases=[CaseSpec(key="c1", input="q", expected="a", tags=["y"])]
    )
    assert unchanged["action"] == "unchanged" and unchanged["cases"]["unchanged"] == 1


def test_an_import_records_its_cases_with_the_importer(carol):
    import_bytes(jsonl([record()]), suite="imported", user=carol)
    change = CaseChange.objects.get()
    assert (change.action, change.via, change.by) == ("created", "import", carol)
    assert change.suite.name == "imported"


def test_a_graduation_records_the_copy_with_who_graduated_it(carol):
    capability = Suite.objects.create(name="cap", kind=Suite.Kind.CAPABILITY)
    regression = Suite.objects.create(name="reg", kind=Suite.Kind.REGRESSION)
    case = Case.objects.create(suite=capability, key="c1", input="q", goal_state={"g": 1})
    for name in ("r1", "r2", "r3"):
        run_on(capability, name, {case: "PP"})
    graduation = case_graduate(case=case, into_suite=regression, by=carol)
    copy = graduation.regression_case
    assert copy.content_hash == case.content_hash and copy.goal_state == {"g": 1}
    change = CaseChange.objects.get(suite=regression)
    assert (change.action, change.via, change.by, change.case) == (
        "created",
        "graduation",
        carol,
        copy,
    )
