"""The attempts of a case repeat its content: it is checked once per distinct content
(``trial_row.CaseMemo``), and a bad record after good attempts of the same case is still
refused naming it, with the message a first bad record gets (issue 17)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from core.errors import DomainError
from evals.models import Case, Trial
from interop.importers import trial_row
from interop.importers.trial_row import CaseMemo, Row, row_parse
from interop.ingest.records import record_parse
from tests.import_helpers import import_bytes
from tests.interop.test_api_ingest import NOTHING, client_for, header, post_ndjson, row_counts

GOOD = {"case_id": "c1", "input": "q", "expected": "a", "tags": ["x"], "passed": True}
OVERFLOW = "a number out of range (it overflows to infinity)"
DIFFERENT = "case 'c1' has different input/expected than on line 2"

# (what the 5th attempt changes, its field, the message): each refused as a first bad
# record would be, although attempts 1-4 gave the case's content.
FIFTH = [
    ({"tags": ["x", "x"]}, "tags[1]", "'x' is already tags[0]: each tag once"),
    ({"tags": [""]}, "tags[0]", "expected a non-empty string, got an empty string"),
    ({"tags": "x"}, "tags", "expected an array of strings, got 'x'"),
    ({"tags": [1]}, "tags", "expected an array of strings, got [1]"),
    ({"input": ["q"]}, "input", "expected a string or object, got ['q']"),
    ({"expected": "b"}, "input", DIFFERENT),
    ({"input": "q "}, "input", DIFFERENT),
    ({"expected": {"a": 1}}, "input", DIFFERENT),
    ({"expected": None}, "input", DIFFERENT),
    ({"tags": ["y"]}, "input", None),  # other tags, same input/expected: accepted (as before)
]


def _records(fifth: dict) -> list[dict]:
    return [{**GOOD, "attempt": a} for a in range(1, 5)] + [{**GOOD, **fifth, "attempt": 5}]


@pytest.mark.parametrize("fifth,field,message", FIFTH)
def test_the_ingest_refuses_a_bad_fifth_attempt_naming_it(carol, fifth, field, message):
    text = json.dumps(header()) + "\n" + "\n".join(json.dumps(r) for r in _records(fifth))
    resp = post_ndjson(client_for(carol), text + "\n")
    if message is None:
        assert resp.status_code == 201, resp.content
        assert Case.objects.get().tags == ["x"]  # the first content of the case is kept
        return
    assert resp.status_code == 400
    data = resp.json()
    assert (data["record"], data["field"]) == (6, field)
    assert data["detail"] == f"line 6: field {field}: {message}"
    assert row_counts() == NOTHING


def test_the_ingest_refuses_an_overflowing_expected_after_four_good_attempts(carol):
    lines = [json.dumps(r) for r in _records({})]
    lines[4] = lines[4].replace('"expected": "a"', '"expected": 1e400')
    resp = post_ndjson(client_for(carol), json.dumps(header()) + "\n" + "\n".join(lines) + "\n")
    assert resp.status_code == 400
    data = resp.json()
    assert (data["record"], data["field"]) == (6, "expected")
    assert data["detail"] == f"line 6: field expected: {OVERFLOW}"
    assert row_counts() == NOTHING


@pytest.mark.django_db
@pytest.mark.parametrize("fifth,field,message", [f for f in FIFTH if f[2] is not None])
def test_the_jsonl_import_refuses_a_bad_fifth_attempt_naming_it(fifth, field, message):
    text = "\n".join(json.dumps(r) for r in _records(fifth)) + "\n"
    with pytest.raises(DomainError) as exc:
        import_bytes(text.encode(), filename="results.jsonl", fmt="jsonl")
    assert str(exc.value) == f"line 5: field {field}: {message.replace('line 2', 'line 1')}"
    assert Case.objects.count() == Trial.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fifth,message",
    [
        ('c1,q,a,"x,x"', "field tags[1]: 'x' is already tags[0]: each tag once"),
        ("c1,q,a,[1]", "field tags: expected an array of strings, got [1]"),
        (
            "c1,q,b,x",
            "field input: case 'c1' has different input/expected than on row 1 (line 2)",
        ),
        (
            "c1,q,,x",
            "field input: case 'c1' has different input/expected than on row 1 (line 2)",
        ),
    ],
)
def test_the_csv_import_refuses_a_bad_fifth_attempt_naming_it(fifth, message):
    rows = "".join(f"c1,q,a,x,{a}\n" for a in range(1, 5))
    data = f"case_id,input,expected,tags,attempt\n{rows}{fifth},5\n".encode()
    with pytest.raises(DomainError) as exc:
        import_bytes(data, filename="results.csv")
    assert str(exc.value) == f"row 5 (line 6): {message}"
    assert Case.objects.count() == Trial.objects.count() == 0


@pytest.mark.django_db
def test_five_attempts_of_one_case_store_one_case_and_five_trials():
    text = "\n".join(json.dumps(r) for r in _records({})) + "\n"
    import_bytes(text.encode(), filename="results.jsonl", fmt="jsonl")
    case = Case.objects.get()
    assert (case.key, case.input, case.expected, case.tags) == ("c1", "q", "a", ["x"])
    assert sorted(Trial.objects.values_list("attempt", flat=True)) == [1, 2, 3, 4, 5]


def _spec(values: dict, cases: CaseMemo | None, *, csv: bool = False):
    row = Row(where="line 1", values=values, extra={}, is_csv=csv, index=1)
    return row_parse(row, threshold=None, cases=cases)


def test_a_repeated_plain_content_shares_the_first_checked_case_spec(monkeypatch):
    cases = CaseMemo()
    first = _spec({**GOOD, "tags": ["x", "y"]}, cases)
    checks = []
    monkeypatch.setattr(trial_row, "tags_parse", lambda row: checks.append(row) or ["x", "y"])
    again = _spec({**GOOD, "tags": ["x", "y"], "attempt": 2}, cases)
    assert again.case is first.case and checks == []  # not checked again
    assert first.case.tags == ["x", "y"]


@pytest.mark.parametrize(
    "values",
    [
        {**GOOD, "tags": ["y"]},  # other tags
        {**GOOD, "expected": None},
        {**GOOD, "input": "q2"},
        {**GOOD, "case_id": "c2"},
    ],
)
def test_another_content_or_key_is_checked_again(values):
    cases = CaseMemo()
    first = _spec(GOOD, cases)
    other = _spec(values, cases)
    assert other.case is not first.case
    assert (other.case.key, other.case.input, other.case.expected, other.case.tags) == (
        values["case_id"],
        values["input"],
        values["expected"],
        values["tags"],
    )


@pytest.mark.parametrize(
    "values",
    [
        {"case_id": "c1", "input": {"q": 1}, "expected": "a"},  # an object input
        {"case_id": "c1", "input": "q", "expected": 1},  # 1 == 1.0 == True: not remembered
        {"case_id": "c1", "input": "q", "expected": [1.5]},
    ],
)
def test_content_that_is_not_plain_is_checked_on_every_row(values):
    cases = CaseMemo()
    first = _spec(values, cases)
    again = _spec(values, cases)
    assert again.case is not first.case and again.case == first.case


def test_an_expected_equal_in_python_but_of_another_type_is_not_the_same_content():
    cases = CaseMemo()
    _spec({"case_id": "c1", "input": "q", "expected": "1"}, cases)
    other = _spec({"case_id": "c1", "input": "q", "expected": 1}, cases)
    assert other.case.expected == 1 and type(other.case.expected) is int


def test_record_parse_passes_the_memo_on_and_csv_tags_are_compared_as_written():
    cases = CaseMemo()
    first = record_parse({**GOOD}, where="line 2", record=2, threshold=None, cases=cases)
    again = record_parse({**GOOD}, where="line 3", record=3, threshold=None, cases=cases)
    assert again.case is first.case
    csv = CaseMemo()
    a = _spec({"case_id": "c1", "input": "q", "tags": "x, y"}, csv, csv=True)
    b = _spec({"case_id": "c1", "input": "q", "tags": "x, y"}, csv, csv=True)
    c = _spec({"case_id": "c1", "input": "q", "tags": "x,y"}, csv, csv=True)
    assert b.case is a.case and c.case is not a.case and c.case.tags == ["x", "y"]


# Costs: the plain form ("0.00412345") takes a fast path; every value reads as the full
# rules read it, and what they refuse is refused with the same message.
COSTS = [
    ("0", Decimal("0E-12")),
    ("0.00412345", Decimal("0.004123450000")),
    ("999999.999999999999", Decimal("999999.999999999999")),
    ("000001.5", Decimal("1.500000000000")),
    ("0.000000000001", Decimal("0.000000000001")),
    ("1.0000000000005", Decimal("1.000000000001")),  # 13 decimals: rounded half up
    (" 2.5", Decimal("2.500000000000")),  # Decimal reads surrounding spaces
    ("1.", Decimal("1.000000000000")),
    ("1e-3", Decimal("0.001000000000")),
    ("0.0000000000005", Decimal("0.000000000001")),  # half the step: rounded up
]
REFUSED = [
    ("1000000", "expected an amount below 1,000,000 USD, got '1000000'"),
    ("-0.5", "expected a finite amount >= 0, got '-0.5'"),
    ("0.0000000000001", "a known cost of 0.0000000000001 USD would be stored as 0"),
    ("NaN", "expected a finite amount >= 0, got 'NaN'"),
    ("1,5", "expected a decimal number of USD, got '1,5'"),
    ("\u0661", None),  # an Arabic-Indic digit: not the fast path's [0-9]
]


@pytest.mark.parametrize("text,amount", COSTS)
def test_a_cost_reads_as_the_full_rules_read_it(text, amount, monkeypatch):
    got = trial_row._decimal(Row("line 1", {"cost_usd": text}, {}, is_csv=False), "cost_usd")
    assert got == amount and str(got) == str(amount)
    monkeypatch.setattr(trial_row, "_PLAIN_COST", trial_row.re.compile("(?!)"))  # rules only
    slow = trial_row._decimal(Row("line 1", {"cost_usd": text}, {}, is_csv=False), "cost_usd")
    assert str(slow) == str(got)


@pytest.mark.parametrize("text,message", REFUSED)
def test_a_cost_the_rules_refuse_is_refused_with_their_message(text, message):
    row = Row("line 1", {"cost_usd": text}, {}, is_csv=False)
    if message is None:  # read by Decimal as 1: the full rules, as before
        assert trial_row._decimal(row, "cost_usd") == Decimal(1)
        return
    with pytest.raises(DomainError) as exc:
        trial_row._decimal(row, "cost_usd")
    assert exc.value.field == "cost_usd"
    assert str(exc.value).startswith(f"line 1: field cost_usd: {message}")


@pytest.mark.parametrize("name", ["judge_status", "reason", "grader", "output", "model"])
def test_an_optional_string_field_keeps_its_rules(name):
    base = {"case_id": "c1", "input": "q", "passed": True}
    with pytest.raises(DomainError) as exc:
        _spec({**base, name: 5}, None)
    assert str(exc.value) == f"line 1: field {name}: expected a string, got 5"
    empty = _spec({**base, name: ""}, None)
    assert (empty.output, empty.model, empty.grades[0].grader) == ("", "", "imported")
    assert (empty.grades[0].status, empty.grades[0].reason) == ("ok", "imported verdict: pass")
    given = _spec({**base, name: "ok"}, None)
    got = {
        "judge_status": given.grades[0].status,
        "reason": given.grades[0].reason,
        "grader": given.grades[0].grader,
        "output": given.output,
        "model": given.model,
    }
    assert got[name] == "ok"
