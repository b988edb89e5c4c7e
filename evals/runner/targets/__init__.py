"""Targets: what a run executes. See ``base.py`` for the contract every target keeps."""

from core.errors import DomainError
from evals.runner.targets.base import CaseInput, Target, TargetResult, target_from_config

__all__ = ["CaseInput", "Target", "DomainError", "TargetResult", "target_from_config"]
