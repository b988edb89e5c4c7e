"""The demo suites: expense claims below, at and above the approval boundary, with and
without receipts. Expected answers come from the policy itself (``expected_decision``)."""

from __future__ import annotations

from demo.expense_policy import POLICY_ID, expected_decision

# (key, description, amount, has_receipt, tags)
REGRESSION_CLAIMS = [
    ("taxi-small", "Taxi from the airport to the client office", "42.80", True, ["routine"]),
    ("lunch-team", "Team lunch with four engineers", "186.00", True, ["routine", "meals"]),
    ("hotel-2n", "Hotel, two nights, Lyon", "348.00", True, ["routine", "travel"]),
    ("below-boundary", "Conference ticket", "499.99", True, ["boundary"]),
    ("at-boundary", "Laptop dock and monitor", "500.00", True, ["boundary"]),
    ("above-boundary", "Conference ticket, early bird expired", "500.01", True, ["boundary"]),
    ("flight-long", "Return flight Berlin to Boston", "1240.00", True, ["high-value", "travel"]),
    ("training", "Two-day training course", "890.00", True, ["high-value"]),
    (
        "no-receipt-small",
        "Coffee with a candidate, receipt lost",
        "7.50",
        False,
        ["receipt-missing"],
    ),
    (
        "no-receipt-boundary",
        "Monitor, receipt not attached",
        "500.00",
        False,
        ["receipt-missing", "boundary"],
    ),
    (
        "no-receipt-large",
        "Client dinner, receipt to follow",
        "640.00",
        False,
        ["receipt-missing", "high-value"],
    ),
    ("zero-amount", "Free event registration", "0.00", True, ["edge"]),
]

CAPABILITY_CLAIMS = [
    (
        "multi-currency",
        "Hotel in London, GBP 420 converted at 1.19",
        "499.80",
        True,
        ["conversion", "boundary"],
    ),
    ("split-bill", "Dinner for two, my half of 1,002.00", "501.00", True, ["arithmetic"]),
    ("per-diem", "Three days per diem at 165.00", "495.00", True, ["arithmetic"]),
    ("vague", "Misc. stuff for the offsite", "120.00", False, ["receipt-missing", "vague"]),
    ("software", "Annual licence for a diagramming tool", "780.00", True, ["high-value"]),
    (
        "refund-request",
        "Refund of a cancelled train ticket, no receipt",
        "89.00",
        False,
        ["receipt-missing"],
    ),
]

# Grader set used for the demo runs: schema first, then the business-rule oracle.
DEMO_GRADERS = [
    {
        "key": "schema",
        "kind": "json_schema",
        "config": {
            "schema": {
                "type": "object",
                "required": ["decision", "policy_id"],
                "properties": {
                    "decision": {"enum": ["approved", "needs_approval", "rejected"]},
                    "policy_id": {"const": POLICY_ID},
                },
            }
        },
    },
    {
        "key": "policy",
        "kind": "python",
        "config": {"function": "demo.expense_policy:oracle"},
    },
]

# The assistant's prompt template (``$input``: the claim), recorded in the demo runs' target
# snapshot; the braces are JSON, plain text in a ``$name`` template.
PROMPT = (
    f"You are the expense-policy assistant. Policy {POLICY_ID}: receipts are always "
    "required; approval is needed only above EUR 500.00. Answer with JSON "
    f'{{"decision": "approved"|"needs_approval"|"rejected", "policy_id": "{POLICY_ID}"}}.'
    "\n\nClaim: $input"
)


def demo_cases(claims) -> list[dict]:
    """Case dicts ``{key, input, expected, tags}`` for ``claims`` rows."""
    cases = []
    for key, description, amount, has_receipt, tags in claims:
        claim = {"description": description, "amount_eur": amount, "has_receipt": has_receipt}
        cases.append(
            {
                "key": key,
                "input": claim,
                "expected": {"decision": expected_decision(claim), "policy_id": POLICY_ID},
                "tags": tags,
            }
        )
    return cases


SUITES = [
    {
        "name": "expense-policy-regression",
        "kind": "regression",
        "description": "Expense-policy assistant: routine claims and the EUR 500.00 boundary.",
        "cases": demo_cases(REGRESSION_CLAIMS),
    },
    {
        "name": "expense-policy-capability",
        "kind": "capability",
        "description": "Harder claims: conversions, arithmetic, vague descriptions.",
        "cases": demo_cases(CAPABILITY_CLAIMS),
    },
]
