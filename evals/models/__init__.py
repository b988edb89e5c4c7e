"""Suites, cases, runs, trials and grades: what was asked, how often, and what came back.

Every model of the app is imported here and listed in ``__all__``, so ``from evals.models
import Run`` is the one way to name one; the modules are its concepts:

- ``suites``: ``Suite``, ``Case`` (its ``content_hash`` and ``input_hash``), ``CaseChange``,
  ``Graduation``
- ``runs``: ``Run``, ``Trial``, ``TrialPair``
- ``grades``: ``Grade`` (``grade_skipped_placeholder``), ``DecisionTransition``
- ``baselines``: ``Baseline``; ``top_ups``: ``TopUp``; ``summaries``: ``RunSummary``
- ``presets``: ``TargetPreset``, ``GraderSetPreset`` (``preset_hash``)
- ``ingest``: ``IngestKey``

Invariants:
- A case is frozen: its content (input, expected, context documents) is hashed; a change
  makes a new case and retires the old one, so runs weeks apart compare the same thing.
- One trial per (run, case, attempt) and one grade per (trial, grader), enforced by the
  database, so a redelivered or retried task never duplicates or loses a row.
- Unknown is null: a trial's cost is null when its model's price is unknown; an errored
  grade has ``passed = None``.
"""

from evals.models.baselines import Baseline
from evals.models.grades import DecisionTransition, Grade, grade_skipped_placeholder
from evals.models.ingest import IngestKey
from evals.models.presets import GraderSetPreset, Preset, TargetPreset, preset_hash
from evals.models.runs import Run, Trial, TrialPair
from evals.models.suites import Case, CaseChange, Graduation, Suite, content_hash, input_hash
from evals.models.summaries import RunSummary
from evals.models.top_ups import TopUp

__all__ = [
    "Baseline",
    "Case",
    "CaseChange",
    "DecisionTransition",
    "Grade",
    "Graduation",
    "GraderSetPreset",
    "IngestKey",
    "Preset",
    "Run",
    "RunSummary",
    "Suite",
    "TargetPreset",
    "TopUp",
    "Trial",
    "TrialPair",
    "content_hash",
    "grade_skipped_placeholder",
    "input_hash",
    "preset_hash",
]
