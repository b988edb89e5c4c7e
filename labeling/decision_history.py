"""The history of a trial's derived contract decision: ``label_submit`` and ``label_undo``
record a ``DecisionTransition`` (who, when, from, to, cause) when it moves.
"""

from __future__ import annotations

from django.utils import timezone

from evals.grading.contract.decisions import trial_decision_get
from evals.models import DecisionTransition

REVIEW_KEY = "contract_review"


def decision_before(*, trial_id: int) -> str | None:
    """The trial's decision before a label change (None: no contract decides it)."""
    return trial_decision_get(trial_id=trial_id)


def decision_transition_record(
    *, trial_id: int, before: str | None, reviewer, label_version: int, cause: str
) -> DecisionTransition | None:
    """Record the move of the trial's decision from ``before`` after a label change (``cause``:
    "created", "revised", "flagged", "undo"); None when it did not move.
    """
    if before is None:  # no contract decides the trial: nothing to read again
        return None
    after = trial_decision_get(trial_id=trial_id)
    if after is None or after == before:
        return None
    return DecisionTransition.objects.create(
        trial_id=trial_id,
        from_decision=before,
        to_decision=after,
        reviewer=reviewer,
        reviewer_name=reviewer.get_username(),
        label_version=label_version,
        cause=cause,
        created_at=timezone.now(),
    )


def details_with_review(details: dict | None, review: dict | None) -> dict:
    """``details`` with its contract review replaced by ``review`` (removed when None)."""
    out = {k: v for k, v in (details or {}).items() if k != REVIEW_KEY}
    if review is not None:
        out[REVIEW_KEY] = review
    return out
