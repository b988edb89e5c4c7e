"""Grading agents (docs/agents.md, "Grading agents"): the outcome (``state``, the final state
against the goal) apart from the path (``trajectory``, non-gating by default). Both read
``AgentData``, which only the ladder loads, only for these kinds."""
