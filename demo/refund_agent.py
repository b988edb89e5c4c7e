"""The demo's agent suite: a simulated refund agent (docs/agents.md).

Tools: ``lookup_order``, ``issue_refund``, ``escalate``. ``POLICY``: a delivered order
within 30 days is refunded in full; above $500 it is escalated; past 30 days or already
refunded, nothing is done. A seeded ``callable`` target: most trials follow the policy on
the expected path; some refund on the customer's word without a lookup (right outcome,
forbidden path); some slip after the lookup (wrong outcome, expected path). Rates differ
per case, so pass^k falls with k.

``AGENT_GRADERS``: ``outcome`` (``state``, exact against the goal state) and ``path``
(``trajectory``: lookup first, refund within total, at most 12 steps and $0.05;
non-gating)."""

from __future__ import annotations

import random
from typing import Any

from core.registry import registered
from evals.runner.targets.base import CaseInput

POLICY = (
    "Refund a delivered order in full within 30 days of delivery. Orders above $500 go to a "
    "human: escalate them. Past 30 days, or already refunded: no refund; tell the customer."
)
WINDOW_DAYS = 30
ESCALATE_ABOVE = 500.0
PRICE_PER_1K_TOKENS = 0.0005  # USD, simulated

ORDERS: dict[str, dict[str, Any]] = {
    "A100": {"total": 42.5, "status": "delivered", "days": 3},
    "A101": {"total": 129.0, "status": "delivered", "days": 12},
    "A102": {"total": 18.99, "status": "delivered", "days": 29},
    "A103": {"total": 64.0, "status": "delivered", "days": 45},
    "A104": {"total": 780.0, "status": "delivered", "days": 5},
    "A105": {"total": 55.0, "status": "refunded", "days": 8},
    "A106": {"total": 240.0, "status": "delivered", "days": 20},
    "A107": {"total": 12.0, "status": "delivered", "days": 1},
}

# case key -> (order id, the amount the customer asks for, how often the agent skips the
# lookup, how often it slips on the expected path)
CASES: dict[str, tuple[str, float, float, float]] = {
    "refund-simple": ("A100", 42.5, 0.15, 0.05),
    "refund-mid": ("A101", 129.0, 0.25, 0.15),
    "refund-last-day": ("A102", 18.99, 0.10, 0.30),
    "past-window": ("A103", 64.0, 0.10, 0.35),
    "large-order": ("A104", 780.0, 0.05, 0.30),
    "already-refunded": ("A105", 55.0, 0.10, 0.20),
    "refund-shipping-claim": ("A106", 255.0, 0.30, 0.10),
    "refund-tiny": ("A107", 12.0, 0.35, 0.05),
}

AGENT_GRADERS = [
    {"key": "outcome", "kind": "state", "config": {"mode": "exact"}},
    {
        "key": "path",
        "kind": "trajectory",
        "config": {
            "required": ["lookup_order"],
            "before": [["lookup_order", "issue_refund"], ["lookup_order", "escalate"]],
            "arguments": [
                {
                    "tool": "issue_refund",
                    "name": "refund at most the order total",
                    "check": "!has(results.lookup_order) || "
                    "issue_refund.amount <= results.lookup_order.total",
                }
            ],
            "max_steps": 12,
            "max_cost_usd": 0.05,
        },
    },
]


def policy_action(order: dict) -> str:
    """What the policy says for ``order``: ``refund``, ``escalate`` or ``deny``."""
    if order["status"] != "delivered" or order["days"] > WINDOW_DAYS:
        return "deny"
    return "escalate" if order["total"] > ESCALATE_ABOVE else "refund"


def _state(order_id: str, status: str, refunds: list, escalations: list) -> dict:
    return {
        "order": {"id": order_id, "status": status},
        "refunds": refunds,
        "escalations": escalations,
    }


def goal_state(order_id: str) -> dict:
    """The world after the policy is followed for ``order_id`` (the case's goal state)."""
    order = ORDERS[order_id]
    action = policy_action(order)
    if action == "refund":
        return _state(order_id, "refunded", [{"order_id": order_id, "amount": order["total"]}], [])
    if action == "escalate":
        return _state(order_id, "escalated", [], [{"order_id": order_id}])
    return _state(order_id, order["status"], [], [])


def agent_cases() -> list[dict]:
    """Cases: ``key``, ``input`` (message and order), ``tags``, ``goal_state``."""
    out = []
    for key, (order_id, amount, _, _) in CASES.items():
        out.append(
            {
                "key": key,
                "input": {
                    "order_id": order_id,
                    "message": f"Please refund my order {order_id}: ${amount:.2f}.",
                },
                "expected": None,
                "tags": [policy_action(ORDERS[order_id])],
                "goal_state": goal_state(order_id),
            }
        )
    return out


class _World:
    """The orders as the agent changes them, and the steps it takes."""

    def __init__(self, order_id: str, rng: random.Random) -> None:
        self.order_id = order_id
        self.order = dict(ORDERS[order_id])
        self.refunds: list[dict] = []
        self.escalations: list[dict] = []
        self.steps: list[dict] = []
        self.rng = rng
        self.calls = 0

    def _model(self, step: dict) -> None:
        tokens_in, tokens_out = self.rng.randint(250, 600), self.rng.randint(15, 80)
        cost = round((tokens_in + tokens_out) / 1000 * PRICE_PER_1K_TOKENS, 8)
        self.steps.append(
            {
                **step,
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
                "cost_usd": cost,
                "latency_ms": self.rng.randint(300, 1500),
            }
        )

    def call(self, name: str, arguments: dict) -> Any:
        self.calls += 1
        call_id = f"call_{self.calls}"
        self._model({"kind": "tool_call", "name": name, "arguments": arguments, "id": call_id})
        if name == "lookup_order":
            content: Any = {"id": self.order_id, **self.order}
        elif name == "issue_refund":
            self.refunds.append({"order_id": self.order_id, "amount": arguments["amount"]})
            self.order["status"] = "refunded"
            content = {"refunded": arguments["amount"]}
        else:
            self.escalations.append({"order_id": self.order_id})
            self.order["status"] = "escalated"
            content = {"ticket": f"T-{self.rng.randint(1000, 9999)}"}
        self.steps.append(
            {"kind": "tool_result", "name": name, "id": call_id, "content": content,
             "latency_ms": self.rng.randint(20, 120)}
        )  # fmt: skip
        return content

    def say(self, text: str) -> str:
        self._model({"kind": "message", "role": "assistant", "content": text})
        return text

    def final_state(self) -> dict:
        return _state(self.order_id, self.order["status"], self.refunds, self.escalations)


def _act(world: _World, action: str, total: float) -> str:
    order_id = world.order_id
    if action == "refund":
        world.call("issue_refund", {"order_id": order_id, "amount": total})
        return world.say(f"I have refunded ${total:.2f} for order {order_id}.")
    if action == "escalate":
        world.call("escalate", {"order_id": order_id, "reason": "order above $500"})
        return world.say("A colleague will review this refund and get back to you.")
    return world.say(f"I am sorry: order {order_id} cannot be refunded under our policy.")


@registered("pipeline")
def refund_agent(case: CaseInput, seed: int = 0) -> dict:
    """One trial of the simulated agent, deterministic for (``seed``, case key, attempt).
    ``case.input``: ``{"order_id", "message"}``; returns ``{"output", "trajectory",
    "final_state", "input_tokens", "output_tokens", "cost_usd"}`` (sums over its steps)."""
    order_id, amount, p_skip, p_slip = CASES[case.key]
    rng = random.Random(f"{seed}:{case.key}:{case.attempt}")
    world = _World(order_id, rng)
    world.steps.append({"kind": "message", "role": "user", "content": case.input["message"]})
    draw = rng.random()
    if draw < p_skip:
        # Takes the customer's word: refunds the asked amount at once, then looks the order
        # up to write the reply (the forbidden path).
        world.call("issue_refund", {"order_id": order_id, "amount": amount})
        world.call("lookup_order", {"order_id": order_id})
        output = world.say(f"Done: ${amount:.2f} is on its way back to you.")
    else:
        order = world.call("lookup_order", {"order_id": order_id})
        action = policy_action(order)
        if draw < p_skip + p_slip:
            # The expected path, a wrong decision at its end.
            if action == "refund":
                slip = rng.choice(["partial", "escalate"])
                if slip == "partial":
                    world.call(
                        "issue_refund",
                        {"order_id": order_id, "amount": round(order["total"] / 2, 2)},
                    )
                    output = world.say("I have refunded half of your order.")
                else:
                    output = _act(world, "escalate", order["total"])
            elif action == "deny":
                output = _act(world, "refund", order["total"])  # refunds past the policy
            else:
                output = _act(world, "refund", order["total"])  # refunds instead of escalating
        else:
            output = _act(world, action, order["total"])
    # The trial's tokens are its model steps' (as the tool loop counts them): without them
    # the trial page read "Tokens ? in / ? out" above a trajectory stating every step's.
    model_steps = [step for step in world.steps if "input_tokens" in step]
    return {
        "output": output,
        "trajectory": world.steps,
        "final_state": world.final_state(),
        "input_tokens": sum(step["input_tokens"] for step in model_steps),
        "output_tokens": sum(step["output_tokens"] for step in model_steps),
        # USD: what its model steps state they cost (the trial page read "Cost unknown").
        "cost_usd": round(sum(step["cost_usd"] for step in model_steps), 8),
    }
