"""The registry of the configs in ``examples/`` (``core.registry``): ``agent.toml`` names
the demo's simulated refund agent, its tools and their environment. List
``examples.registry`` in ``ASSAY_REGISTRIES`` to apply those configs outside the demo."""

from demo.refund_agent import refund_agent
from demo.refund_tools import environment, escalate, issue_refund, lookup_order

__all__ = ["environment", "escalate", "issue_refund", "lookup_order", "refund_agent"]
