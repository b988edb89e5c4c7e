"""Writing cases into a suite: a case is frozen, so a change of content is a new case.

``case_upsert`` / ``cases_upsert`` are the one place that decides between reusing, creating
and replacing a case; imports, the API and the suite editor all call them.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.bounds import TEXT_MAX_CHARS, text_problem
from core.db import rows_insert
from core.errors import DomainError
from core.ids import uuid4_many
from core.text import UNSTORABLE, contains_unstorable, unstorable_path
from evals.models import Case, CaseChange, Graduation, Suite, content_hash, input_hash


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
    *,
    suite: Suite,
    specs: list[CaseSpec],
    retired: list[Case] | None = None,
    by=None,
    via: str = "",
    source_trial=None,
    renamed: dict[str, Case] | None = None,
) -> dict[str, Case]:
    """Make each spec an active case of ``suite``; returns key -> Case.

    Per key: none active -> create; same content hash -> reuse (a frozen case keeps its first
    tags); other content -> retire the old (``replaced_by``) and create. ``renamed`` (new key ->
    an active case under another key) retires that case too. ``ValueError`` for a key twice in
    ``specs``. Every creation is a ``CaseChange`` with ``by``, ``via`` and ``source_trial``.
    Four to seven queries whatever the number of specs, in the caller's transaction.
    ``retired`` receives every case retired, so no case is retired silently. Long: one batched
    pass reads, retires, inserts and records."""
    keys = [s.key for s in specs]
    if len(set(keys)) != len(keys):
        raise ValueError("cases_upsert: duplicate keys in one call")
    existing = {c.key: c for c in Case.objects.active().filter(suite=suite, key__in=keys)}
    renamed = renamed or {}
    result: dict[str, Case] = {}
    to_create: list[dict[str, Any]] = []  # rows of the new cases
    to_retire: list[tuple[Case, str]] = []  # (old case, key of the case replacing it)
    now = timezone.now()
    fresh = iter(uuid4_many(len(specs)))  # one os.urandom call for every new case's uuid
    for spec in specs:
        digest = spec.content_hash
        old = existing.get(spec.key)
        if old is not None and old.content_hash == digest:
            result[spec.key] = old
            continue
        to_create.append(
            {
                "uuid": next(fresh),
                "suite_id": suite.id,
                "key": spec.key,
                "input": spec.input,
                "expected": spec.expected,
                "context": spec.context,
                "tags": spec.tags,
                "goal_state": spec.goal_state,
                "content_hash": digest,
                "input_hash": input_hash(input=spec.input, context=spec.context),
                "created_at": now,
                "retired_at": None,
                "replaced_by_id": None,
            }
        )
        old = old if old is not None else renamed.get(spec.key)
        if old is not None:
            to_retire.append((old, spec.key))
    with transaction.atomic():
        if to_retire:
            # Retire first: the active key is unique, so the new case cannot coexist with it.
            Case.objects.filter(id__in=[old.id for old, _ in to_retire]).update(retired_at=now)
        # Plain rows (COPY on PostgreSQL), ids read back by the active key: an import
        # creates thousands of cases at once.
        result.update(_cases_insert(suite, to_create))
        if to_retire:
            for old, key in to_retire:
                old.retired_at = now
                old.replaced_by = result[key]
            Case.objects.bulk_update([old for old, _ in to_retire], ["replaced_by"])
        previous = {key: old for old, key in to_retire}
        # Plain rows too (a fixed number of queries whatever the number of cases).
        rows_insert(
            CaseChange,
            [
                _change_row(
                    result[row["key"]], previous.get(row["key"]), by, via, source_trial, now, ident
                )
                for row, ident in zip(to_create, uuid4_many(len(to_create)), strict=True)
            ],
        )
    if retired is not None:
        retired.extend(old for old, _ in to_retire)
    return result


# Case's columns in the order of its constructor's positional arguments (``Model.__init__``
# takes them ~40% faster than keywords: an import builds thousands at once).
_CASE_NAMES = [f.attname for f in Case._meta.concrete_fields]
_CASE_SUITE = Case._meta.get_field("suite")


def _cases_insert(suite: Suite, rows: list[dict[str, Any]]) -> dict[str, Case]:
    """Insert new cases' rows (``rows_insert``), read their ids back by the active key, and
    return key -> the saved ``Case`` (its suite cached, as ``Case(suite=...)`` would)."""
    if not rows:
        return {}
    rows_insert(Case, rows)
    ids = dict(
        Case.objects.active()
        .filter(suite=suite, key__in=[row["key"] for row in rows])
        .values_list("key", "id")
    )
    db = Case.objects.db
    out: dict[str, Case] = {}
    for row in rows:
        row["id"] = ids[row["key"]]
        case = Case.from_db(db, _CASE_NAMES, [row[name] for name in _CASE_NAMES])
        _CASE_SUITE.set_cached_value(case, suite)
        out[case.key] = case
    return out


def _change_row(
    new: Case, old: Case | None, by, via: str, source_trial, at, ident: uuid.UUID | None = None
) -> dict[str, Any]:
    """The ``CaseChange`` row for ``new`` (replacing ``old``); ``ident`` its uuid (None: fresh)."""
    details = {"key": [old.key, new.key]} if old is not None and old.key != new.key else {}
    return {
        "uuid": ident if ident is not None else uuid.uuid4(),
        "suite_id": new.suite_id,
        "case_id": new.id,
        "previous_id": old.id if old is not None else None,
        "action": CaseChange.Action.REPLACED if old is not None else CaseChange.Action.CREATED,
        "via": via[:40],
        "by_id": by.pk if by is not None and getattr(by, "is_authenticated", False) else None,
        "at": at,
        "source_trial_id": source_trial.pk if source_trial is not None else None,
        "details": details,
    }


def case_upsert(
    *,
    suite: Suite,
    key: str,
    input: Any,
    expected: Any = None,
    context: list[dict] | None = None,
    tags: list[str] | None = None,
    goal_state: Any = None,
    by=None,
    via: str = "",
) -> Case:
    """Reuse, create or replace one case (rules of ``cases_upsert``); returns the active case."""
    spec = CaseSpec(
        key=key,
        input=input,
        expected=expected,
        context=context or [],
        tags=tags or [],
        goal_state=goal_state,
    )
    return cases_upsert(suite=suite, specs=[spec], by=by, via=via)[key]


def case_graduate(*, case: Case, into_suite: Suite, by=None):
    """Copy a capability case into a regression suite and record a ``Graduation`` (with the runs it
    passed). Idempotent: graduating twice reuses the copy.

    Raises ``DomainError`` when ``case`` is retired or not in a capability suite, ``into_suite``
    is not a regression suite, the case is not a graduation candidate
    (``evals.suites.graduation_candidates``), or ``into_suite`` holds other content under its key.
    """
    if case.suite.kind != Suite.Kind.CAPABILITY:
        raise DomainError(f"{case.key!r} is not in a capability suite", field="case")
    if case.retired_at is not None:
        raise DomainError(f"{case.key!r} is retired", field="case")
    if into_suite.kind != Suite.Kind.REGRESSION:
        raise DomainError(f"{into_suite.name!r} is not a regression suite", field="into_suite")
    # evals.suites reads runs with numpy and stats: imported here, not by every process
    # that imports cases (the admin's autodiscovery at start-up).
    from evals.suites import graduation_candidates  # noqa: PLC0415

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
            goal_state=case.goal_state,
            by=by,
            via="graduation",
        )
        graduation, _ = Graduation.objects.get_or_create(
            case=case,
            regression_case=copy,
            defaults={"by": by, "evidence": {"runs": candidate.evidence}},
        )
    return graduation


SUITE_FIELDS = {"description", "kind", "cases", "cases_file", "retire_missing"}
CASE_FIELDS = {"key", "input", "expected", "context", "tags", "goal_state"}
KEY_MAX_CHARS = 200
TAG_MAX_CHARS = 100
TAGS_MAX = 50
# A case field (input, expected, context, goal_state) as compact JSON, at most this many
# characters: a golden case is a question and its answer, not a data dump.
FIELD_MAX_CHARS = TEXT_MAX_CHARS["case.field"]


def _non_finite_path(value: Any, path: str) -> str | None:
    """Where the first NaN or Infinity float sits in a parsed value (None when none)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return where
        if isinstance(node, dict):
            stack.extend((v, f"{where}.{k}") for k, v in node.items())
        elif isinstance(node, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
    return None


CONTEXT_DOCUMENT = '{"id": "doc-1", "text": "..."}'


def json_kind(value: object) -> str:
    """``value``'s JSON kind for a message: "a string", "a number (1)", "null", "a list", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{'true' if value else 'false'} (a boolean)"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def context_problem(context: object) -> tuple[str, str] | None:
    """``(path, message)`` of the first wrong part of a case's ``context`` (a list of
    ``{"id": str, "text": str}``), e.g. ``("[1].id", "expected a string, got a number (1)")``;
    None when nothing is."""
    if not isinstance(context, list):
        return (
            "",
            f"expected a list of documents like [{CONTEXT_DOCUMENT}], got {json_kind(context)}",
        )
    for i, doc in enumerate(context):
        if not isinstance(doc, dict):
            return f"[{i}]", f"expected a document {CONTEXT_DOCUMENT}, got {json_kind(doc)}"
        unknown = sorted(set(doc) - {"id", "text"})
        if unknown:
            return (
                f"[{i}].{unknown[0]}",
                'unknown field: a document has only "id" and "text"',
            )
        missing = [name for name in ("id", "text") if name not in doc]
        if missing:
            return (
                f"[{i}]",
                f'missing "{missing[0]}": a document is {CONTEXT_DOCUMENT}',
            )
        for name in ("id", "text"):
            if not isinstance(doc[name], str):
                return f"[{i}].{name}", f"expected a string, got {json_kind(doc[name])}"
    seen: dict[str, int] = {}
    for i, doc in enumerate(context):
        first = seen.setdefault(doc["id"], i)
        if first != i:
            return (
                f"[{i}].id",
                f"{_short(doc['id'])} is already the id of context[{first}]: each document's "
                "id once",
            )
    return None


def tags_problem(tags: object) -> tuple[str, str] | None:
    """``(path, message)`` of the first wrong part of a case's ``tags`` (at most ``TAGS_MAX``
    distinct non-empty strings of at most ``TAG_MAX_CHARS``), "" for the list, "[3]" for an item;
    None when nothing is."""
    if not isinstance(tags, list):
        return "", f"expected a list of non-empty strings, got {json_kind(tags)}"
    if len(tags) > TAGS_MAX:
        return "", f"at most {TAGS_MAX} tags, got {len(tags)}"
    seen: dict[str, int] = {}
    for i, tag in enumerate(tags):
        if not isinstance(tag, str) or not tag.strip():
            what = "an empty string" if isinstance(tag, str) else json_kind(tag)
            return f"[{i}]", f"expected a non-empty string, got {what}"
        if len(tag) > TAG_MAX_CHARS:
            return f"[{i}]", f"a tag is at most {TAG_MAX_CHARS} characters, got {len(tag)}"
        first = seen.setdefault(tag, i)
        if first != i:
            return f"[{i}]", f"{_short(tag)} is already tags[{first}]: each tag once"
    return None


def _short(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def case_spec_check(spec: CaseSpec, *, where: str = "") -> CaseSpec:
    """Check a case's content, the same rules on every path: ``key`` non-empty, at most
    ``KEY_MAX_CHARS``, no surrounding spaces; ``input`` a string or JSON object; ``context``
    (``context_problem``); ``tags`` (``tags_problem``); no NaN, Infinity, U+0000 or lone
    surrogate anywhere; each field at most ``FIELD_MAX_CHARS`` as compact JSON (``too_large``).
    Returns ``spec``; raises ``DomainError`` naming ``<where>.<field>`` down to the part at fault
    (``context[1].id``, ``tags[3]``)."""

    def f(name: str) -> str:
        return f"{where}.{name}" if where else name

    key = spec.key
    if not isinstance(key, str) or not key.strip():
        raise DomainError("required, a non-empty string", field=f("key"))
    if len(key) > KEY_MAX_CHARS:
        raise DomainError(f"longer than {KEY_MAX_CHARS} characters ({len(key)})", field=f("key"))
    if key != key.strip():
        raise DomainError("no spaces before or after a key", field=f("key"))
    if not isinstance(spec.input, str | dict):
        raise DomainError(
            f"required: a string or an object, got {json_kind(spec.input)}", field=f("input")
        )
    problem = context_problem(spec.context)
    if problem is not None:
        path, message = problem
        raise DomainError(message, field=f(f"context{path}"))
    problem = tags_problem(spec.tags)
    if problem is not None:
        path, message = problem
        raise DomainError(message, field=f(f"tags{path}"))
    for name in ("key", "input", "expected", "context", "tags", "goal_state"):
        value = getattr(spec, name)
        found = unstorable_path(value, f(name))
        if found is not None:  # the path down to the string: ``context[0].text``
            raise DomainError(UNSTORABLE, field=found)
        bad = _non_finite_path(value, f(name))
        if bad is not None:
            raise DomainError("NaN and Infinity are not valid JSON: give a number", field=bad)
    problem = size_problem(spec)
    if problem is not None:
        name, message = problem
        raise DomainError(message, field=f(name), code="too_large")
    return spec


# A string of at most this many characters is at most FIELD_MAX_CHARS as JSON (each
# character at most 6, ``\u001f``, plus the 2 quotes): no need to write it out to know.
_SURELY_SMALL = (FIELD_MAX_CHARS - 2) // 6


def size_problem(spec: CaseSpec) -> tuple[str, str] | None:
    """``(field, message)`` of the first of ``input``, ``expected``, ``context``, ``goal_state``
    longer than ``FIELD_MAX_CHARS`` as compact JSON (code ``too_large`` on every path), or None."""
    for name in ("input", "expected", "context", "goal_state"):
        value = getattr(spec, name)
        if value is None or (type(value) is str and len(value) <= _SURELY_SMALL):
            continue
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        if size > FIELD_MAX_CHARS:
            return name, f"{size:,} characters as JSON; at most {FIELD_MAX_CHARS:,}"
    return None


def case_spec_parse(raw: object, where: str) -> CaseSpec:
    """One case declared in a config file or a cases file: ``{key, input, expected?,
    context?, tags?, goal_state?}``, strictly typed (no coercion), checked by
    ``case_spec_check``. Raises DomainError naming ``<where>.<field>``."""
    if not isinstance(raw, dict):
        raise DomainError("expected a table {key, input, ...}", field=where)
    unknown = sorted(set(raw) - CASE_FIELDS)
    if unknown:
        raise DomainError(
            f"unknown field (known: {sorted(CASE_FIELDS)})", field=f"{where}.{unknown[0]}"
        )
    spec = CaseSpec(
        key=raw.get("key", ""),  # missing: refused as an empty key is ("required, ...")
        input=raw.get("input"),
        expected=raw.get("expected"),
        context=raw.get("context", []),
        tags=raw.get("tags", []),
        goal_state=raw.get("goal_state"),
    )
    return case_spec_check(spec, where=where)


@transaction.atomic
def suite_config_apply(*, name: str, config: dict, cases: list[CaseSpec]) -> dict:
    """Create or update the suite ``name`` from a config file's ``[suites.NAME]`` table and make
    ``cases`` its active cases (``cases_upsert``; new tags on the same content are ``retagged``).
    Active cases the file omits are kept (``not_in_file``) unless ``retire_missing = true``.
    Returns ``{"name", "uuid", "action", "cases": {"created", "unchanged", "retagged",
    "replaced", "retired", "not_in_file"}}``. Raises DomainError naming
    ``suites.<name>.<field>``. Long: the suite, its cases and every count in one transaction."""
    where = f"suites.{name}"
    unknown = sorted(set(config) - SUITE_FIELDS)
    if unknown:
        raise DomainError(
            f"unknown field (known: {sorted(SUITE_FIELDS)})", field=f"{where}.{unknown[0]}"
        )
    description = config.get("description", "")
    if not isinstance(description, str):
        raise DomainError("expected a string", field=f"{where}.description")
    if problem := text_problem(description, "suite.description"):
        raise DomainError(problem, field=f"{where}.description", code="too_large")
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
    after = cases_upsert(suite=suite, specs=cases, via="config")
    counts = {
        "created": 0,
        "unchanged": 0,
        "retagged": 0,
        "replaced": 0,
        "retired": 0,
        "not_in_file": 0,
    }
    tags = {spec.key: list(spec.tags) for spec in cases}
    retag: list[tuple[Case, list, list]] = []
    for key, case in after.items():
        if key not in before:
            counts["created"] += 1
        elif before[key] != case.id:
            counts["replaced"] += 1
        elif list(case.tags or []) != tags[key]:
            # Tags are not content: the case stays, its tags follow the file (recorded).
            retag.append((case, list(case.tags or []), tags[key]))
            counts["retagged"] += 1
        else:
            counts["unchanged"] += 1
    for case, _, new_tags in retag:
        case.tags = new_tags
        Case.objects.filter(id=case.id).update(tags=new_tags)
    CaseChange.objects.bulk_create(
        CaseChange(
            suite=suite,
            case=case,
            action=CaseChange.Action.RETAGGED,
            via="config",
            details={"tags": [old_tags, new_tags]},
        )
        for case, old_tags, new_tags in retag
    )
    missing = [case_id for key, case_id in before.items() if key not in after]
    if missing and retire_missing:
        now = timezone.now()
        Case.objects.filter(id__in=missing).update(retired_at=now)
        CaseChange.objects.bulk_create(
            CaseChange(
                suite=suite, case_id=case_id, action=CaseChange.Action.RETIRED, via="config", at=now
            )
            for case_id in missing
        )
        counts["retired"] = len(missing)
    else:
        counts["not_in_file"] = len(missing)
    if action == "unchanged" and any(
        counts[k] for k in ("created", "retagged", "replaced", "retired")
    ):
        action = "updated"
    return {"name": suite.name, "uuid": str(suite.uuid), "action": action, "cases": counts}
