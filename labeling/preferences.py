"""Reviewers' preferences on the pairs of a pairwise judge run: A, B or tie, one pair at a
time, blind to the judge (the pair is shown as response A and response B, never which run
each came from, nor any judge verdict). What they label is the human reference of
``labeling.pairwise.pairwise_calibration_compute``.

Each pair is shown in an order drawn once, when the run's pairs are first shown, and
recorded (``PreferenceOrder``): half of the run's pairs show the base run's response as A,
half the head run's, so a reviewer's leaning to one position is balanced over the two runs
and the position does not say which run a response came from. A saved preference is
mapped back through that order to the pair's own naming (A: the base run's response).
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
    """A reviewer's place in a pairwise judge run's pairs: the next pair they have not
    labeled (None: done), how many they labeled, of how many pairs, and the pair's recorded
    order (``swapped``: the head run's response is shown as A)."""

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
    """The recorded order of each pair of ``pair_ids`` (pair id -> swapped), drawing it for
    the pairs without one: balanced over ``pair_ids`` (the swapped count made as close to
    half as the orders already recorded allow; an odd one out drawn at random), in a random
    assignment. Orders are written once and never changed (a race keeps the first writer's).
    Queries: 1, or 3 when some are drawn."""
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
    """The next pair of ``judge_run`` (by pair id) without a preference by ``reviewer``; the
    pair ``pair_id`` instead when it is one of the run's (a refused post shown again on the
    pair it was typed for, or the pair a draft kept across a login was typed for), with its
    recorded order. The first time the run's pairs are shown, their orders are drawn and
    recorded (``preference_orders_assign``). Raises ``DomainError(field="judge_run")`` for a
    judge run that is not pairwise."""
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
    """Record ``reviewer``'s preference on a pair of ``judge_run``, replacing their earlier
    one. ``preferred`` is the response chosen on screen (``A``, ``B`` or ``tie``); it is
    stored in the pair's own naming (A: the base run's response), mapped through the pair's
    recorded order (``PreferenceOrder``, drawn now if the pair was never shown), which the
    label keeps (``shown_swapped``). Reviewers and leads. Raises ``PermissionDenied`` for
    another role, ``DomainError`` naming the field for a pair outside the judge run or
    another word."""
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
