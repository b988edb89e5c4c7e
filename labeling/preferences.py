"""Reviewers' A/B/tie preferences on a pairwise judge run's pairs, blind: each pair shown in
an order drawn once (``PreferenceOrder``, balanced over the run) and stored in the pair's
own naming (A: the base run's response).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from core.errors import DomainError
from core.roles import LEAD, REVIEWER, role_require
from evals.models import Trial, TrialPair
from judges.models import JudgeRun
from labeling.models import PreferenceLabel, PreferenceOrder

# Unpredictable draws: a reviewer must not be able to work out which run is response A.
_rng = random.SystemRandom()
SWAP = {"A": "B", "B": "A", "tie": "tie"}


@dataclass(frozen=True)
class PreferenceQueue:
    """A reviewer's place in a pairwise judge run: the next unlabeled pair (None: done), counts,
    and its order (``swapped``: the head run's response shown as A).
    """

    pair: TrialPair | None
    labeled: int
    total: int
    swapped: bool = False

    @property
    def shown_a(self) -> Trial | None:
        """The trial shown as response A (the recorded order)."""
        if self.pair is None:
            return None
        return self.pair.trial_b if self.swapped else self.pair.trial_a

    @property
    def shown_b(self) -> Trial | None:
        """The trial shown as response B (the recorded order)."""
        if self.pair is None:
            return None
        return self.pair.trial_a if self.swapped else self.pair.trial_b


def preference_orders_assign(*, pair_ids: list[int]) -> dict[int, bool]:
    """Pair id -> swapped for ``pair_ids``, drawing missing orders balanced to half (an odd one
    out at random). Written once; a race keeps the first. Queries: 1, or 3 when drawing.
    """
    pair_ids = sorted(set(pair_ids))
    orders = dict(
        PreferenceOrder.objects.filter(pair_id__in=pair_ids).values_list("pair_id", "swapped")
    )
    missing = [pid for pid in pair_ids if pid not in orders]
    if not missing:
        return orders
    total = len(pair_ids)
    want = total // 2 + (1 if total % 2 and _rng.random() < 0.5 else 0)
    k = min(max(want - sum(orders.values()), 0), len(missing))
    flags = [True] * k + [False] * (len(missing) - k)
    _rng.shuffle(flags)
    PreferenceOrder.objects.bulk_create(
        [
            PreferenceOrder(pair_id=pid, swapped=flag)
            for pid, flag in zip(missing, flags, strict=True)
        ],
        ignore_conflicts=True,
    )
    return dict(
        PreferenceOrder.objects.filter(pair_id__in=pair_ids).values_list("pair_id", "swapped")
    )


def preference_queue_get(
    *, judge_run: JudgeRun, reviewer, pair_id: int | None = None
) -> PreferenceQueue:
    """The next pair of ``judge_run`` without ``reviewer``'s preference, or the pair ``pair_id``
    when it is the run's, with its order (drawn on first show). Raises
    ``DomainError(field="judge_run")`` for a run that is not pairwise.
    """
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
    orders = preference_orders_assign(pair_ids=ids)
    swapped = orders.get(shown, False) if shown is not None else False
    return PreferenceQueue(pair=pair, labeled=len(done), total=len(ids), swapped=swapped)


def preference_label_save(
    *, judge_run: JudgeRun, pair_id: int, reviewer, preferred: str, critique: str = ""
) -> PreferenceLabel:
    """Record ``reviewer``'s preference on a pair, replacing theirs. ``preferred`` is what was
    chosen on screen (``A``, ``B``, ``tie``), stored in the pair's naming through its order
    (kept as ``shown_swapped``). Reviewers and leads: PermissionDenied; DomainError naming the
    field for a pair outside the run or another word.
    """
    role_require(reviewer, REVIEWER, LEAD, action="labeling a preference")
    if preferred not in PreferenceLabel.Preferred.values:
        raise DomainError(f"expected A, B or tie, got {preferred!r}", field="preferred")
    if not judge_run.is_pairwise or pair_id not in set(judge_run.trial_ids):
        raise DomainError("not a pair of this judge run", field="pair", code="not_found")
    swapped = preference_orders_assign(pair_ids=list(judge_run.trial_ids))[pair_id]
    label, _ = PreferenceLabel.objects.update_or_create(
        pair_id=pair_id,
        reviewer=reviewer,
        defaults={
            "preferred": SWAP[preferred] if swapped else preferred,
            "shown_swapped": swapped,
            "critique": critique.strip(),
            "reviewer_name": reviewer.get_username(),
            "source": "reviewer",
        },
    )
    return label
