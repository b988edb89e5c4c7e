"""The demo's registry (``core.registry``), loaded only by ``manage.py demo``; list
``demo.registry`` in ``ASSAY_REGISTRIES`` to use these names elsewhere."""

from demo.expense_contract import expected_outcome
from demo.expense_policy import oracle
from demo.refund_agent import refund_agent
from demo.refund_tools import environment, escalate, issue_refund, lookup_order

__all__ = [
    "environment",
    "escalate",
    "expected_outcome",
    "issue_refund",
    "lookup_order",
    "oracle",
    "refund_agent",
]
