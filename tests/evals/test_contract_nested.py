"""Nested expectations are checked leaf by leaf, each named by its path; a rule naming a
field the oracle never produces is refused when the contract is declared."""

from __future__ import annotations

import copy
import json

import pytest

from core.errors import DomainError
from demo.expense_contract import CONTRACT, CORRECT_CASES
from evals.grading.contract.check import contract_check
from evals.grading.contract.config import contract_parse
from evals.grading.grader_config import parse_grader_specs
from evals.grading.recorded import run_grade
from evals.models import Grade
from tests.evals.test_grade_run import recorded_run

NESTED_ITEM = {
    "type": "object",
    "required": ["id", "amountCents", "hasReceipt", "expected"],
    "properties": {
        "id": {"type": "string"},
        "amountCents": {"type": "integer"},
        "hasReceipt": {"type": "boolean"},
        "expected": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "approvalRequired": {"type": "boolean"},
                "receiptRequired": {"type": "boolean"},
            },
        },
    },
}
NESTED = {
    "schema": {
        "type": "object",
        "properties": {"cases": {"type": "array", "items": NESTED_ITEM}},
    },
    "items": "cases",
    "id_field": "id",
    "oracle": {
        "expressions": {
            "expected": "{'approvalRequired': amountCents > 75000, 'receiptRequired': !hasReceipt}"
        },
        "rules": {
            "expected.approvalRequired": "wrong_approval",
            "expected.receiptRequired": "wrong_receipt",
        },
    },
}


def _nested_output(*cases: tuple[str, int, bool, bool, bool]) -> str:
    return json.dumps(
        {
            "cases": [
                {
                    "id": key,
                    "amountCents": cents,
                    "hasReceipt": receipt,
                    "expected": {"approvalRequired": approval, "receiptRequired": ask},
                }
                for key, cents, receipt, approval, ask in cases
            ]
        }
    )


def test_a_case_with_both_nested_fields_wrong_gets_two_failures_naming_their_paths():
    contract = contract_parse(NESTED)
    outcome = contract_check(
        contract,
        _nested_output(("T-OK", 60000, True, False, False), ("T-BAD", 80000, False, False, False)),
    )
    assert [(f.rule, f.item) for f in outcome.failures] == [
        ("wrong_approval", "T-BAD"),
        ("wrong_receipt", "T-BAD"),
    ]
    assert outcome.failures[0].message == (
        "wrong_approval at T-BAD: expected.approvalRequired is false, the oracle expects true"
    )
    assert "expected.receiptRequired is false" in outcome.failures[1].message


def test_a_nested_field_without_a_rule_is_named_by_its_path():
    config = copy.deepcopy(NESTED)
    del config["oracle"]["rules"]
    outcome = contract_check(
        contract_parse(config), _nested_output(("T-NR", 1000, False, False, False))
    )
    assert [(f.rule, f.item) for f in outcome.failures] == [
        ("wrong_expected_receiptRequired", "T-NR")
    ]


@pytest.mark.parametrize(
    ("config", "rule_path", "hint"),
    [
        (NESTED, "expcted.approvalRequired", "did you mean 'expected.approvalRequired'?"),
        (CONTRACT, "approvalRequierd", "did you mean 'approvalRequired'?"),
    ],
)
def test_a_rule_for_a_field_the_oracle_never_produces_is_refused(config, rule_path, hint):
    config = copy.deepcopy(config)
    config["oracle"]["rules"][rule_path] = "wrong_typo"
    with pytest.raises(DomainError) as caught:
        parse_grader_specs([{"key": "contract", "kind": "contract", "config": config}])
    assert caught.value.field == f"graders[0].config.oracle.rules.{rule_path}"
    assert "'wrong_typo'" in str(caught.value)
    assert hint in str(caught.value)


def test_the_flat_reference_contract_still_checks_each_field():
    cases = copy.deepcopy(CORRECT_CASES)
    cases[1]["approvalRequired"] = True  # T-750
    outcome = contract_check(
        contract_parse(CONTRACT), json.dumps({"sourceVersion": "expense-v2", "cases": cases})
    )
    assert ("wrong_approval", "T-750") in [(f.rule, f.item) for f in outcome.failures]


def test_grade_run_refuses_the_typo_before_grading_anything(db, carol):
    run = recorded_run()
    config = copy.deepcopy(NESTED)
    config["oracle"]["rules"] = {"expcted.approvalRequired": "wrong_approval"}
    with pytest.raises(DomainError) as caught:
        run_grade(run=run, graders=[{"key": "nested", "kind": "contract", "config": config}])
    assert caught.value.field == "graders[0].config.oracle.rules.expcted.approvalRequired"
    assert not Grade.objects.filter(trial__run=run, grader="nested").exists()
