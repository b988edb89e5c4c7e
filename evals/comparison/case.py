"""Reads for the comparison's case page: one case's trials in the base and the head run,
side by side by attempt, with a word-level diff of their outputs and their grades."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest

from django.db import models
from django.db.models.functions import Length, Substr

from evals.blindness import blind_for, grades_visible_to
from evals.comparison.textdiff import DIFF_MAX_CHARS, WordDiff, word_diff
from evals.models import Case, Grade, Run, Trial


@dataclass(frozen=True)
class TrialPairRow:
    """Attempt ``attempt`` of the case on each side (None when that side has fewer trials)
    and the word diff of their outputs (None unless both sides have an ok trial)."""

    attempt: int
    base: Trial | None
    head: Trial | None
    diff: WordDiff | None


@dataclass(frozen=True)
class ComparisonCase:
    """``case`` as asked in the head (or the base, for a removed case); ``base_case`` the
    base's matching case (same content hash, else the same key: ``changed``), None when
    the case is only in the head; ``rows`` one per attempt."""

    base_run: Run
    head_run: Run
    case: Case
    base_case: Case | None
    head_case: Case | None
    changed: bool
    rows: list[TrialPairRow]


def comparison_case_get(*, base: Run, head: Run, case_uuid, viewer) -> ComparisonCase:
    """One case of a comparison as ``viewer`` may see it (``evals.blindness``; each trial has
    ``blind``). Cases match by content hash, else by key. Five queries; outputs loaded up to
    ``DIFF_MAX_CHARS`` + 1 characters. Raises ``Case.DoesNotExist`` when ``case_uuid`` is not a
    case of the suite or has no trial in either run."""
    blind = blind_for(viewer)
    case = Case.objects.get(uuid=case_uuid, suite_id=head.suite_id)
    related = list(
        Case.objects.filter(suite_id=head.suite_id)
        .filter(models.Q(content_hash=case.content_hash) | models.Q(key=case.key))
        .filter(trials__run__in=[base, head])
        .distinct()
    )
    trials = list(
        Trial.objects.filter(run__in=[base, head], case__in=related)
        .defer("output", "raw_response")
        .annotate(
            output_cut=Substr("output", 1, DIFF_MAX_CHARS + 1), output_length=Length("output")
        )
        .select_related("case")
        .prefetch_related(
            models.Prefetch(
                "grades",
                queryset=grades_visible_to(
                    Grade.objects.select_related("judge_version").order_by("grader"),
                    viewer,
                    blind=blind,
                ),
            )
        )
        .order_by("attempt")
    )
    for trial in trials:
        trial.blind = blind.holds(trial.case)
    if not trials:
        raise Case.DoesNotExist("no trial of this case in either run")
    side_case = {}
    for run in (base, head):
        mine = [t.case for t in trials if t.run_id == run.id]
        same = [c for c in mine if c.content_hash == case.content_hash]
        side_case[run.id] = (same or mine or [None])[0]
    base_case, head_case = side_case[base.id], side_case[head.id]
    changed = bool(base_case and head_case and base_case.content_hash != head_case.content_hash)
    by_side = {
        run.id: [
            t
            for t in trials
            if t.run_id == run.id and side_case[run.id] and t.case_id == side_case[run.id].id
        ]
        for run in (base, head)
    }
    rows = []
    for b, h in zip_longest(by_side[base.id], by_side[head.id]):
        attempt = (b or h).attempt
        diff = None
        if b is not None and h is not None and b.status == h.status == Trial.Status.OK:
            diff = word_diff(b.output_cut, h.output_cut)
        rows.append(TrialPairRow(attempt=attempt, base=b, head=h, diff=diff))
    return ComparisonCase(
        base_run=base,
        head_run=head,
        case=case,
        base_case=base_case,
        head_case=head_case,
        changed=changed,
        rows=rows,
    )


def case_uuids_by_hash(*, suite_id: int, rows: list) -> dict[str, str]:
    """Content hash -> case UUID for rows of one suite (the row's key wins a tie). One query."""
    hashes = {r.content_hash for r in rows}
    if not hashes:
        return {}
    keys = {(r.content_hash, r.key) for r in rows}
    out: dict[str, str] = {}
    for digest, key, case_uuid in (
        Case.objects.filter(suite_id=suite_id, content_hash__in=hashes)
        .order_by("id")
        .values_list("content_hash", "key", "uuid")
    ):
        if digest not in out or (digest, key) in keys:
            out[digest] = str(case_uuid)
    return out
