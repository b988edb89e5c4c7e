"""The demo's registry (``core.registry``): the functions the demo's runs, grader sets and
contract name. Only ``manage.py demo`` (what ``make demo`` runs) loads it, for itself and the
worker it starts; an operator who wants these names elsewhere lists ``demo.registry`` in
``ASSAY_REGISTRIES``."""

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
