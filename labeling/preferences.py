"""Reviewers' preferences on the pairs of a pairwise judge run: A, B or tie, one pair at a
time, blind to the judge (the pair is shown as response A and response B, never which run
each came from, nor any judge verdict). What they label is the human reference of
``labeling.pairwise.pairwise_calibration_compute``."""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import DomainError
from core.roles import LEAD, REVIEWER, role_require
from evals.models import TrialPair
from judges.models import JudgeRun
from labeling.models import PreferenceLabel


@dataclass(frozen=True)
class PreferenceQueue:
    """A reviewer's place in a pairwise judge run's pairs: the next pair they have not
    labeled (None: done), how many they labeled, of how many pairs."""

    pair: TrialPair | None
    labeled: int
    total: int


def preference_queue_get(
    *, judge_run: JudgeRun, reviewer, pair_id: int | None = None
) -> PreferenceQueue:
    """The next pair of ``judge_run`` (by pair id) without a preference by ``reviewer``; the
    pair ``pair_id`` instead when it is one of the run's (a refused post shown again on the
    pair it was typed for). Raises ``DomainError(field="judge_run")`` for a judge run that is
    not pairwise."""
    if not judge_run.is_pairwise:
        raise DomainError("only a pairwise judge run has pairs to prefer", field="judge_run")
    ids = list(judge_run.trial_ids)
    done = set(
        PreferenceLabel.objects.filter(pair_id__in=ids, reviewer=reviewer).values_list(
            "pair_id", flat=True
        )
    )
    todo = sorted(set(ids) - done)
    shown = pair_id if pair_id in set(ids) else (todo[0] if todo else None)
    pair = (
        TrialPair.objects.select_related("case", "trial_a", "trial_b").get(id=shown)
        if shown is not None
        else None
    )
    return PreferenceQueue(pair=pair, labeled=len(done), total=len(ids))


def preference_label_save(
    *, judge_run: JudgeRun, pair_id: int, reviewer, preferred: str, critique: str = ""
) -> PreferenceLabel:
    """Record ``reviewer``'s preference (``A``, ``B`` or ``tie``) on a pair of
    ``judge_run``, replacing their earlier one. Reviewers and leads. Raises
    ``PermissionDenied`` for another role, ``DomainError`` naming the field for a pair
    outside the judge run or another word."""
    role_require(reviewer, REVIEWER, LEAD, action="labeling a preference")
    if preferred not in PreferenceLabel.Preferred.values:
        raise DomainError(f"expected A, B or tie, got {preferred!r}", field="preferred")
    if not judge_run.is_pairwise or pair_id not in set(judge_run.trial_ids):
        raise DomainError("not a pair of this judge run", field="pair", code="not_found")
    label, _ = PreferenceLabel.objects.update_or_create(
        pair_id=pair_id,
        reviewer=reviewer,
        defaults={
            "preferred": preferred,
            "critique": critique.strip(),
            "reviewer_name": reviewer.get_username(),
            "source": "reviewer",
        },
    )
    return label
