"""A run as a JSON file (``manage.py export_run`` / ``import_run``): the committed baseline.

Format ``"assay-run"``, version 1, strict JSON (no NaN/Infinity; costs as decimal strings)::

    {"format": "assay-run", "version": 1,
     "run": {"uuid", "name", "status", "source", "target_kind", "model", "target",
             "graders", "trials_per_case", "source_version", "created_at", "finished_at",
             "suite": {"name", "kind"}},
     "judge_versions": {"<uuid>": {"judge", "judge_kind", "number", "model", "protocol",
                                   "prompt_template", "params", "output_schema",
                                   "threshold", "content_hash", "trusted"}},
     "cases": [{"key", "content_hash", "input", "expected", "context", "tags",
                "goal_state"?,
                "trials": [{"attempt", "status", "output", "error_message", "latency_ms",
                            "input_tokens", "output_tokens", "cost_usd", "created_at",
                            "trajectory"?, "final_state"?,
                            "grades": [{"grader", "grader_version", "status", "passed",
                                        "score", "reason", "details", "gating",
                                        "judge_version"}]}]}]}

Lossless for what the run report and a comparison read. ``--no-outputs`` leaves out output
text, ``trajectory`` and ``final_state``. ``goal_state`` is case content (in its
``content_hash``), always written when set; ``?`` keys are written only when set. Steps and
states are read back by ``evals.trajectory.steps``, a bad step refused naming it
(``cases[0].trials[1].trajectory[3].arguments``).
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core import bounds
from core.decimals import decimal_plain
from core.errors import DomainError, value_shown
from core.ids import uuid_parse
from core.text import unstorable_refuse
from evals.blindness import GOLD_GRADER, grades_visible_to, sees_everything
from evals.cases import CaseSpec, cases_upsert, context_problem, size_problem, tags_problem
from evals.comparison.run_data import RUN_FILE_FORMAT
from evals.models import Case, Grade, Run, Suite, Trial, content_hash, grade_skipped_placeholder
from evals.trajectory.steps import final_state_parse, trajectory_parse
from interop.importers.context import run_finish
from interop.importers.reader import TIME_RANGE, time_check
from judges.models import Judge, JudgeVersion
from judges.models.versions import judge_version_hash

BATCH = 1000
# A trial's status in a run file: finished (ok, error) or cancelled; queued and running
# trials have not finished and are refused.
UNFINISHED = (Trial.Status.QUEUED, Trial.Status.RUNNING)
FINISHED_OR_CANCELLED = tuple(s for s in Trial.Status.values if s not in UNFINISHED)


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def run_export(*, run: Run, outputs: bool = True, viewer=None) -> dict[str, Any]:
    """The run as a strict-JSON-safe dict in the ``assay-run`` format. With ``viewer`` only the
    grades they may see (``evals.blindness``); None (command line) writes all. Four queries,
    five with a viewer. Long by design: one pass writing the fields in the format's order."""
    suite = run.suite
    fields = [
        "id",
        "case_id",
        "attempt",
        "status",
        "error_message",
        "latency_ms",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "created_at",
        "top_up_round",
        "replaced_by",
    ]
    trials = Trial.objects.filter(run=run).order_by("case_id", "attempt")
    trials = trials.only(*fields, *(["output", "trajectory", "final_state"] if outputs else []))
    grades: dict[int, list[dict]] = {}
    judge_versions: dict[str, dict] = {}
    run_grades: QuerySet[Grade] = Grade.objects.filter(trial__run=run)
    # A gold grade's details hold the imported label (its critique): never a reviewer's to
    # read (evals.blindness, rule 2), whatever their sets.
    gold_details = viewer is None or sees_everything(viewer)
    if viewer is not None:
        run_grades = grades_visible_to(run_grades, viewer)
    for g in run_grades.select_related("judge_version__judge").order_by("trial_id", "grader"):
        ref = None
        if g.judge_version is not None:
            jv = g.judge_version
            ref = str(jv.uuid)
            if ref not in judge_versions:
                judge_versions[ref] = {
                    "judge": jv.judge.name,
                    "judge_kind": jv.judge.kind,
                    "number": jv.number,
                    "model": jv.model,
                    "protocol": jv.protocol,
                    "base_url": jv.base_url,
                    "prompt_template": jv.prompt_template,
                    "params": jv.params,
                    "output_schema": jv.output_schema,
                    "threshold": jv.threshold,
                    "content_hash": jv.content_hash,
                    "trusted": jv.is_trusted,
                }
        grades.setdefault(g.trial_id, []).append(
            {
                "grader": g.grader,
                "grader_version": g.grader_version,
                "status": g.status,
                "passed": g.passed,
                "score": g.score,
                "reason": g.reason,
                "details": g.details if gold_details or g.grader != GOLD_GRADER else {},
                "gating": g.gating,
                "judge_version": ref,
            }
        )
    by_case: dict[int, list[dict]] = {}
    for t in trials.iterator(chunk_size=2000):
        by_case.setdefault(t.case_id, []).append(
            {
                "attempt": t.attempt,
                "status": t.status,
                **({"top_up_round": t.top_up_round} if t.top_up_round is not None else {}),
                **({"replaced": True} if t.replaced_by_id is not None else {}),
                **({"output": t.output} if outputs else {}),
                "error_message": t.error_message,
                "latency_ms": t.latency_ms,
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "cost_usd": decimal_plain(t.cost_usd) if t.cost_usd is not None else None,
                "created_at": _iso(t.created_at),
                **({"trajectory": t.trajectory} if outputs and t.trajectory is not None else {}),
                **({"final_state": t.final_state} if outputs and t.final_state is not None else {}),
                "grades": grades.get(t.id, []),
            }
        )
    cases = [
        {
            "key": c.key,
            "content_hash": c.content_hash,
            "input": c.input,
            "expected": c.expected,
            "context": c.context,
            "tags": c.tags,
            **({"goal_state": c.goal_state} if c.goal_state is not None else {}),
            "trials": by_case[c.id],
        }
        for c in Case.objects.filter(id__in=list(by_case)).order_by("key", "id")
    ]
    return {
        "format": RUN_FILE_FORMAT,
        "version": 1,
        "run": {
            "uuid": str(run.uuid),
            "name": run.name,
            "status": run.status,
            "source": run.source,
            "target_kind": run.target_kind,
            "model": run.model,
            "target": run.target,
            "graders": _graders_named(run.graders),
            "trials_per_case": run.trials_per_case,
            "source_version": run.source_version,
            "created_at": _iso(run.created_at),
            "finished_at": _iso(run.finished_at),
            "suite": {"name": suite.name, "kind": suite.kind},
        },
        "judge_versions": judge_versions,
        "cases": cases,
    }


def _graders_named(graders: Any) -> Any:
    """The stored grader set, each judge grader also naming its version by ``judge`` and
    ``judge_number``, so it resolves where the version has another UUID. One query."""
    if not isinstance(graders, list):
        return graders
    refs = [
        uuid_parse(g["config"].get("judge_version"))
        for g in graders
        if isinstance(g, dict) and isinstance(g.get("config"), dict)
    ]
    versions = {
        str(v.uuid): v
        for v in JudgeVersion.objects.filter(uuid__in=[r for r in refs if r is not None])
        .select_related("judge")
        .only("uuid", "number", "judge__name")
    }
    out = []
    for g in graders:
        ref = g.get("config", {}).get("judge_version") if isinstance(g, dict) else None
        version = versions.get(str(uuid_parse(ref))) if isinstance(ref, str) else None
        if version is not None:
            config = {**g["config"], "judge": version.judge.name, "judge_number": version.number}
            g = {**g, "config": config}
        out.append(g)
    return out


def run_export_json(*, run: Run, outputs: bool = True, viewer=None) -> str:
    """``run_export`` as strict JSON text (``allow_nan=False``: a non-finite number raises)."""
    return json.dumps(
        run_export(run=run, outputs=outputs, viewer=viewer),
        allow_nan=False,
        ensure_ascii=False,
        indent=1,
    )


def _need(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise DomainError(f"missing field {key!r}", field=f"{where}")
    return obj[key]


def _when(value: Any, where: str):
    """An ISO 8601 time with an offset, in UTC, within ``reader.time_check``'s years; else
    ``DomainError`` naming ``where``."""
    if value is None:
        return None
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:  # well formed but not a date (2025-02-30)
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise DomainError(f"{value!r} is not an ISO 8601 time with an offset", field=f"{where}")
    utc = time_check(parsed)
    if utc is None:
        raise DomainError(
            f"{value!r} is outside the supported range: a time {TIME_RANGE}", field=f"{where}"
        )
    return utc


def _judge_versions(data: dict) -> dict[str, JudgeVersion]:
    """The file's judge versions matched by (judge name, content hash); missing ones created
    untrusted (trust is never imported), under the file's UUID and number when free."""
    out = {}
    for ref, spec in (data.get("judge_versions") or {}).items():
        where = f"judge_versions[{ref}]"
        judge, _ = Judge.objects.get_or_create(
            name=_need(spec, "judge", where),
            defaults={"kind": spec.get("judge_kind") or Judge.Kind.RECORDED},
        )
        candidate = JudgeVersion(
            judge=judge,
            number=0,
            model=_need(spec, "model", where),
            protocol=spec.get("protocol", ""),
            base_url=spec.get("base_url", ""),
            prompt_template=spec.get("prompt_template", ""),
            params=spec.get("params") or {},
            output_schema=spec.get("output_schema") or {},
            threshold=spec.get("threshold"),
        )

        digest = judge_version_hash(
            model=candidate.model,
            protocol=candidate.protocol,
            prompt_template=candidate.prompt_template,
            params=candidate.params,
            output_schema=candidate.output_schema,
            threshold=candidate.threshold,
            base_url=candidate.base_url,
        )
        version = JudgeVersion.objects.filter(judge=judge, content_hash=digest).first()
        if version is None:
            numbers = set(judge.versions.values_list("number", flat=True))
            wanted = int(spec.get("number") or 1)
            candidate.number = wanted if wanted not in numbers else max(numbers) + 1
            # The file's UUID and number when free here, so a grader set naming the version
            # either way (as the file's run does) resolves to it after the import.
            same = uuid_parse(ref)
            if same is not None and not JudgeVersion.objects.filter(uuid=same).exists():
                candidate.uuid = same
            candidate.save()
            version = candidate
        out[ref] = version
    return out


def _cases(suite: Suite, cases: list, retired: list[Case] | None = None, by=None) -> list[Case]:
    """Each file case as a case of ``suite``: one with the same key and content (active or
    retired) is reused, else ``cases_upsert`` creates it."""
    specs = []
    for i, c in enumerate(cases):
        where = f"cases[{i}]"
        key = _need(c, "key", where)
        if not isinstance(key, str) or not key:
            raise DomainError(
                f"expected a non-empty string, got {value_shown(key)}",
                field=f"{where}.key",
            )
        spec = CaseSpec(
            key=key,
            input=_need(c, "input", where),
            expected=c.get("expected"),
            context=c.get("context") or [],
            tags=c.get("tags") or [],
            goal_state=final_state_parse(c.get("goal_state"), field=f"{where}.goal_state"),
        )
        for name, problem in (
            ("context", context_problem(spec.context)),
            ("tags", tags_problem(spec.tags)),
        ):
            if problem is not None:  # the rule of every path that writes a case
                path, message = problem
                raise DomainError(message, field=f"{where}.{name}{path}")
        problem = size_problem(spec)
        if problem is not None:
            name, message = problem
            raise DomainError(message, field=f"{where}.{name}", code="too_large")
        if c.get("content_hash") and c["content_hash"] != content_hash(
            input=spec.input,
            expected=spec.expected,
            context=spec.context,
            goal_state=spec.goal_state,
        ):
            raise DomainError("does not match the case's content", field=f"{where}.content_hash")
        specs.append(spec)
    existing: dict[tuple[str, str], Case] = {}
    for c in Case.objects.filter(suite=suite, key__in=[s.key for s in specs]).order_by("id"):
        old = existing.get((c.key, c.content_hash))
        if old is None or (old.retired_at is not None and c.retired_at is None):
            existing[(c.key, c.content_hash)] = c  # the active one wins, else the oldest
    missing = [s for s in specs if (s.key, s.content_hash) not in existing]
    created = (
        cases_upsert(suite=suite, specs=missing, retired=retired, by=by, via="import")
        if missing
        else {}
    )
    return [existing.get((s.key, s.content_hash)) or created[s.key] for s in specs]


def _decimal(value: Any, where: str) -> Decimal | None:
    if value is None:
        return None
    try:
        out = Decimal(str(value))
    except InvalidOperation as exc:
        raise DomainError(f"{value!r} is not a decimal", field=f"{where}") from exc
    if not out.is_finite():
        raise DomainError(f"{value!r} is not finite", field=f"{where}")
    problem = bounds.cost_problem(out)
    if problem:
        raise DomainError(problem, field=where)
    return out


def _count(t: dict, key: str, where: str, *, minimum: int = 0) -> int | None:
    """A trial's whole number ``key`` (tokens, attempt) within ``core.bounds``, or None."""
    value = t.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DomainError(
            f"expected a whole number, got {value_shown(value)}", field=f"{where}.{key}"
        )
    problem = bounds.count_problem(value, minimum=minimum)
    if problem:
        raise DomainError(problem, field=f"{where}.{key}")
    return value


def _latency(t: dict, where: str) -> float | None:
    value = t.get("latency_ms")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DomainError(
            f"expected a number of ms, got {value_shown(value)}", field=f"{where}.latency_ms"
        )
    problem = bounds.latency_problem(value)
    if problem:
        raise DomainError(problem, field=f"{where}.latency_ms")
    return float(value)


@transaction.atomic
def run_import(
    *,
    data: dict,
    suite_name: str | None = None,
    name: str | None = None,
    by=None,
    retired: list[str] | None = None,
) -> Run:
    """Write a run file's run into the database, all or nothing; returns the new ``Run`` (source
    "imported"). The suite is ``suite_name`` or the file's; the name ``name`` or the file's. A
    case retired by new content for its key is added to ``retired`` when given.

    Raises ``DomainError`` naming the field: wrong format or version, a missing field, a
    content hash not matching its case, a run name taken, a non-terminal run or trial status,
    a bad time or cost, unstorable text (``core.text``), context or tags the case rule refuses,
    an unknown grade status, a trial that is not ok with a passing grade.
    Long by design: one transaction whose steps share their lookups."""
    if not isinstance(data, dict) or data.get("format") != RUN_FILE_FORMAT:
        raise DomainError(f"expected {RUN_FILE_FORMAT!r}", field="format")
    if data.get("version") != 1:
        raise DomainError(f"{data.get('version')!r} is not supported (1)", field="version")
    unstorable_refuse(data)
    meta = _need(data, "run", "file")
    suite_meta = _need(meta, "suite", "run")
    status = _need(meta, "status", "run")
    if status not in Run.TERMINAL:
        raise DomainError(f"{status!r} is not a finished status", field="run.status")
    suite, _ = Suite.objects.get_or_create(
        name=suite_name or _need(suite_meta, "name", "run.suite"),
        defaults={"kind": suite_meta.get("kind", Suite.Kind.REGRESSION)},
    )
    run_name = name or _need(meta, "name", "run")
    if Run.objects.filter(suite=suite, name=run_name).exists():
        raise DomainError(
            f"{run_name!r} already exists in suite {suite.name!r}; give another with --name",
            field="run.name",
        )
    versions = _judge_versions(data)
    file_cases = _need(data, "cases", "file")
    retired_cases: list[Case] = []
    cases = _cases(suite, file_cases, retired_cases, by)
    if retired is not None:
        retired.extend(c.key for c in retired_cases)
    user = by if by is not None and getattr(by, "is_authenticated", False) else None
    run = Run.objects.create(
        suite=suite,
        name=run_name,
        source=Run.Source.IMPORTED,
        target_kind=meta.get("target_kind") or "imported",
        model=meta.get("model") or "",
        target=meta.get("target") or {},
        graders=meta.get("graders") or [],
        source_version=meta.get("source_version") or "",
        trials_per_case=int(meta.get("trials_per_case") or 1),
        status=status,
        started_at=timezone.now(),
        finished_at=_when(meta.get("finished_at"), "run.finished_at"),
        started_by=user,
    )
    trials, grade_specs = [], []
    for i, (case, c) in enumerate(zip(cases, file_cases, strict=True)):
        for j, t in enumerate(c.get("trials") or []):
            where = f"cases[{i}].trials[{j}]"
            if t.get("replaced"):
                continue  # a retried attempt: history of the source database, not data
            status = _need(t, "status", where)
            if status not in Trial.Status.values or status in UNFINISHED:
                raise DomainError(
                    f"expected one of {', '.join(FINISHED_OR_CANCELLED)}, "
                    f"got {value_shown(status)}",
                    field=f"{where}.status",
                )
            round_ = t.get("top_up_round")
            if round_ is not None and (isinstance(round_, bool) or not isinstance(round_, int)):
                raise DomainError("expected a whole number or null", field=f"{where}.top_up_round")
            attempt = _count({"attempt": _need(t, "attempt", where)}, "attempt", where, minimum=1)
            if attempt is None:  # present but null: the column is not null
                raise DomainError("expected a whole number, got null", field=f"{where}.attempt")
            trials.append(
                Trial(
                    run=run,
                    case=case,
                    attempt=attempt,
                    status=status,
                    output=t.get("output") or "",
                    error_message=t.get("error_message") or "",
                    latency_ms=_latency(t, where),
                    input_tokens=_count(t, "input_tokens", where),
                    output_tokens=_count(t, "output_tokens", where),
                    cost_usd=_decimal(t.get("cost_usd"), f"{where}.cost_usd"),
                    trajectory=trajectory_parse(t.get("trajectory"), field=f"{where}.trajectory"),
                    final_state=final_state_parse(
                        t.get("final_state"), field=f"{where}.final_state"
                    ),
                    created_at=_when(t.get("created_at"), f"{where}.created_at") or timezone.now(),
                    # A comparison's top-up trials stay out of later comparisons' looks.
                    top_up_round=round_,
                )
            )
            grade_specs.append((where, t.get("grades") or []))
    Trial.objects.bulk_create(trials, batch_size=BATCH)
    grades = []
    for trial, (where, specs) in zip(trials, grade_specs, strict=True):
        for k, g in enumerate(specs):
            ref = g.get("judge_version")
            if ref is not None and ref not in versions:
                raise DomainError(
                    f"{ref!r} is not in judge_versions", field=f"{where}.grades[{k}].judge_version"
                )
            status, passed, score = g.get("status", "ok"), g.get("passed"), g.get("score")
            if status not in Grade.Status.values:
                raise DomainError(
                    f"expected one of {', '.join(Grade.Status.values)}, got {value_shown(status)}",
                    field=f"{where}.grades[{k}].status",
                )
            if passed is not None and not isinstance(passed, bool):
                raise DomainError(
                    f"expected true, false or null, got {value_shown(passed)}",
                    field=f"{where}.grades[{k}].passed",
                )
            if passed and trial.status != Trial.Status.OK:  # a failed pipeline never passes
                raise DomainError(
                    f"a trial with status {trial.status!r} is never graded passed",
                    field=f"{where}.grades[{k}].passed",
                )
            if ref and status == Grade.Status.OK and grade_skipped_placeholder(g):
                status, passed, score = Grade.Status.NOT_JUDGED, None, None
            grades.append(
                Grade(
                    trial=trial,
                    grader=_need(g, "grader", f"{where}.grades[{k}]"),
                    grader_version=g.get("grader_version") or "",
                    judge_version=versions.get(ref) if ref else None,
                    status=status,
                    passed=passed,
                    score=score,
                    reason=g.get("reason") or "",
                    details=g.get("details") or {},
                    gating=bool(g.get("gating", True)),
                )
            )
    Grade.objects.bulk_create(grades, batch_size=BATCH)
    # The import's one closing rule (counts, partial, what went wrong), the file's status.
    run_finish(
        run,
        trials=sum(t.status in Trial.FINISHED for t in trials),
        errored=sum(t.status == Trial.Status.ERROR for t in trials),
        cancelled=sum(t.status == Trial.Status.CANCELLED for t in trials),
        trials_per_case=run.trials_per_case,
        planned=max(len(trials), len(file_cases) * run.trials_per_case),
        status=run.status,  # the file's (``status`` names a grade's by now)
    )
    return run
