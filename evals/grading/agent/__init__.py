"""Grading agents (docs/agents.md, "Grading agents"): the outcome apart from the path.

- ``state`` (``evals.grading.agent.state``): the trial's final state against the case's goal
  state, as a JSON diff; the **outcome** of an agent trial.
- ``trajectory`` (``evals.grading.agent.trajectory``): the tools called, their order and
  arguments, steps, tokens and cost; the **path**. Non-gating unless the grader set says
  ``"gating": true`` (``evals.grading.grader_set.default_gating``).

Both read ``AgentData`` (the trial's trajectory and final state), which the ladder loads only
for these kinds (``evals.grading.ladder``); every other reader leaves those columns alone.
"""
