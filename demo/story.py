"""The demo's story, told by real runs and the real gate: an edited prompt ("demo-2") sends
the EUR 500.00 claim for approval and the gate blocks; a re-run of the baseline passes.
Every decision printed is ``gate_evaluate`` on the runs, never fixed text."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from core.errors import DomainError
from demo.data import DEMO_GRADERS, POLICY_ID, PROMPT
from demo.expense_contract import CONTRACT_GRADERS, contract_target
from demo.refund_agent import AGENT_GRADERS
from evals.comparison.gate import gate_evaluate
from evals.models import Run
from evals.runner.start import run_start

# Per-case pass probabilities of the baseline assistant: reliable on routine claims and at
# the boundary; harder capability claims (arithmetic, conversions, vague text) less so.
PASS_PROBABILITY = {
    "multi-currency": 0.6,
    "split-bill": 0.5,
    "per-diem": 0.8,
    "vague": 0.6,
    "refund-request": 0.8,
}
DEFAULT_PASS_PROBABILITY = 0.99

# The prompt edit of the "changed" runs: "from EUR 500.00" where policy says "above".
CHANGED_PROMPT = PROMPT.replace(
    "approval is needed only above EUR 500.00", "approval is needed from EUR 500.00 up"
)
CHANGED_PASS_PROBABILITY = {
    **PASS_PROBABILITY,
    # The edit breaks the boundary: EUR 500.00 with a receipt is always sent for approval.
    "at-boundary": 0.0,
    # ... and, stating the threshold more plainly, helps with split bills.
    "split-bill": 0.7,
}


def _reply(decision: str | None, policy: bool = True) -> str:
    body = {} if decision is None else {"decision": decision}
    if policy:
        body["policy_id"] = POLICY_ID
    return json.dumps(body)


# The simulated assistant's typical mistakes: off-by-one at the boundary, waving through a
# missing receipt, forgetting the policy id, answering in prose.
WRONG_OUTPUTS = {
    "at-boundary": [_reply("needs_approval")],
    "above-boundary": [_reply("approved")],
    "below-boundary": [_reply("needs_approval")],
    "no-receipt-boundary": [_reply("approved"), _reply("needs_approval")],
    "no-receipt-large": [_reply("needs_approval")],
    "split-bill": [_reply("approved"), "The claim looks fine to me."],
    "multi-currency": [_reply("needs_approval")],
    "vague": [_reply("approved"), _reply("approved", policy=False)],
}


def demo_target(seed: int, *, changed: bool = False) -> dict:
    """The simulated target config: the baseline prompt, or the edited one (``changed``)."""
    return {
        "kind": "simulated",
        "model": "simulated",
        "seed": seed,
        "prompt_template": CHANGED_PROMPT if changed else PROMPT,
        "prompt_revision": "demo-2" if changed else "demo-1",
        "default_pass_probability": DEFAULT_PASS_PROBABILITY,
        "pass_probability": CHANGED_PASS_PROBABILITY if changed else PASS_PROBABILITY,
        "wrong_outputs": WRONG_OUTPUTS,
        "error_probability": 0.0,
        # Reported latency is drawn, not waited for (the run finishes in seconds).
        "latency_ms": [150, 900],
    }


def demo_run(*, suite, seed: int, user, trials: int, changed: bool, timeout: float) -> Run:
    """Start a demo run and wait for it. Raises ``DomainError`` (field ``timeout``) when not
    finished within ``timeout`` seconds."""
    name = f"demo-{Run.objects.filter(suite=suite).count() + 1}"
    run = run_start(
        suite=suite,
        name=name,
        target=demo_target(seed=seed, changed=changed),
        graders=DEMO_GRADERS,
        trials_per_case=trials,
        source_version="demo",
        started_by=user,
    )
    return run_wait(run, timeout=timeout)


def run_wait(run: Run, *, timeout: float) -> Run:
    """Wait for ``run`` to finish. Raises ``DomainError`` (field ``timeout``) after ``timeout``
    seconds."""
    deadline = time.monotonic() + timeout
    while True:
        run.refresh_from_db()
        if run.is_terminal:
            return run
        if time.monotonic() > deadline:
            raise DomainError(
                f"run {run.name} did not finish within {timeout} s: is the worker running?",
                field="timeout",
            )
        time.sleep(0.5)


def contract_demo_run(*, suite, seed: int, user, trials: int, timeout: float) -> Run:
    """A contract-suite run against the simulated test writer; waits for it."""
    run = run_start(
        suite=suite,
        name=f"contract-{Run.objects.filter(suite=suite).count() + 1}",
        target=contract_target(seed),
        graders=CONTRACT_GRADERS,
        trials_per_case=trials,
        source_version="demo",
        started_by=user,
    )
    return run_wait(run, timeout=timeout)


def agent_target(seed: int) -> dict:
    """The refund agent as a ``callable`` target (``demo.refund_agent.refund_agent``)."""
    return {
        "kind": "callable",
        "path": "demo.refund_agent:refund_agent",
        "settings": {"seed": seed},
        "model": "simulated-agent",
    }


def agent_demo_run(*, suite, seed: int, user, trials: int, timeout: float) -> Run:
    """A refund-agent run graded by ``state`` and ``trajectory``; waits for it."""
    run = run_start(
        suite=suite,
        name=f"agent-{Run.objects.filter(suite=suite).count() + 1}",
        target=agent_target(seed),
        graders=AGENT_GRADERS,
        trials_per_case=trials,
        source_version="demo",
        started_by=user,
    )
    return run_wait(run, timeout=timeout)


@dataclass(frozen=True)
class Chapter:
    """One comparison: ``head`` against ``base``, ``title``, the gate's ``exit_code`` (0 pass,
    1 regression, 2 cannot decide) and its reason."""

    title: str
    base: Run
    head: Run
    exit_code: int
    sentence: str


def demo_chapter(*, title: str, base: Run, head: Run) -> Chapter:
    """The gate's decision on ``head`` against ``base``, as ``manage.py gate`` takes it."""
    _, decision = gate_evaluate(head=head, base=base)
    return Chapter(title, base, head, decision.exit_code, decision.sentence)


# The demo experiment's third variant: a shorter prompt that drops the policy's worked
# examples; a little less reliable near the boundary and without a receipt.
TERSE_PASS_PROBABILITY = {
    **PASS_PROBABILITY,
    "below-boundary": 0.8,
    "no-receipt-boundary": 0.7,
    "no-receipt-large": 0.8,
}


def demo_experiment(*, suite, seed: int, user, trials: int, timeout: float):
    """The demo's experiment on ``suite``: the baseline prompt, the edited one and a terse one,
    started together with one seed (``evals.experiments.start``); waits for every variant.
    Raises ``DomainError`` (field ``timeout``) when one does not finish within ``timeout`` s."""
    from evals.experiments.start import experiment_start  # noqa: PLC0415 - scipy on first use

    terse = {
        **demo_target(seed=seed),
        "prompt_revision": "demo-terse",
        "pass_probability": TERSE_PASS_PROBABILITY,
    }
    variants = [
        {"label": "baseline prompt", "target": demo_target(seed=seed)},
        {"label": "edited prompt", "target": demo_target(seed=seed, changed=True)},
        {"label": "terse prompt", "target": terse},
    ]
    experiment = experiment_start(
        suite=suite,
        name="demo: which prompt to ship",
        variants=variants,
        graders=DEMO_GRADERS,
        trials_per_case=trials,
        seed=seed,
        source_version="demo",
        started_by=user,
    )
    deadline = time.monotonic() + timeout
    for variant in experiment.variants.select_related("run"):
        run_wait(variant.run, timeout=max(deadline - time.monotonic(), 1.0))
    return experiment
