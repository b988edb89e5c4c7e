"""Targets: what a run executes. See ``base.py`` for the contract every target keeps."""

from evals.runner.targets.base import (
    CaseInput,
    Target,
    TargetConfigError,
    TargetResult,
    target_from_config,
)

__all__ = ["CaseInput", "Target", "TargetConfigError", "TargetResult", "target_from_config"]
