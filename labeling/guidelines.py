"""A calibration set's guidelines for reviewers, versioned.

Every edit is a new ``GuidelinesVersion`` (the text, who, when) and moves the set's
``instructions_version`` by a compare-and-set on the version the form was loaded with, so a
stale tab never overwrites what it did not see. Labels name the version they were given
under (``labeling.labels.label_submit``, through ``guidelines_current_id``).
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
    """Write a new version of the set's labeling guidelines (Markdown, at most
    ``INSTRUCTIONS_MAX`` characters; empty removes them). Engineers and leads; allowed at
    any time (each label records the version it was given under). Line ends are normalised
    to ``\\n``; the same text as the current one writes nothing.

    ``expected_version`` is the version the form was loaded with (0: none yet; None skips
    the check): any other current version is a DomainError (code "conflict", field
    ``expected_version``, with ``current_version`` and ``current_text``) and nothing is
    written. Raises PermissionDenied, or DomainError (field ``instructions``) when too long.
    Returns the set with its new text and version.
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
    """The id of the guidelines version a label on ``trial`` is given under now: the current
    version of ``calibration_set`` (the queue it is labeled in), else of the newest set
    holding the trial that has guidelines; None without guidelines. One query at most."""
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
    """The set's guidelines versions, newest first, with their author and how many current
    labels on the set's trials were given under each (``n_labels``). One query."""
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
