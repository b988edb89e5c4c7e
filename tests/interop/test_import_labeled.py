"""Labeled records: strict validation, what each record becomes, faults A1, B2, I1, J1."""

from __future__ import annotations

import io

import pytest

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial, TrialPair
from interop.importers import results_import
from interop.importers.reader import text_lines
from judges.models import Judge, JudgeVersion, PairwiseVerdict
from labeling.models import Label, PreferenceLabel
from tests.import_helpers import PAIR_TEMPLATE, TEMPLATE, import_bytes, jsonl, record

pytestmark = pytest.mark.django_db


def _judge(value, **kw):
    base = dict(TEMPLATE["judge_labels"][0])
    base.update(value=value, **kw)
    return base


def test_it_stores_a_pointwise_record_as_case_trial_label_and_grades():
    rec = record(
        id="r1",
        category="cat",
        tags=["t1"],
        input="What?",
        context=[{"doc_id": "D", "source_doc_key": "k", "text": "doc text"}],
        responses=[{"response_id": "R", "model": "m-1", "text": "answer"}],
        human_label={
            "type": "pass_fail",
            "value": "fail",
            "method": "expert",
            "details": {"critique": "misses the point"},
        },
        judge_labels=[_judge("pass", score=7, rationale="looks fine")],
    )
    summary = import_bytes(jsonl([rec]))
    case = Case.objects.get()
    assert (case.key, case.input, case.expected) == ("r1", "What?", None)
    assert case.context == [{"id": "D", "text": "doc text"}]
    assert case.tags == ["cat", "t1"]
    trial = Trial.objects.get()
    assert (trial.attempt, trial.status, trial.output) == (1, "ok", "answer")
    assert trial.raw_response["response"]["model"] == "m-1"
    assert trial.raw_response["model"] == "m-1"
    label = Label.objects.get()
    assert (label.verdict, label.source, label.reviewer_name) == ("fail", "import", "dataset gold")
    assert label.critique == "misses the point"
    assert label.details["human_label"]["method"] == "expert"
    human = Grade.objects.get(grader="human-label")
    assert (human.passed, human.gating, human.grader_version) == (False, True, "imported")
    assert human.reason == "human label (expert)"
    version = JudgeVersion.objects.get()
    assert version.judge.name == "j1 / p1" and version.judge.kind == Judge.Kind.RECORDED
    judge_grade = Grade.objects.get(judge_version=version)
    assert judge_grade.grader == version.grader_key
    assert (judge_grade.passed, judge_grade.gating, judge_grade.status) == (True, False, "ok")
    assert judge_grade.details["score"] == 7 and judge_grade.score is None
    run = Run.objects.get()
    assert (run.source, run.status, run.trials_total) == ("imported", "succeeded", 1)
    assert summary.as_json()["grades"] == 2


def test_it_stores_a_null_judge_value_as_an_errored_grade_reason_unparseable():
    recs = [
        record(id=f"c{i}", judge_labels=[_judge(v, rationale="raw reply")])
        for i, v in enumerate(["pass", "pass", None, "fail"])
    ]
    import_bytes(jsonl(recs))
    judge_grades = Grade.objects.exclude(grader="human-label")
    errored = judge_grades.get(status="error")
    assert errored.passed is None
    assert errored.reason == "unparseable"
    assert errored.details["rationale"] == "raw reply"
    assert judge_grades.filter(status="ok", passed=True).count() == 2
    assert judge_grades.filter(status="ok", passed=False).count() == 1


def test_it_reuses_one_judge_version_across_imports():
    import_bytes(jsonl([record(id="a")]), run="r1")
    import_bytes(jsonl([record(id="b")]), run="r2")
    assert JudgeVersion.objects.count() == 1
    assert Grade.objects.filter(judge_version__isnull=False).count() == 2


def test_it_stores_an_order_inconsistent_pairwise_judge_faithfully():
    summary = import_bytes(jsonl([record(PAIR_TEMPLATE)]), run="R")
    assert [r.name for r in summary.runs] == ["R / A", "R / B"]
    pair = TrialPair.objects.get()
    assert pair.trial_a.run.name == "R / A" and pair.trial_b.run.name == "R / B"
    assert pair.trial_a.output == pair.trial_b.output == "The capital of France is Paris."
    verdicts = dict(PairwiseVerdict.objects.filter(pair=pair).values_list("position", "preferred"))
    assert verdicts == {"original": "A", "swapped": "B"}
    assert PairwiseVerdict.objects.values("judge_version").distinct().count() == 1
    assert PreferenceLabel.objects.get().preferred == "A"


def test_it_stores_a_null_pairwise_judge_value_as_an_errored_verdict():
    rec = record(PAIR_TEMPLATE)
    rec["judge_labels"][1]["value"] = None
    import_bytes(jsonl([rec]))
    errored = PairwiseVerdict.objects.get(position="swapped")
    assert (errored.status, errored.preferred) == ("error", "")


HOSTILE = (
    '{"id":"<script>alert(2)</script>","dataset":"acceptance","split":"test",'
    '"task_type":"pointwise_binary","category":"xss","tags":["\\"><svg onload=alert(3)>"],'
    '"input":"ok","context":[],"responses":[{"response_id":"R","model":null,'
    '"text":"<img src=x onerror=alert(1)>"}],"human_label":{"type":"pass_fail","value":"fail",'
    '"method":"fixture","details":{}},"human_annotations":[],"judge_labels":[{"judge_model":"j1",'
    '"judge_type":"llm","protocol":"p1","position":null,"value":"fail","score":null,'
    '"rationale":"x\\" onmouseover=\\"alert(document.domain)"}],"source":{"repo":null,'
    '"commit":null,"path":null,"index":0,"original_id":null,"license":null}}\n'
)


def test_it_stores_the_hostile_record_literally():
    import_bytes(HOSTILE.encode(), run="<b onclick=alert(4)>R4</b>")
    case = Case.objects.get()
    assert case.key == "<script>alert(2)</script>"
    assert case.tags == ["xss", '"><svg onload=alert(3)>']
    assert Trial.objects.get().output == "<img src=x onerror=alert(1)>"
    assert Run.objects.get().name == "<b onclick=alert(4)>R4</b>"
    assert Grade.objects.get(judge_version__isnull=False).reason == (
        'x" onmouseover="alert(document.domain)'
    )


def test_it_strips_a_bom_from_a_labeled_file():
    import_bytes(b"\xef\xbb\xbf" + jsonl([record(id="first"), record(id="second")]))
    assert sorted(Case.objects.values_list("key", flat=True)) == ["first", "second"]
    assert not any("\ufeff" in str(v) for v in Case.objects.values_list("key", "input", "tags"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"human_label": {"type": "pass_fail", "value": "Pass", "method": "m", "details": {}}},
            "line 2: field human_label.value: expected 'pass' or 'fail', got 'Pass'",
        ),
        ({"tags": "a,b"}, "line 2: field tags: expected an array, got string"),
        ({"input": 1}, "line 2: field input: expected a string, got number 1"),
        ({"task_type": "pointwise"}, "line 2: field task_type: expected 'pointwise_binary' or"),
        (
            {"judge_labels": [_judge("false")]},
            "line 2: field judge_labels[0].value: expected 'pass' or 'fail' or null, got 'false'",
        ),
        (
            {"judge_labels": [_judge("pass", score="1")]},
            "line 2: field judge_labels[0].score: expected a number or null, got string '1'",
        ),
        (
            {"judge_labels": [_judge("pass", score=True)]},
            "line 2: field judge_labels[0].score: expected a number or null, got boolean",
        ),
        (
            {"responses": [{"response_id": "A", "model": None, "text": "x"}]},
            "line 2: field responses[0].response_id: expected 'R', got 'A'",
        ),
    ],
)
def test_it_rejects_a_wrong_type_with_line_and_field(change, message):
    with pytest.raises(DomainError) as exc:
        import_bytes(jsonl([record(id="ok"), record(id="bad", **change)]))
    assert str(exc.value).startswith(message)
    assert Case.objects.count() == 0 and Suite.objects.count() == 0


def test_it_aborts_the_whole_import_on_a_bad_record_on_line_3_of_5():
    recs = [record(id=f"c{i}") for i in range(5)]
    recs[2]["human_label"]["value"] = "maybe"
    with pytest.raises(DomainError, match="^line 3: field human_label.value"):
        import_bytes(jsonl(recs))
    assert Suite.objects.count() == 0
    assert Case.objects.count() == Trial.objects.count() == Label.objects.count() == 0
    assert Grade.objects.count() == Run.objects.count() == JudgeVersion.objects.count() == 0


def test_it_rejects_duplicate_ids_naming_both_lines():
    with pytest.raises(DomainError) as exc:
        import_bytes(jsonl([record(id="x"), record(id="y"), record(id="x")]))
    assert str(exc.value) == "line 3: field id: duplicate id 'x', first on line 1"
    assert Case.objects.count() == 0


def test_it_rejects_a_file_mixing_pointwise_and_pairwise_records():
    with pytest.raises(DomainError) as exc:
        import_bytes(jsonl([record(id="x"), record(PAIR_TEMPLATE, id="y")]))
    assert (
        "line 2: field task_type: 'pairwise_preference' differs from 'pointwise_binary' on "
        "line 1" in str(exc.value)
    )
    assert Trial.objects.count() == 0


def test_it_rejects_invalid_utf8_naming_line_and_byte_offset():
    data = jsonl([record(id="x")]) + b'{"id": "\xff"}\n'
    first_line_len = len(jsonl([record(id="x")]))
    with pytest.raises(DomainError) as exc:
        import_bytes(data, fmt="labeled")
    assert str(exc.value).startswith(f"line 2 (byte offset {first_line_len + 8}): invalid UTF-8")
    assert Suite.objects.count() == 0


def test_it_rejects_a_bare_nan_outside_a_score():
    data = jsonl([record(id="x")]).replace(b'"input": "q01"', b'"input": NaN')
    with pytest.raises(DomainError, match="^line 1: field input: expected a string"):
        import_bytes(data)


def test_it_reads_a_bare_nan_judge_score_as_no_score():
    data = jsonl([record(id="x")]).replace(b'"score": null', b'"score": NaN')
    import_bytes(data)
    grade = Grade.objects.get(judge_version__isnull=False)
    assert grade.details["score"] is None and grade.details["raw"]["score"] is None


def test_it_stores_a_one_megabyte_output_whole():
    text = ("0123456789abcdé\n" * 65536)[:1_048_576]
    import_bytes(
        jsonl([record(id="big", responses=[{"response_id": "R", "model": None, "text": text}])])
    )
    assert Trial.objects.get().output == text


def test_it_refuses_a_run_name_that_exists_in_the_suite():
    import_bytes(jsonl([record(id="a")]), run="r")
    with pytest.raises(DomainError, match="run name 'r' already exists in suite 's'"):
        import_bytes(jsonl([record(id="b")]), run="r")
    assert Case.objects.count() == 1


def test_it_reuses_an_unchanged_case_and_replaces_a_changed_one_on_reimport():
    import_bytes(jsonl([record(id="same"), record(id="moved", input="old")]), run="r1")
    old_same = Case.objects.get(key="same")
    old_moved = Case.objects.get(key="moved")
    import_bytes(jsonl([record(id="same"), record(id="moved", input="new")]), run="r2")
    assert Case.objects.active().get(key="same").id == old_same.id
    new_moved = Case.objects.active().get(key="moved")
    old_moved.refresh_from_db()
    assert new_moved.input == "new" and old_moved.retired_at is not None
    assert old_moved.replaced_by_id == new_moved.id


def test_the_reader_gives_identical_lines_for_crlf_lf_and_lone_cr():
    lf = [t for _, t in text_lines(io.BytesIO(b"a\nb\nc"))]
    crlf = [t for _, t in text_lines(io.BytesIO(b"\xef\xbb\xbfa\r\nb\r\nc"))]
    cr = [t for _, t in text_lines(io.BytesIO(b"a\rb\rc"))]
    assert lf == crlf == cr == ["a\n", "b\n", "c"]


def test_results_import_creates_a_suite_of_the_requested_kind():
    results_import(
        stream=io.BytesIO(jsonl([record(id="a")])),
        filename="x.jsonl",
        suite_name="cap",
        run_name="r",
        suite_kind="capability",
    )
    assert Suite.objects.get().kind == "capability"
