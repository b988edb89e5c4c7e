"""CSV/JSONL with a column mapping: faults C1, C2, I1, J1, J2, M1, strict booleans."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial
from tests.import_helpers import import_bytes

pytestmark = pytest.mark.django_db

CSV_MAP = {"case_id": "case_id", "input": "input", "expected": "expected"}


def _csv(data: bytes, **kwargs):
    return import_bytes(data, filename="results.csv", **kwargs)


def _jsonl(text: str, **kwargs):
    return import_bytes(text.encode(), filename="results.jsonl", fmt="jsonl", **kwargs)


def _rows():
    return list(Case.objects.order_by("key").values_list("key", "input", "expected", "tags"))


def test_it_reads_a_csv_with_a_bom_and_crlf_like_the_plain_file():
    _csv(
        b'\xef\xbb\xbfcase_id,input,expected\r\nc1,"What is 2+2?",4\r\n',
        mapping=CSV_MAP,
        suite="bom",
    )
    with_bom = _rows()
    assert with_bom == [("c1", "What is 2+2?", "4", [])]
    Trial.objects.all().delete()
    Case.objects.all().delete()
    _csv(b'case_id,input,expected\nc1,"What is 2+2?",4\n', mapping=CSV_MAP, suite="plain")
    assert _rows() == with_bom
    run = Run.objects.get(suite__name="bom")
    assert "\ufeff" not in str(run.target["mapping"])


def test_it_keeps_newlines_quotes_and_commas_in_quoted_fields():
    data = (
        b'case_id,input,expected\r\nc1,"line 1\r\nand line 2\nline 3",'
        b'"He said ""hi"", then left"\r\nc2,plain,"a,b"\r\n'
    )
    _csv(data, mapping=CSV_MAP)
    assert Case.objects.count() == 2
    assert _rows() == [
        ("c1", "line 1\nand line 2\nline 3", 'He said "hi", then left', []),
        ("c2", "plain", "a,b", []),
    ]


def test_it_rejects_a_hostile_created_at_with_its_row_number_and_stores_nothing():
    data = (
        b'case_id,input,created_at\nc1,ok,2025-02-24T16:30:00Z\nc2,ok,"""><svg onload=alert(3)>"\n'
    )
    with pytest.raises(DomainError) as exc:
        _csv(data, mapping={"case_id": "case_id", "input": "input", "created_at": "created_at"})
    assert str(exc.value).startswith("row 2 (line 3): field created_at: expected an ISO 8601")
    assert "<svg onload=alert(3)>" in str(exc.value)
    assert Suite.objects.count() == Case.objects.count() == Trial.objects.count() == 0


def test_it_reads_created_at_with_offset_z_or_none_as_utc():
    text = (
        '{"case_id":"c1","input":"q","created_at":"2025-02-24 15:30:00"}\n'
        '{"case_id":"c2","input":"q","created_at":"2025-02-24T23:30:00+08:00"}\n'
        '{"case_id":"c3","input":"q","created_at":"2025-02-24T16:30:00Z"}\n'
    )
    _jsonl(text)
    got = dict(Trial.objects.values_list("case__key", "created_at"))
    assert got["c1"] == datetime(2025, 2, 24, 15, 30, tzinfo=UTC)
    assert got["c2"] == datetime(2025, 2, 24, 15, 30, tzinfo=UTC)
    assert got["c3"] == datetime(2025, 2, 24, 16, 30, tzinfo=UTC)
    assert all(v.utcoffset().total_seconds() == 0 for v in got.values())


C1_ROWS = [
    ('{"case_id":"c1","score":0.9}', 0.9),
    ('{"case_id":"c2","score":0.6}', 0.6),
    (None, None),
    ('{"case_id":"c4","score":0.75}', 0.75),
    ('{"case_id":"c5","score":1.0}', 1.0),
]


@pytest.mark.parametrize(
    "c3",
    [
        '{"case_id":"c3","score":"NaN"}',
        '{"case_id":"c3","score":NaN}',
        '{"case_id":"c3","score":Infinity}',
        '{"case_id":"c3","score":null}',
    ],
)
def test_it_stores_a_non_finite_score_as_not_scored_never_zero(c3):
    lines = [row or c3 for row, _ in C1_ROWS]
    text = "\n".join(line.replace('"case_id":"c', '"input":"q","case_id":"c') for line in lines)
    _jsonl(text, threshold=0.7)
    grades = Grade.objects.filter(grader="imported")
    c3_grade = grades.get(trial__case__key="c3")
    assert (c3_grade.status, c3_grade.passed, c3_grade.score) == ("error", None, None)
    assert c3_grade.reason == "not scored"
    scored = grades.filter(status="ok")
    scores = sorted(scored.values_list("score", flat=True))
    assert scores == [0.6, 0.75, 0.9, 1.0]
    assert sum(scores) / len(scores) == 0.8125
    assert scored.filter(passed=True).count() == 3 and scored.count() == 4


def test_it_maps_a_scores_object_to_one_grade_per_grader_with_nulls_not_scored():
    text = (
        '{"case_id":"c1","input":"q","scores":{"faithfulness":0.8,"relevance":0.8}}\n'
        '{"case_id":"c2","input":"q","scores":{"faithfulness":null,"relevance":null},'
        '"judge_status":"unparseable"}\n'
    )
    _jsonl(text, threshold=0.5)
    c1 = dict(Grade.objects.filter(trial__case__key="c1").values_list("grader", "score"))
    assert c1 == {"faithfulness": 0.8, "relevance": 0.8}
    c2 = Grade.objects.filter(trial__case__key="c2")
    assert c2.count() == 2
    assert all(g.status == "error" and g.passed is None and g.score is None for g in c2)
    assert {g.reason for g in c2} == {"not scored"}
    assert {g.details["judge_status"] for g in c2} == {"unparseable"}
    assert Grade.objects.filter(score=0).count() == 0


def test_it_requires_a_threshold_for_a_score_without_a_verdict():
    with pytest.raises(DomainError, match="^line 1: field score: .*threshold"):
        _jsonl('{"case_id":"c1","input":"q","score":0.5}')


@pytest.mark.parametrize("value", ["1", "yes", "True", "TRUE", "0"])
def test_it_accepts_only_true_or_false_in_a_csv_passed_column(value):
    with pytest.raises(DomainError) as exc:
        _csv(f"case_id,input,passed\nc1,q,true\nc2,q,{value}\n".encode())
    assert str(exc.value) == f"row 2 (line 3): field passed: expected true or false, got '{value}'"
    assert Trial.objects.count() == 0


def test_it_accepts_only_json_booleans_in_a_jsonl_passed_field():
    with pytest.raises(DomainError, match="^line 1: field passed: expected true or false"):
        _jsonl('{"case_id":"c1","input":"q","passed":"false"}')


def test_it_stores_trial_fields_and_keeps_unmapped_columns():
    data = (
        b"id,question,answer,ok,try,in,out,ms,usd,why,note\n"
        b"c1,q,a,true,2,10,5,12.5,0.0012,exact,hello\n"
        b"c1,q,b,false,1,,,,,,\n"
    )
    mapping = {
        "case_id": "id",
        "input": "question",
        "output": "answer",
        "passed": "ok",
        "attempt": "try",
        "input_tokens": "in",
        "output_tokens": "out",
        "latency_ms": "ms",
        "cost_usd": "usd",
        "reason": "why",
    }
    summary = _csv(data, mapping=mapping)
    assert (summary.cases, summary.trials, summary.grades) == (1, 2, 2)
    t2 = Trial.objects.get(attempt=2)
    assert (t2.output, t2.input_tokens, t2.output_tokens, t2.latency_ms) == ("a", 10, 5, 12.5)
    assert t2.cost_usd == Decimal("0.0012")
    assert t2.raw_response["extra"] == {"note": "hello"}
    t1 = Trial.objects.get(attempt=1)
    assert t1.cost_usd is None and t1.input_tokens is None
    assert Grade.objects.get(trial=t2).reason == "exact"
    assert Grade.objects.get(trial=t1).passed is False
    assert Run.objects.get().trials_per_case == 2


def test_it_rejects_a_duplicate_case_and_attempt_naming_both_rows():
    with pytest.raises(DomainError) as exc:
        _csv(b"case_id,input\nc1,q\nc1,q\n")
    assert str(exc.value) == (
        "row 2 (line 3): field attempt: case 'c1' attempt 1 already given on row 1 (line 2)"
    )


def test_it_rejects_a_mapping_to_a_missing_column():
    with pytest.raises(DomainError, match="mapping input=prompt: column not in the CSV"):
        _csv(b"case_id,input\nc1,q\n", mapping={"case_id": "case_id", "input": "prompt"})
    assert Suite.objects.count() == 0


def test_it_reuses_existing_cases_when_no_input_is_mapped():
    _csv(b"case_id,input\nc1,q\n", run="first")
    _jsonl('{"case_id":"c1","passed":true}', run="second")
    assert Case.objects.count() == 1 and Trial.objects.count() == 2
    with pytest.raises(DomainError, match="case 'c9' is not in suite 's'"):
        _jsonl('{"case_id":"c9","passed":true}', run="third")


def test_it_rejects_a_score_out_of_the_unit_interval():
    message = r"^line 1: field score: expected a number in \[0, 1\], got 7"
    with pytest.raises(DomainError, match=message):
        _jsonl('{"case_id":"c1","input":"q","score":7,"passed":true}')


def test_a_csv_output_larger_than_the_csv_module_default_is_stored_whole():

    big = "x" * 300_000  # the csv module's default field limit is 131,072
    data = f'case_id,input,output\r\nc1,q,"{big}"\r\n'.encode()
    import_bytes(
        data,
        filename="big.csv",
        mapping={"case_id": "case_id", "input": "input", "output": "output"},
    )
    assert Trial.objects.get().output == big
