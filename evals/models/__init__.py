"""Suites, cases, runs, trials and grades: what was asked, how often, and what came back.

Every model is imported here and listed in ``__all__`` (``from evals.models import Run``);
the modules are its concepts: ``suites``, ``runs``, ``grades``, ``baselines``, ``top_ups``,
``summaries``, ``presets``, ``ingest``, ``reprices``, ``experiments``, ``prunes``.

Invariants: a case is frozen by its content hash (a change makes a new case); one trial per
(run, case, attempt) and one grade per (trial, grader), enforced by the database; unknown is
null (a cost without a price, an errored grade's ``passed``)."""

from evals.models.baselines import Baseline
from evals.models.experiments import Experiment, ExperimentVariant
from evals.models.grades import DecisionTransition, Grade, grade_skipped_placeholder
from evals.models.ingest import IngestKey
from evals.models.presets import GraderSetPreset, Preset, TargetPreset, preset_hash
from evals.models.prunes import RunPrune
from evals.models.reprices import RunReprice
from evals.models.runs import Run, Trial, TrialPair
from evals.models.suites import Case, CaseChange, Graduation, Suite, content_hash, input_hash
from evals.models.summaries import RunSummary
from evals.models.top_ups import TopUp

__all__ = [
    "Baseline",
    "Case",
    "CaseChange",
    "DecisionTransition",
    "Experiment",
    "ExperimentVariant",
    "Grade",
    "Graduation",
    "GraderSetPreset",
    "IngestKey",
    "Preset",
    "Run",
    "RunPrune",
    "RunReprice",
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
