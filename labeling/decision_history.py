"""The history of a trial's contract decision, written where labels change.

A contract decision is never stored: ``evals.grading.contract.decisions`` derives it from
the trial's contract grades and its labels of record (accepted only while every review
dimension of every review of the current output passes). ``labeling.labels.label_submit``
and ``label_undo`` — the one place labels change, for the queue, the review page and the API
alike — read the decision before the change (``decision_before``) and call
``decision_transition_record`` after it, in the same transaction: when the derived decision
moved, a ``DecisionTransition`` records who, when, from, to and which label change
(the reviewer's label version, and its cause) made it move.
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
    """After a label change (``cause``: "created", "revised", "flagged" or "undo", by
    ``reviewer`` at ``label_version``), record the move of the trial's derived decision from
    ``before``; None when it did not move (or no contract decides the trial)."""
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
    """A label's ``details`` with its contract review replaced by ``review`` (removed when
    None): a label change without a review leaves no review behind on the label of
    record."""
    out = {k: v for k, v in (details or {}).items() if k != REVIEW_KEY}
    if review is not None:
        out[REVIEW_KEY] = review
    return out
