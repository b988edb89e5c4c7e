"""A calibration set's guidelines for reviewers, versioned: every edit is a new
``GuidelinesVersion``, moved by a compare-and-set on the version the form loaded. Labels
name the version they were given under (``guidelines_current_id``).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from core.bounds import TEXT_MAX_CHARS
from core.errors import DomainError
from core.roles import ENGINEER, LEAD, role_require
from labeling.models import CalibrationSet, GuidelinesVersion, Label

INSTRUCTIONS_MAX = TEXT_MAX_CHARS["guidelines"]  # core.bounds: the one table of text limits


def _stale(cset: CalibrationSet, expected_version: int) -> DomainError:
    current = (
        GuidelinesVersion.objects.filter(calibration_set=cset, version=cset.instructions_version)
        .select_related("created_by")
        .first()
    )
    who = ""
    if current is not None:
        by = current.created_by.get_username() if current.created_by else "someone"
        who = f" by {by} at {current.created_at:%Y-%m-%d %H:%M} UTC"
    return DomainError(
        f"the guidelines changed since you opened this form (now version "
        f"{cset.instructions_version}{who}; your form had version {expected_version}); "
        "nothing was saved",
        field="expected_version",
        code="conflict",
        current_version=cset.instructions_version,
        current_text=cset.instructions,
    )


def calibration_set_instructions_set(
    *,
    calibration_set: CalibrationSet,
    instructions: str,
    by,
    expected_version: int | None = None,
) -> CalibrationSet:
    """Write a new guidelines version (Markdown, at most ``INSTRUCTIONS_MAX`` characters; empty
    removes; the same text writes nothing); engineers and leads. Raises PermissionDenied;
    DomainError on ``instructions`` (too long) or code "conflict" on ``expected_version``
    (with ``current_version`` and ``current_text``).
    """
    role_require(by, ENGINEER, LEAD, action="editing a calibration set's guidelines")
    text = (instructions or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if len(text) > INSTRUCTIONS_MAX:
        raise DomainError(
            f"{len(text)} characters; at most {INSTRUCTIONS_MAX}",
            field="instructions",
            code="too_large",
        )
    with transaction.atomic():
        cset = CalibrationSet.objects.select_for_update().get(pk=calibration_set.pk)
        if expected_version is not None and expected_version != cset.instructions_version:
            raise _stale(cset, expected_version)
        if text != cset.instructions:
            version = cset.instructions_version + 1
            updated = CalibrationSet.objects.filter(
                pk=cset.pk, instructions_version=cset.instructions_version
            ).update(instructions=text, instructions_version=F("instructions_version") + 1)
            if not updated:  # SQLite has no row lock: the compare-and-set decides
                cset.refresh_from_db()
                raise _stale(cset, cset.instructions_version - 1)
            GuidelinesVersion.objects.create(
                calibration_set=cset,
                version=version,
                text=text,
                created_by=by,
                created_at=timezone.now(),
            )
            cset.instructions, cset.instructions_version = text, version
    calibration_set.instructions = cset.instructions
    calibration_set.instructions_version = cset.instructions_version
    return calibration_set


def guidelines_current_id(*, trial, calibration_set: CalibrationSet | None = None) -> int | None:
    """The guidelines version a label on ``trial`` is given under now: ``calibration_set``'s,
    else the newest set holding the trial with guidelines; None. One query at most.
    """
    if calibration_set is not None:
        if not calibration_set.instructions_version:
            return None
        return (
            GuidelinesVersion.objects.filter(
                calibration_set_id=calibration_set.pk,
                version=calibration_set.instructions_version,
            )
            .values_list("id", flat=True)
            .first()
        )
    return (
        GuidelinesVersion.objects.filter(
            calibration_set__items__trial=trial,
            version=F("calibration_set__instructions_version"),
        )
        .order_by("-calibration_set__created_at", "-calibration_set_id")
        .values_list("id", flat=True)
        .first()
    )


def guidelines_versions_get(*, calibration_set: CalibrationSet) -> list[GuidelinesVersion]:
    """The set's guidelines versions, newest first, with author and ``n_labels`` given under
    each. One query.
    """
    return list(
        GuidelinesVersion.objects.filter(calibration_set=calibration_set)
        .select_related("created_by")
        .annotate(n_labels=Count("labels"))
        .order_by("-version")
    )


def label_guidelines_counts(*, trial_ids) -> dict[int | None, int]:
    """Current labels by reviewers on ``trial_ids`` per guidelines version number (None:
    given under none). One query."""
    counts: dict[int | None, int] = {}
    rows = (
        Label.objects.filter(trial_id__in=list(trial_ids), reviewer__isnull=False)
        .values("guidelines__version")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts[row["guidelines__version"]] = row["n"]
    return counts
