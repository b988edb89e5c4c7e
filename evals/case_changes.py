"""Growing the golden set: adding a case (from scratch, a trial, a comparison case or an
imported record), editing and retiring it, each change recorded with who and when.

Engineers and leads only (``CASE_EDITOR_ROLES``; roles are project-wide). Content writes go
through ``evals.cases.cases_upsert``: other content under an active key is a ``conflict``
unless ``replace`` is chosen; new content or key retires the case for a replacement; new
tags alone are saved in place (tags are not content, so past runs still pair). A changed
case is a new case, left out of comparisons with its old self. Hostile text is refused the
same way on every path (``evals.cases.case_spec_check``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Prefetch, Q, QuerySet, prefetch_related_objects
from django.utils import timezone

from core.errors import DomainError
from core.roles import ENGINEER, LEAD, role_require, user_has_role
from evals.cases import CaseSpec, case_spec_check, cases_upsert
from evals.models import Case, CaseChange, Suite, Trial

CASE_EDITOR_ROLES = (ENGINEER, LEAD)
CHANGES_SHOWN = 100  # changes listed on the suite page, newest first
WRITE_ACTIONS = ("created", "replaced", "retagged", "retired", "unchanged")  # CaseWrite.action


@dataclass(frozen=True)
class CaseWrite:
    """What a write did: ``case`` (the active one, or the retired one) and ``action``."""

    case: Case
    action: str


def user_may_edit_cases(user) -> bool:
    """True when ``user`` may add, edit and retire cases (engineers and leads)."""
    return user_has_role(user, *CASE_EDITOR_ROLES)


def suites_editable_by(user) -> QuerySet[Suite]:
    """The suites whose cases ``user`` may change: all for engineers and leads, else none."""
    if not user_may_edit_cases(user):
        return Suite.objects.none()
    return Suite.objects.order_by("name")


def _conflict_active(suite: Suite, key: str) -> DomainError:
    return DomainError(
        f"{suite.name!r} already has an active case {key!r} with different content: "
        "replace it (the old case is retired) or choose another key",
        field="key",
        code="conflict",
    )


def source_trial_resolve(trial_uuid) -> Trial | None:
    """The trial a new case is made from, by UUID (None: none given). Raises ``DomainError`` on
    ``source_trial`` when no trial has it: provenance is never dropped silently."""
    if trial_uuid is None:
        return None
    trial = Trial.objects.filter(uuid=trial_uuid).first()
    if trial is None:
        raise DomainError(f"no trial {trial_uuid}", field="source_trial", code="not_found")
    return trial


def case_add(
    *,
    suite: Suite,
    spec: CaseSpec,
    by,
    via: str = "editor",
    source_trial: Trial | None = None,
    replace: bool = False,
) -> CaseWrite:
    """Add ``spec`` as a case of ``suite``; ``source_trial`` records where it came from. Returns
    ``CaseWrite`` with action ``created``, ``replaced`` or ``unchanged``. Raises
    ``PermissionDenied`` (not an engineer or lead), ``DomainError`` from ``case_spec_check``, and a
    ``conflict`` on ``key`` when the key holds other content and ``replace`` is false."""
    role_require(by, *CASE_EDITOR_ROLES, action="Adding a case")
    case_spec_check(spec)
    with transaction.atomic():
        current = (
            Case.objects.select_for_update().filter(suite=suite, key=spec.key).active().first()
        )
        if current is not None and current.content_hash == spec.content_hash:
            return CaseWrite(case=current, action="unchanged")
        if current is not None and not replace:
            raise _conflict_active(suite, spec.key)
        case = _upsert_or_conflict(
            suite=suite, spec=spec, by=by, via=via, source_trial=source_trial
        )
    return CaseWrite(case=case, action="replaced" if current is not None else "created")


def _upsert_or_conflict(*, suite: Suite, spec: CaseSpec, **kwargs) -> Case:
    """``cases_upsert`` of one spec; a writer that took the key between our check and our
    insert (the unique active key refuses the second) is a ``conflict`` on ``key``."""
    try:
        with transaction.atomic():
            return cases_upsert(suite=suite, specs=[spec], **kwargs)[spec.key]
    except IntegrityError:
        raise DomainError(
            f"case {spec.key!r} of {suite.name!r} was just written by someone else: try again",
            field="key",
            code="conflict",
        ) from None


def _active_successor(case: Case) -> Case | None:
    """The active case that replaced ``case`` along ``replaced_by``; None if the chain retired."""
    seen: set[int] = set()
    current = case
    while current.replaced_by_id is not None and current.replaced_by_id not in seen:
        seen.add(current.id)
        current = Case.objects.get(id=current.replaced_by_id)
    return current if current.retired_at is None and current.id != case.id else None


def _same_as(case: Case, spec: CaseSpec) -> bool:
    """True when ``case`` already holds ``spec``: its key, content and tags."""
    return (
        case.key == spec.key
        and case.content_hash == spec.content_hash
        and list(case.tags or []) == list(spec.tags)
    )


def _current_or_conflict(case: Case) -> Case:
    """``case`` locked for this transaction while still active; a conflict naming who
    changed it otherwise (an edit made from a stale page never overwrites a newer one)."""
    current = Case.objects.select_for_update().filter(id=case.id, retired_at__isnull=True).first()
    if current is not None:
        return current
    last = (
        CaseChange.objects.filter(Q(previous=case) | Q(case=case, action=CaseChange.Action.RETIRED))
        .select_related("by")
        .order_by("-at", "-id")
        .first()
    )
    who = f" by {last.by.get_username()}" if last is not None and last.by is not None else ""
    raise DomainError(
        f"case {case.key!r} was retired or replaced meanwhile{who}: edit its current version",
        field="case",
        code="conflict",
    )


def case_edit(
    *,
    case: Case,
    spec: CaseSpec,
    by,
    via: str = "editor",
    seen_tags: list[str] | None = None,
    if_match: Sequence[str] | None = None,
) -> CaseWrite:
    """Edit the active ``case`` into ``spec``: new content or key replaces it (``replaced``), new
    tags only are saved in place (``retagged``), else ``unchanged``. A case already replaced by
    exactly ``spec`` (a double submit) answers ``unchanged`` with the replacement.

    ``seen_tags`` (the tags the editor showed) and ``if_match`` (the API's ``If-Match`` entity
    tags, ``case_etag``) guard against overwriting a newer change; None: not checked.

    Raises ``PermissionDenied`` (not an engineer or lead), ``DomainError`` from
    ``case_spec_check``, a ``conflict`` on ``case`` (no longer active), on ``tags`` (stale
    ``seen_tags``) or on ``key`` (held by another active case), and ``precondition_failed`` on
    ``If-Match`` (stale ``if_match``)."""
    role_require(by, *CASE_EDITOR_ROLES, action="Editing a case")
    case_spec_check(spec)
    with transaction.atomic():
        if not Case.objects.filter(id=case.id, retired_at__isnull=True).exists():
            successor = _active_successor(Case.objects.get(id=case.id))
            if successor is not None and _same_as(successor, spec):
                return CaseWrite(case=successor, action="unchanged")
        current = _current_or_conflict(case)
        suite = current.suite
        if _same_as(current, spec):
            return CaseWrite(case=current, action="unchanged")
        if seen_tags is not None and list(current.tags or []) != list(seen_tags):
            raise _tags_changed(current)
        if if_match is not None and case_etag(current) not in if_match:
            raise _etag_stale(current)
        if spec.key == current.key and spec.content_hash == current.content_hash:
            old_tags = list(current.tags or [])
            current.tags = list(spec.tags)
            Case.objects.filter(id=current.id).update(tags=current.tags)
            CaseChange.objects.create(
                suite=suite,
                case=current,
                action=CaseChange.Action.RETAGGED,
                via=via,
                by=by,
                details={"tags": [old_tags, current.tags]},
            )
            return CaseWrite(case=current, action="retagged")
        renamed = {}
        if spec.key != current.key:
            if Case.objects.active().filter(suite=suite, key=spec.key).exists():
                raise DomainError(
                    f"{suite.name!r} already has an active case {spec.key!r}: choose another "
                    "key (or retire that case first)",
                    field="key",
                    code="conflict",
                )
            renamed = {spec.key: current}
        new = _upsert_or_conflict(suite=suite, spec=spec, by=by, via=via, renamed=renamed)
    return CaseWrite(case=new, action="replaced")


def case_etag(case: Case) -> str:
    """``case``'s strong entity tag for ``ETag``/``If-Match``: 32 hex digits of a SHA-256 over its
    UUID, key, content hash, tags and retired state; tags set back give the same tag."""
    state = [
        str(case.uuid),
        case.key,
        case.content_hash,
        list(case.tags or []),
        case.retired_at is not None,
    ]
    return '"' + hashlib.sha256(json.dumps(state).encode()).hexdigest()[:32] + '"'


def _last_retag_by(case: Case) -> str:
    """ " by <username>" of the newest retag of ``case``, or "" (none, or no user)."""
    last = (
        CaseChange.objects.filter(case=case, action=CaseChange.Action.RETAGGED)
        .select_related("by")
        .order_by("-at", "-id")
        .first()
    )
    return f" by {last.by.get_username()}" if last is not None and last.by is not None else ""


def _tags_changed(case: Case) -> DomainError:
    """The conflict of an edit made from a page that showed other tags than the case has."""
    now = ", ".join(case.tags or []) or "none"
    return DomainError(
        f"the tags of case {case.key!r} were changed meanwhile{_last_retag_by(case)} (now: "
        f"{now}): reload the page and edit them again",
        field="tags",
        code="conflict",
    )


def _etag_stale(case: Case) -> DomainError:
    """The refusal of an API edit whose ``If-Match`` names a state ``case`` has left."""
    now = ", ".join(case.tags or []) or "none"
    return DomainError(
        f"case {case.key!r} changed since you read it{_last_retag_by(case)} (tags now: {now}): "
        "read it again (its ETag) and send your edit on that; nothing was changed",
        field="If-Match",
        code="precondition_failed",
        etag=case_etag(case),
    )


def case_retire(*, case: Case, by, via: str = "editor") -> CaseWrite:
    """Retire the active ``case`` (compare-and-set on ``retired_at``); past runs keep its trials.
    Raises ``PermissionDenied`` (not an engineer or lead) and a ``conflict`` on ``case`` when
    already retired."""
    role_require(by, *CASE_EDITOR_ROLES, action="Retiring a case")
    with transaction.atomic():
        now = timezone.now()
        done = Case.objects.filter(id=case.id, retired_at__isnull=True).update(retired_at=now)
        if not done:
            raise DomainError(
                f"case {case.key!r} is already retired", field="case", code="conflict"
            )
        case.retired_at = now
        CaseChange.objects.create(
            suite_id=case.suite_id,
            case=case,
            action=CaseChange.Action.RETIRED,
            via=via,
            by=by,
            at=now,
        )
    return CaseWrite(case=case, action="retired")


# Reads -----------------------------------------------------------------------------------


def case_changes_list(
    *, suite: Suite, page: int = 1, limit: int = CHANGES_SHOWN
) -> tuple[list[CaseChange], bool]:
    """Page ``page`` of ``limit`` changes to ``suite``'s cases, newest first, and whether older
    pages exist. One query."""
    first = (max(1, page) - 1) * limit
    rows = list(
        CaseChange.objects.filter(suite=suite)
        .select_related("case", "previous", "by", "source_trial__run")
        .order_by("-at", "-id")[first : first + limit + 1]
    )
    return rows[:limit], len(rows) > limit


def case_changes_attach(*, cases: list[Case]) -> list[Case]:
    """``cases`` with ``changes`` prefetched (newest first): one query whatever their number."""
    prefetch_related_objects(
        cases,
        Prefetch(
            "changes",
            queryset=CaseChange.objects.select_related("by", "previous").order_by("-at", "-id"),
        ),
    )
    return cases


@dataclass(frozen=True)
class CasePrefill:
    """What "Add as a case" starts from: suite (None: user picks), key, content, source trial."""

    suite: Suite | None
    spec: CaseSpec
    source_trial: Trial | None = None
    expected_from: str = ""  # "the trial's output", "the case's expected answer" or ""


def case_prefill(*, trial: Trial | None = None, case: Case | None = None) -> CasePrefill:
    """The prefilled form of "Add as a case". From a ``trial``: its case's input, context and tags,
    the trial's output as expected and final state as goal (else the case's), key
    ``<case key>-<first 8 hex of the trial id>``. From a ``case``: a copy under ``<key>-copy``."""
    if trial is not None:
        source = trial.case
        output_usable = trial.status == Trial.Status.OK and trial.output != ""
        return CasePrefill(
            suite=trial.run.suite,
            spec=CaseSpec(
                key=f"{source.key}-{trial.uuid.hex[:8]}"[-200:],
                input=source.input,
                expected=trial.output if output_usable else source.expected,
                context=list(source.context or []),
                tags=list(source.tags or []),
                goal_state=trial.final_state
                if trial.final_state is not None
                else source.goal_state,
            ),
            source_trial=trial,
            expected_from="the trial's output" if output_usable else "the case's expected answer",
        )
    if case is not None:
        return CasePrefill(
            suite=case.suite,
            spec=CaseSpec(
                key=f"{case.key}-copy"[-200:],
                input=case.input,
                expected=case.expected,
                context=list(case.context or []),
                tags=list(case.tags or []),
                goal_state=case.goal_state,
            ),
            expected_from="the case's expected answer",
        )
    return CasePrefill(suite=None, spec=CaseSpec(key="", input=""))
