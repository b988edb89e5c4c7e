"""The contract grader: every development fixture's exact decision, failures and coverage;
strict parsing; the oracle's exact comparison; config errors; a broken contract errors."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from core.errors import DomainError
from demo.expense_contract import CONTRACT, CONTRACT_GRADERS, CORRECT_CASES, FIXTURES
from evals.grading.grader_config import parse_grader_specs
from evals.grading.graders import run_grader

ALL = {"above": True, "at": True, "below": True, "missing_receipt": True}
REVIEW_DIMS = [
    "description_assertion_consistency",
    "unsupported_narrative_claims",
    "reviewer_clarity",
]
REVIEW_REASON = "review: every deterministic check passed; open: " + ", ".join(REVIEW_DIMS)

# fixture -> (decision, [(rule, item)], coverage covered flags or None when not parsed, reason)
EXPECTED = {
    "correct": ("review", [], ALL, REVIEW_REASON),
    "boundary_error": (
        "reject",
        [("wrong_approval", "T-750"), ("missing_coverage", "at")],
        {**ALL, "at": False},
        "reject: wrong_approval at T-750; at category not covered",
    ),
    "wrong_receipt": (
        "reject",
        [("wrong_receipt", "T-NR"), ("missing_coverage", "missing_receipt")],
        {**ALL, "missing_receipt": False},
        "reject: wrong_receipt at T-NR; missing_receipt category not covered",
    ),
    "duplicate_id": ("reject", [("duplicate_id", "T-600")], ALL, "reject: duplicate_id at T-600"),
    "stale_version": (
        "reject",
        [("stale_version", None)],
        ALL,
        'reject: stale_version: output for "expense-v1", current "expense-v2"',
    ),
    "unknown_source": (
        "reject",
        [("unknown_source", "T-751")],
        ALL,
        "reject: unknown_source at T-751",
    ),
    "repeated_cases": (
        "reject",
        [
            ("missing_coverage", "above"),
            ("missing_coverage", "at"),
            ("missing_coverage", "missing_receipt"),
        ],
        {"above": False, "at": False, "below": True, "missing_receipt": False},
        "reject: above, at, missing_receipt categories not covered",
    ),
    "contradictory_description": ("review", [], ALL, REVIEW_REASON),
    "invented_requirement": ("review", [], ALL, REVIEW_REASON),
    "reordered": ("review", [], ALL, REVIEW_REASON),
    "malformed_json": (
        "reject",
        [("invalid_json", None)],
        None,
        None,  # the JSON decoder's message: checked by prefix below
    ),
    "string_false": (
        "reject",
        [("schema", "T-NR")],
        None,
        "reject: schema at T-NR, field hasReceipt: 'false' is not of type 'boolean'",
    ),
}


def contract_grade(output: str, config: dict | None = None):
    graders = CONTRACT_GRADERS
    if config is not None:
        graders = [{"key": "contract", "kind": "contract", "config": config}]
    (spec,) = parse_grader_specs(graders)
    return run_grader(spec, case=None, output=output)


def test_every_fixture_has_an_expectation():
    assert set(EXPECTED) == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_gets_its_exact_decision_failures_and_coverage(name):
    decision, failures, coverage, reason = EXPECTED[name]
    grade = contract_grade(FIXTURES[name])
    assert grade.status == "ok"
    assert grade.details["decision"] == decision
    assert grade.passed is (decision == "review")
    assert [(f["rule"], f["item"]) for f in grade.details["failures"]] == failures
    if coverage is None:
        assert grade.details["coverage"] == {}
        assert grade.details["parsed"] is False
    else:
        assert {k: v["covered"] for k, v in grade.details["coverage"].items()} == coverage
    if reason is None:
        assert grade.reason.startswith("reject: invalid_json: ")
    else:
        assert grade.reason == reason
    assert grade.details["review"] == (REVIEW_DIMS if decision == "review" else [])


def test_a_wrong_boundary_item_is_listed_in_its_category_but_does_not_cover_it():
    coverage = contract_grade(FIXTURES["boundary_error"]).details["coverage"]
    assert coverage["at"] == {
        "items": ["T-750"],
        "confirmed": [],
        "covered": False,
        "required": True,
    }


def test_failures_carry_the_item_categories_and_the_exact_values():
    (wrong, _) = contract_grade(FIXTURES["boundary_error"]).details["failures"]
    assert wrong == {
        "rule": "wrong_approval",
        "item": "T-750",
        "message": "wrong_approval at T-750: approvalRequired is true, the oracle expects false",
        "categories": ["at"],
        "kind": "outcome",
    }


def test_every_check_of_a_parsed_payload_is_reported_together():
    cases = copy.deepcopy(CORRECT_CASES)
    cases[1]["approvalRequired"] = True
    cases[2]["sourceIds"] = ["made-up#1"]
    cases.append(dict(cases[0]))
    grade = contract_grade(json.dumps({"sourceVersion": "expense-v1", "cases": cases}))
    assert [(f["rule"], f["item"]) for f in grade.details["failures"]] == [
        ("stale_version", None),
        ("wrong_approval", "T-750"),
        ("unknown_source", "T-751"),
        ("duplicate_id", "T-600"),
        ("missing_coverage", "at"),
    ]
    assert grade.reason == (
        'reject: stale_version: output for "expense-v1", current "expense-v2"; '
        "wrong_approval at T-750; unknown_source at T-751; duplicate_id at T-600; "
        "at category not covered"
    )


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("amountCents", 75000.0, "T-750, field amountCents"),  # integer cents, not a float
        ("amountCents", "75000", "T-750, field amountCents"),
        ("approvalRequired", 0, "T-750, field approvalRequired"),  # 0 is not false
        ("approvalRequired", "false", "T-750, field approvalRequired"),
        ("extra", 1, "T-750"),  # no extra properties
    ],
)
def test_the_schema_is_strict_and_coerces_nothing(field, value, where):
    cases = copy.deepcopy(CORRECT_CASES)
    cases[1][field] = value
    grade = contract_grade(json.dumps({"sourceVersion": "expense-v2", "cases": cases}))
    assert grade.details["decision"] == "reject"
    assert [(f["rule"], f["item"]) for f in grade.details["failures"]] == [("schema", "T-750")]
    assert grade.reason.startswith(f"reject: schema at {where}: ")


def test_more_items_than_the_schema_allows_reject():
    cases = [{**CORRECT_CASES[0], "id": f"T-{n}"} for n in range(21)]
    grade = contract_grade(json.dumps({"sourceVersion": "expense-v2", "cases": cases}))
    assert grade.reason.startswith("reject: schema at $.cases: ")


@pytest.mark.parametrize(
    "text",
    [
        '{"sourceVersion": "expense-v2", "sourceVersion": "expense-v2", "cases": []}',
        '{"sourceVersion": "expense-v2", "cases": [{"amountCents": NaN}]}',
        "```json\n" + FIXTURES["correct"] + "\n```",
        FIXTURES["correct"] + " trailing",
    ],
)
def test_anything_but_one_strict_json_document_is_invalid_json(text):
    grade = contract_grade(text)
    assert [(f["rule"], f["item"]) for f in grade.details["failures"]] == [("invalid_json", None)]


def test_the_boundary_is_exact_in_integer_cents():
    cents = {74999: False, 75000: False, 75001: True}
    for amount, approval in cents.items():
        case = {**CORRECT_CASES[0], "amountCents": amount, "approvalRequired": not approval}
        grade = contract_grade(
            json.dumps({"sourceVersion": "expense-v2", "cases": [case, *CORRECT_CASES[1:]]})
        )
        assert ("wrong_approval", "T-600") in [
            (f["rule"], f["item"]) for f in grade.details["failures"]
        ]


def test_an_expression_oracle_and_partial_required_coverage():
    config = copy.deepcopy(CONTRACT)
    config["oracle"] = {
        "expressions": {
            "approvalRequired": "amountCents > 75000",
            "receiptRequired": "!hasReceipt",
        }
    }
    config["required_coverage"] = ["below"]
    grade = contract_grade(FIXTURES["repeated_cases"], config)
    assert grade.details["decision"] == "review"
    grade = contract_grade(FIXTURES["boundary_error"], config)
    assert grade.reason == "reject: wrong_approvalRequired at T-750"


def test_a_missing_source_version_rejects_naming_both():
    data = json.loads(FIXTURES["correct"])
    config = copy.deepcopy(CONTRACT)
    config["source_version"] = {"field": "meta.version", "current": "expense-v2"}
    grade = contract_grade(json.dumps(data), config)
    assert grade.reason == 'reject: stale_version: output for missing, current "expense-v2"'


def test_a_broken_oracle_is_an_errored_grade_never_a_reject_or_a_pass():
    config = copy.deepcopy(CONTRACT)
    config["oracle"]["function"] = "tests.grader_oracles:item_oracle_none"
    grade = contract_grade(FIXTURES["correct"], config)
    assert grade.status == "error"
    assert grade.passed is None
    assert "returned NoneType" in grade.reason


def test_a_predicate_that_is_not_boolean_is_an_errored_grade():
    config = copy.deepcopy(CONTRACT)
    config["coverage"]["below"] = "amountCents + 1"
    grade = contract_grade(FIXTURES["correct"], config)
    assert grade.status == "error"
    assert "not a boolean" in grade.reason


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c.pop("oracle"), "graders[0].config.oracle"),
        (lambda c: c.update(extra=1), "graders[0].config.extra"),
        (lambda c: c["coverage"].update(bad="amountCents <"), "graders[0].config.coverage.bad"),
        (lambda c: c["coverage"].update(bad=3), "graders[0].config.coverage.bad"),
        (
            lambda c: c.update(required_coverage=["nowhere"]),
            "graders[0].config.required_coverage[0]",
        ),
        (
            lambda c: c["oracle"].update(function="nowhere.module:f"),
            "graders[0].config.oracle.function",
        ),
        (
            lambda c: c["oracle"].update(expressions={"a": "true"}),
            "graders[0].config.oracle",
        ),
        (lambda c: c.update(schema={"type": 3}), "graders[0].config.schema"),
        (
            lambda c: c.update(provenance={"field": "sourceIds", "allowed": []}),
            "graders[0].config.provenance.allowed",
        ),
        (
            lambda c: c.update(source_version={"field": "v"}),
            "graders[0].config.source_version",
        ),
        (lambda c: c.update(review=["a", "a"]), "graders[0].config.review"),
    ],
)
def test_config_errors_name_the_option(change, field):
    config = copy.deepcopy(CONTRACT)
    change(config)
    with pytest.raises(DomainError) as caught:
        parse_grader_specs([{"key": "contract", "kind": "contract", "config": config}])
    assert caught.value.field == field


def test_loading_the_contract_grader_leaves_the_recursion_limit_alone():
    code = (
        "import sys; before = sys.getrecursionlimit(); "
        "import evals.grading.contract.config; print(before, sys.getrecursionlimit())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == out[1]


def test_a_long_predicate_is_a_config_error_and_a_deep_one_never_crashes_grading():
    config = copy.deepcopy(CONTRACT)
    config["coverage"]["below"] = "true || " * 300 + "true"
    with pytest.raises(DomainError) as caught:
        parse_grader_specs([{"key": "contract", "kind": "contract", "config": config}])
    assert caught.value.field == "graders[0].config.coverage.below"
    assert caught.value.message == "at most 2000 characters, got 2404"
    config["coverage"]["below"] = "(" * 990 + "amountCents < 75000" + ")" * 990
    grade = contract_grade(FIXTURES["correct"], config)
    assert grade.status in ("ok", "error")  # a verdict or an errored grade, never a crash


def test_an_oracle_that_exits_is_an_errored_grade_not_an_exit():
    config = copy.deepcopy(CONTRACT)
    config["oracle"]["function"] = "tests.grader_oracles:exits"
    grade = contract_grade(FIXTURES["correct"], config)
    assert grade.status == "error"
    assert "SystemExit" in grade.reason


def test_an_id_used_four_times_is_one_duplicate_failure():
    cases = [copy.deepcopy(CORRECT_CASES[0]) for _ in range(4)]
    grade = contract_grade(json.dumps({"sourceVersion": "expense-v2", "cases": cases}))
    assert [(f["rule"], f["item"]) for f in grade.details["failures"]] == [
        ("duplicate_id", "T-600"),
        ("missing_coverage", "above"),
        ("missing_coverage", "at"),
        ("missing_coverage", "missing_receipt"),
    ]
    assert grade.details["coverage"]["below"]["items"] == ["T-600"] * 4
