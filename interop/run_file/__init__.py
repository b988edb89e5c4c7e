"""A run as a JSON file (``manage.py export_run`` / ``import_run``): the committed baseline.

Format ``"assay-run"``, version 1, strict JSON (no NaN/Infinity; costs as decimal strings)::

    {"format": "assay-run", "version": 1,
     "run": {"uuid", "name", "status", "source", "target_kind", "model", "target",
             "graders", "trials_per_case", "source_version", "created_at", "finished_at",
             "suite": {"name", "kind"}},
     "judge_versions": {"<uuid>": {"judge", "judge_kind", "number", "model", "protocol",
                                   "prompt_template", "params", "output_schema",
                                   "threshold", "content_hash", "trusted"}},
     "cases": [{"key", "content_hash", "input", "expected", "context", "tags",
                "goal_state"?,
                "trials": [{"attempt", "status", "output", "error_message", "latency_ms",
                            "input_tokens", "output_tokens", "cache_write_tokens"?,
                            "cache_read_tokens"?, "reasoning_tokens"?, "cost_usd",
                            "cost_basis"?, "created_at",
                            "trajectory"?, "final_state"?,
                            "grades": [{"grader", "grader_version", "status", "passed",
                                        "score", "reason", "details", "gating",
                                        "judge_version"}]}]}]}

Lossless for what the run report and a comparison read. ``--no-outputs`` leaves out output
text, ``trajectory`` and ``final_state``. ``goal_state`` is case content (in its
``content_hash``), always written when set; ``?`` keys are written only when set. Steps and
states are read back by ``evals.trajectory.steps``, a bad step refused naming it
(``cases[0].trials[1].trajectory[3].arguments``).

Tokens are the five disjoint classes of docs/costs.md, each a whole number >= 0 or null
(unknown); the cache and reasoning classes are written only when known, so a file from before
them reads as unknown. ``cost_basis`` (``Trial.cost_basis``: what the cost rests on) is an
object of ``model``, ``price``, ``source`` (each a string or null) and ``classes`` or
``unknown`` (lists of strings), written when set; any other shape is refused naming it
(``cases[0].trials[1].cost_basis.classes``).
"""

from interop.run_file.export import run_export, run_export_json
from interop.run_file.importing import run_import

__all__ = ["run_export", "run_export_json", "run_import"]
