"""Writing cases into a suite: a case is frozen, so a change of content is a new case.

``case_upsert`` / ``cases_upsert`` are the one place that decides between reusing, creating
and replacing a case; imports, the API and the suite editor all call them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from core.text import UNSTORABLE, contains_unstorable
from evals.models import Case, Graduation, Suite, content_hash
from evals.suites import graduation_candidates


@dataclass(frozen=True)
class CaseSpec:
    """A case's wanted content: ``key`` (unique among the suite's active cases, <= 200
    chars), ``input`` (str or JSON object), ``expected`` (JSON or None), ``context``
    (list of ``{"id", "text"}``), ``tags`` (list of str), ``goal_state`` (an agent case's
    wanted final state, JSON or None)."""

    key: str
    input: Any
    expected: Any = None
    context: list[dict] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    goal_state: Any = None

    @property
    def content_hash(self) -> str:
        return content_hash(
            input=self.input,
            expected=self.expected,
            context=self.context,
            goal_state=self.goal_state,
        )


def cases_upsert(
    *, suite: Suite, specs: list[CaseSpec], retired: list[Case] | None = None
) -> dict[str, Case]:
    """Make each spec an active case of ``suite``; returns key -> Case.

    Per key: no active case -> create; an active case with the same content hash -> reuse it
    unchanged (its tags too: a frozen case keeps its first tags); different content -> retire
    the old case (``retired_at`` = now, ``replaced_by`` = the new case) and create a new one.
    Keys must be unique within ``specs`` (``ValueError`` otherwise). Three to five queries
    per call whatever the number of specs; runs inside the caller's transaction.
    ``retired``, when given, receives every case this call retired (so that an import can
    say which: no case is retired silently).
    """
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError("cases_upsert: duplicate keys in one call")
    existing = {c.key: c for c in Case.objects.active().filter(suite=suite, key__in=keys)}
    result: dict[str, Case] = {}
    to_create: list[Case] = []
    to_retire: list[tuple[Case, Case]] = []
    now = timezone.now()
    for spec in specs:
        digest = spec.content_hash
        old = existing.get(spec.key)
        if old is not None and old.content_hash == digest:
            result[spec.key] = old
            continue
        new = Case(
            suite=suite,
            key=spec.key,
            input=spec.input,
            expected=spec.expected,
            context=spec.context,
            tags=spec.tags,
            goal_state=spec.goal_state,
            content_hash=digest,
        )
        to_create.append(new)
        result[spec.key] = new
        if old is not None:
            to_retire.append((old, new))
    with transaction.atomic():
        if to_retire:
            # Retire first: the active key is unique, so the new case cannot coexist with it.
            Case.objects.filter(id__in=[old.id for old, _ in to_retire]).update(retired_at=now)
        Case.objects.bulk_create(to_create)
        if to_retire:
            for old, new in to_retire:
                old.retired_at = now
                old.replaced_by = new
            Case.objects.bulk_update([old for old, _ in to_retire], ["replaced_by"])
    if retired is not None:
        retired.extend(old for old, _ in to_retire)
    return result


def case_upsert(
    *,
    suite: Suite,
    key: str,
    input: Any,
    expected: Any = None,
    context: list[dict] | None = None,
    tags: list[str] | None = None,
) -> Case:
    """Reuse, create or replace one case (rules of ``cases_upsert``); returns the active case."""
    spec = CaseSpec(key=key, input=input, expected=expected, context=context or [], tags=tags or [])
    return cases_upsert(suite=suite, specs=[spec])[key]


def case_graduate(*, case: Case, into_suite: Suite, by=None):
    """Copy a capability case into a regression suite and record a ``Graduation``.

    The copy goes through ``evals.cases.case_upsert`` with the same key, input,
    expected, context and tags, so graduating twice reuses the copy (idempotent: one case,
    one ``Graduation`` per (case, regression case)). The evidence (the runs it passed) is
    stored with the record. Returns the ``Graduation``.

    Raises ``DomainError`` when ``case`` is retired or not in a capability suite, when
    ``into_suite`` is not a regression suite, when the case is not a current graduation
    candidate (``evals.suites.graduation_candidates``: every trial of the suite's latest
    runs passed), or when ``into_suite`` already has an active case with this key and
    different content (graduating must never replace it).
    """
    if case.suite.kind != Suite.Kind.CAPABILITY:
        raise DomainError(f"{case.key!r} is not in a capability suite", field="case")
    if case.retired_at is not None:
        raise DomainError(f"{case.key!r} is retired", field="case")
    if into_suite.kind != Suite.Kind.REGRESSION:
        raise DomainError(f"{into_suite.name!r} is not a regression suite", field="into_suite")
    candidate = next(
        (c for c in graduation_candidates(suite=case.suite) if c.case.id == case.id), None
    )
    if candidate is None:
        raise DomainError(
            f"{case.key} has not passed every trial of the last runs; it cannot graduate yet",
            field="case",
        )
    clash = (
        Case.objects.active()
        .filter(suite=into_suite, key=case.key)
        .exclude(content_hash=case.content_hash)
        .exists()
    )
    if clash:
        raise DomainError(
            f"{into_suite.name!r} already has a different case with key {case.key!r}",
            field="into_suite",
        )
    with transaction.atomic():
        copy = case_upsert(
            suite=into_suite,
            key=case.key,
            input=case.input,
            expected=case.expected,
            context=list(case.context or []),
            tags=list(case.tags or []),
        )
        graduation, _ = Graduation.objects.get_or_create(
            case=case,
            regression_case=copy,
            defaults={"by": by, "evidence": {"runs": candidate.evidence}},
        )
    return graduation


SUITE_FIELDS = {"description", "kind", "cases", "cases_file", "retire_missing"}
CASE_FIELDS = {"key", "input", "expected", "context", "tags", "goal_state"}


def case_spec_parse(raw: object, where: str) -> CaseSpec:
    """One case declared in a config file or a cases file: ``{key, input, expected?,
    context?, tags?, goal_state?}`` (``goal_state``: an agent case's wanted final state, any
    JSON; docs/agents.md), strictly typed (no coercion). Raises DomainError naming
    ``<where>.<field>``."""
    if not isinstance(raw, dict):
        raise DomainError("expected a table {key, input, ...}", field=where)
    unknown = sorted(set(raw) - CASE_FIELDS)
    if unknown:
        raise DomainError(
            f"unknown field (known: {sorted(CASE_FIELDS)})", field=f"{where}.{unknown[0]}"
        )
    key = raw.get("key")
    if not isinstance(key, str) or not key.strip():
        raise DomainError("required, a non-empty string", field=f"{where}.key")
    if len(key) > 200:
        raise DomainError(f"longer than 200 characters ({len(key)})", field=f"{where}.key")
    if not isinstance(raw.get("input"), str | dict):
        raise DomainError("required, a string or a table", field=f"{where}.input")
    context = raw.get("context", [])
    if not isinstance(context, list) or not all(
        isinstance(d, dict)
        and set(d) == {"id", "text"}
        and all(isinstance(v, str) for v in d.values())
        for d in context
    ):
        raise DomainError('expected a list of {id = "...", text = "..."}', field=f"{where}.context")
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
        raise DomainError("expected a list of non-empty strings", field=f"{where}.tags")
    for name in ("key", "input", "expected", "context", "tags", "goal_state"):
        if contains_unstorable(raw.get(name)):
            raise DomainError(UNSTORABLE, field=f"{where}.{name}")
    return CaseSpec(
        key=key,
        input=raw["input"],
        expected=raw.get("expected"),
        context=context,
        tags=tags,
        goal_state=raw.get("goal_state"),
    )


@transaction.atomic
def suite_config_apply(*, name: str, config: dict, cases: list[CaseSpec]) -> dict:
    """Create or update the suite ``name`` from a config file's ``[suites.NAME]`` table
    (``description``, ``kind``: regression | capability) and make ``cases`` its active cases
    (``cases_upsert``: same content reused, changed content replaces the old case). Active
    cases the file does not list are kept and counted (``not_in_file``), unless
    ``retire_missing = true`` retires them (counted in ``retired``): nothing is retired
    silently. Returns ``{"name", "uuid", "action" (created | unchanged | updated),
    "cases": {"created", "unchanged", "replaced", "retired", "not_in_file"}}``. Raises
    DomainError naming ``suites.<name>.<field>``."""
    where = f"suites.{name}"
    unknown = sorted(set(config) - SUITE_FIELDS)
    if unknown:
        raise DomainError(
            f"unknown field (known: {sorted(SUITE_FIELDS)})", field=f"{where}.{unknown[0]}"
        )
    description = config.get("description", "")
    if not isinstance(description, str):
        raise DomainError("expected a string", field=f"{where}.description")
    kind = config.get("kind", Suite.Kind.REGRESSION)
    if kind not in Suite.Kind.values:
        raise DomainError(f"expected one of {Suite.Kind.values}", field=f"{where}.kind")
    retire_missing = config.get("retire_missing", False)
    if not isinstance(retire_missing, bool):
        raise DomainError("expected true or false", field=f"{where}.retire_missing")
    if not name.strip() or len(name) > 200 or contains_unstorable(name):
        raise DomainError("a suite name is 1 to 200 storable characters", field=where)
    seen: set[str] = set()
    for spec in cases:
        if spec.key in seen:
            raise DomainError(f"duplicate case key {spec.key!r}", field=f"{where}.cases")
        seen.add(spec.key)
    suite, created = Suite.objects.get_or_create(
        name=name, defaults={"description": description, "kind": kind}
    )
    action = "created" if created else "unchanged"
    if not created and (suite.description, suite.kind) != (description, kind):
        suite.description, suite.kind = description, kind
        suite.save(update_fields=["description", "kind"])
        action = "updated"
    before = {c.key: c.id for c in Case.objects.active().filter(suite=suite)}
    after = cases_upsert(suite=suite, specs=cases)
    counts = {"created": 0, "unchanged": 0, "replaced": 0, "retired": 0, "not_in_file": 0}
    for key, case in after.items():
        if key not in before:
            counts["created"] += 1
        elif before[key] == case.id:
            counts["unchanged"] += 1
        else:
            counts["replaced"] += 1
    missing = [case_id for key, case_id in before.items() if key not in after]
    if missing and retire_missing:
        Case.objects.filter(id__in=missing).update(retired_at=timezone.now())
        counts["retired"] = len(missing)
    else:
        counts["not_in_file"] = len(missing)
    if action == "unchanged" and (counts["created"] or counts["replaced"] or counts["retired"]):
        action = "updated"
    return {"name": suite.name, "uuid": str(suite.uuid), "action": action, "cases": counts}
