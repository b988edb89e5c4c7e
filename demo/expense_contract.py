"""The demo's contract suite: an LLM writing test cases for an expense policy, graded by a
``contract`` grader (docs/contracts.md).

Policy expense-v2: above EUR 750.00 (75000 cents, strictly) ``approvalRequired``;
``receiptRequired`` exactly when ``hasReceipt`` is false. The generator answers::

    {"sourceVersion": "expense-v2",
     "cases": [{"id": "T-750", "amountCents": 75000, "hasReceipt": true,
                "approvalRequired": false, "receiptRequired": false,
                "sourceIds": ["expense-v2#approval"], "description": "..."}]}

``FIXTURES``: a correct suite and each kind of mistake, answered by the simulated generator."""

from __future__ import annotations

import json
from typing import Any

from core.registry import registered

THRESHOLD_CENTS = 75000
SOURCE_VERSION = "expense-v2"
SOURCE_IDS = ("expense-v2#approval", "expense-v2#receipts")
REVIEW_DIMENSIONS = (
    "description_assertion_consistency",
    "unsupported_narrative_claims",
    "reviewer_clarity",
)


@registered("oracle")
def expected_outcome(item: dict[str, Any]) -> dict[str, bool]:
    """The oracle: what expense-v2 requires for a case's inputs, whatever it claims:
    ``{"approvalRequired": amountCents > 75000, "receiptRequired": not hasReceipt}``."""
    return {
        "approvalRequired": item["amountCents"] > THRESHOLD_CENTS,
        "receiptRequired": not item["hasReceipt"],
    }


_ITEM_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "id",
        "amountCents",
        "hasReceipt",
        "approvalRequired",
        "receiptRequired",
        "sourceIds",
        "description",
    ],
    "properties": {
        "id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$"},
        "amountCents": {"type": "integer", "minimum": 0, "maximum": 100_000_000},
        "hasReceipt": {"type": "boolean"},
        "approvalRequired": {"type": "boolean"},
        "receiptRequired": {"type": "boolean"},
        "sourceIds": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "uniqueItems": True,
            "items": {"type": "string", "minLength": 1},
        },
        "description": {"type": "string", "minLength": 1, "maxLength": 500},
    },
}

OUTPUT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sourceVersion", "cases"],
    "properties": {
        "sourceVersion": {"type": "string", "minLength": 1},
        "cases": {"type": "array", "minItems": 1, "maxItems": 20, "items": _ITEM_SCHEMA},
    },
}

CONTRACT = {
    "schema": OUTPUT_SCHEMA,
    "items": "cases",
    "id_field": "id",
    "oracle": {
        "function": "demo.expense_contract:expected_outcome",
        "rules": {"approvalRequired": "wrong_approval", "receiptRequired": "wrong_receipt"},
    },
    "coverage": {
        "below": f"amountCents < {THRESHOLD_CENTS}",
        "at": f"amountCents == {THRESHOLD_CENTS}",
        "above": f"amountCents > {THRESHOLD_CENTS}",
        "missing_receipt": "!hasReceipt",
    },
    "provenance": {"field": "sourceIds", "allowed": list(SOURCE_IDS)},
    "source_version": {"field": "sourceVersion", "current": SOURCE_VERSION},
    "review": list(REVIEW_DIMENSIONS),
}

CONTRACT_GRADERS = [{"key": "contract", "kind": "contract", "config": CONTRACT}]


def _case(
    id_: str, cents: int, receipt: bool, description: str, *, sources=None, **overrides
) -> dict[str, Any]:
    item = {
        "id": id_,
        "amountCents": cents,
        "hasReceipt": receipt,
        **expected_outcome({"amountCents": cents, "hasReceipt": receipt}),
        "sourceIds": list(sources or [SOURCE_IDS[0] if receipt else SOURCE_IDS[1]]),
        "description": description,
    }
    item.update(overrides)
    return item


def _suite(cases: list[dict], version: str = SOURCE_VERSION) -> str:
    return json.dumps({"sourceVersion": version, "cases": cases})


_BELOW = _case("T-600", 60000, True, "EUR 600.00 with a receipt: no approval needed.")
_AT = _case("T-750", 75000, True, "Exactly EUR 750.00 with a receipt: no approval needed.")
_ABOVE = _case("T-751", 75001, True, "EUR 750.01 with a receipt: manager approval needed.")
_NO_RECEIPT = _case(
    "T-NR", 12000, False, "EUR 120.00 without a receipt: the receipt must be requested."
)
CORRECT_CASES = [_BELOW, _AT, _ABOVE, _NO_RECEIPT]

FIXTURES: dict[str, str] = {
    "correct": _suite(CORRECT_CASES),
    "boundary_error": _suite([_BELOW, {**_AT, "approvalRequired": True}, _ABOVE, _NO_RECEIPT]),
    "wrong_receipt": _suite([_BELOW, _AT, _ABOVE, {**_NO_RECEIPT, "receiptRequired": False}]),
    "duplicate_id": _suite(
        [*CORRECT_CASES, _case("T-600", 30000, True, "EUR 300.00 with a receipt: no approval.")]
    ),
    "stale_version": _suite(CORRECT_CASES, version="expense-v1"),
    "unknown_source": _suite(
        [_BELOW, _AT, {**_ABOVE, "sourceIds": ["expense-v1#approval"]}, _NO_RECEIPT]
    ),
    "repeated_cases": _suite(
        [{**_BELOW, "id": f"T-600-{n}"} for n in range(1, 5)],
    ),
    "contradictory_description": _suite(
        [
            {**_BELOW, "description": "A EUR 600 expense must receive manager approval."},
            _AT,
            _ABOVE,
            _NO_RECEIPT,
        ]
    ),
    "invented_requirement": _suite(
        [
            _BELOW,
            _AT,
            {
                **_ABOVE,
                "description": "EUR 750.01 with a receipt: manager approval and a second "
                "sign-off by the finance director are needed (expense-v2#approval).",
            },
            _NO_RECEIPT,
        ]
    ),
    "reordered": _suite([_NO_RECEIPT, _ABOVE, _BELOW, _AT]),
    "malformed_json": _suite(CORRECT_CASES)[:-2],
    "string_false": _suite([_BELOW, _AT, _ABOVE, {**_NO_RECEIPT, "hasReceipt": "false"}]),
}

PROMPT = (
    "Write test cases for expense policy $input as JSON "
    '{"sourceVersion": ..., "cases": [{"id", "amountCents", "hasReceipt", '
    '"approvalRequired", "receiptRequired", "sourceIds", "description"}]}. '
    "Cover amounts below, exactly at and above the EUR 750.00 threshold, and a missing "
    f"receipt. Cite only {', '.join(SOURCE_IDS)}."
)

SUITE = {
    "name": "expense-policy-test-writer",
    "kind": "capability",
    "description": "An LLM writes test cases for the expense policy; graded by a contract.",
    "cases": [
        {
            "key": "expense-v2-suite",
            "input": SOURCE_VERSION,
            # The simulated generator's right answer (its "pass" output).
            "expected": json.loads(FIXTURES["correct"]),
            "tags": ["contract"],
        }
    ],
}


def contract_target(seed: int) -> dict:
    """The simulated generator: the correct suite with probability 0.5, else another fixture."""
    return {
        "kind": "simulated",
        "model": "simulated",
        "seed": seed,
        "prompt_template": PROMPT,
        "prompt_revision": "contract-1",
        "default_pass_probability": 0.5,
        "wrong_outputs": {
            "expense-v2-suite": [text for name, text in FIXTURES.items() if name != "correct"]
        },
        "error_probability": 0.0,
        "latency_ms": [400, 2500],
    }
