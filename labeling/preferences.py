"""Reviewers' A/B/tie preferences on a pairwise judge run's pairs, blind: each pair shown in
an order drawn once (``PreferenceOrder``, balanced over the run) and stored in the pair's
own naming (A: the base run's response).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from core.errors import DomainError, value_shown
from core.roles import LEAD, REVIEWER, role_require
from evals.models import Trial, TrialPair
from judges.models import JudgeRun
from labeling.models import PreferenceLabel, PreferenceOrder
from labeling.trust_recheck import pairwise_trust_recheck

# Unpredictable draws: a reviewer must not be able to work out which run is response A.
_rng = random.SystemRandom()
SWAP = {"A": "B", "B": "A", "tie": "tie"}


@dataclass(frozen=True)
class PreferenceQueue:
    """A reviewer's place in a pairwise judge run: the next unlabeled pair (None: done), counts,
    its order (``swapped``: the head run's response shown as A) and the version of the
    reviewer's preference on it.
    """

    pair: TrialPair | None
    labeled: int
    total: int
    swapped: bool = False
    version: int = 0  # the reviewer's preference on ``pair``: 0 for none (the form's)

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
    done = dict(
        PreferenceLabel.objects.filter(pair_id__in=ids, reviewer=reviewer).values_list(
            "pair_id", "version"
        )
    )
    todo = sorted(set(ids) - done.keys())
    shown = pair_id if pair_id in set(ids) else (todo[0] if todo else None)
    pair = (
        TrialPair.objects.select_related("case", "trial_a", "trial_b").get(id=shown)
        if shown is not None
        else None
    )
    orders = preference_orders_assign(pair_ids=ids)
    swapped = orders.get(shown, False) if shown is not None else False
    return PreferenceQueue(
        pair=pair,
        labeled=len(done),
        total=len(ids),
        swapped=swapped,
        version=done.get(shown, 0) if shown is not None else 0,
    )


def _choice_text(label: PreferenceLabel) -> str:
    """``label``'s preference as its reviewer saw it on screen ("A is better", "a tie")."""
    shown = SWAP[label.preferred] if label.shown_swapped else label.preferred
    return "a tie" if shown == "tie" else f"{shown} is better"


def _stale(expected_version: int, label: PreferenceLabel | None) -> DomainError:
    now = f"{_choice_text(label)}, revision {label.version}" if label else "no preference"
    return DomainError(
        detail=f"this preference changed since you opened it (now {now}; your form had "
        f"{expected_version or 'none'}); reload it — nothing was saved",
        field="expected_version",
        code="conflict",
        current_version=label.version if label else 0,
    )


def _change_text(reviewer, pair_id: int) -> str:
    uuid = TrialPair.objects.filter(id=pair_id).values_list("uuid", flat=True).first()
    return f"{reviewer.get_username()}'s preference on pair {uuid}"


def preference_label_save(
    *,
    judge_run: JudgeRun,
    pair_id: int,
    reviewer,
    preferred: str,
    expected_version: int | None,
    critique: str = "",
) -> PreferenceLabel:
    """Record ``reviewer``'s preference on a pair, replacing theirs: a compare-and-set on
    ``expected_version``, the version of their preference the form showed (0: none).
    ``preferred`` is what was chosen on screen (``A``, ``B``, ``tie``), stored in the pair's
    naming through its order (kept as ``shown_swapped``). An identical save from the current
    version or the one before (a retried post) changes nothing. A changed preference rechecks
    the pairwise approvals that counted the pair (``labeling.trust_recheck``) in the same
    transaction. Reviewers and leads: PermissionDenied; DomainError naming the field for a
    pair outside the run, another word, a missing ``expected_version``, and a stale one (code
    "conflict", ``current_version``); nothing is written on a refusal.
    """
    role_require(reviewer, REVIEWER, LEAD, action="labeling a preference")
    if preferred not in PreferenceLabel.Preferred.values:
        raise DomainError(f"expected A, B or tie, got {value_shown(preferred)}", field="preferred")
    if expected_version is None:
        raise DomainError(
            "required: the version of your preference the form showed (0 for none); reload "
            "the page — nothing was saved",
            field="expected_version",
        )
    if not judge_run.is_pairwise or pair_id not in set(judge_run.trial_ids):
        raise DomainError("not a pair of this judge run", field="pair", code="not_found")
    swapped = preference_orders_assign(pair_ids=list(judge_run.trial_ids))[pair_id]
    stored = SWAP[preferred] if swapped else preferred
    critique = critique.strip()
    with transaction.atomic():
        label = (
            PreferenceLabel.objects.select_for_update()
            .filter(pair_id=pair_id, reviewer=reviewer)
            .first()
        )
        if (
            label is not None
            and (label.preferred, label.critique) == (stored, critique)
            and expected_version in (label.version, label.version - 1)
        ):
            return label  # an identical resubmission
        if expected_version != (label.version if label else 0):
            raise _stale(expected_version, label)
        if label is None:
            try:
                with transaction.atomic():
                    label = PreferenceLabel.objects.create(
                        pair_id=pair_id,
                        reviewer=reviewer,
                        preferred=stored,
                        shown_swapped=swapped,
                        critique=critique,
                        reviewer_name=reviewer.get_username(),
                        source="reviewer",
                        version=1,
                    )
            except IntegrityError:
                raise _stale(
                    expected_version,
                    PreferenceLabel.objects.filter(pair_id=pair_id, reviewer=reviewer).first(),
                ) from None
            moved = True
        else:
            moved = label.preferred != stored
            changes = {
                "preferred": stored,
                "shown_swapped": swapped,
                "critique": critique,
                "reviewer_name": reviewer.get_username(),
                "source": "reviewer",
                "version": label.version + 1,
            }
            if not PreferenceLabel.objects.filter(pk=label.pk, version=label.version).update(
                **changes
            ):
                raise _stale(expected_version, PreferenceLabel.objects.get(pk=label.pk))
            for name, value in changes.items():
                setattr(label, name, value)
        if moved:  # the preference of record changed: the approvals resting on it
            pairwise_trust_recheck(
                pair_id=pair_id, by=reviewer, change=_change_text(reviewer, pair_id)
            )
    return label
