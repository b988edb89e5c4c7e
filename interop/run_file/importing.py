"""Reading a run file back into a run: all or nothing (``interop.run_file``'s format)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from core.errors import DomainError, value_shown
from core.ids import uuid_parse
from core.text import unstorable_refuse
from evals.cases import CaseSpec, cases_upsert, context_problem, size_problem, tags_problem
from evals.comparison.run_data import RUN_FILE_FORMAT
from evals.models import Case, Grade, Run, Suite, Trial, content_hash, grade_skipped_placeholder
from evals.trajectory.steps import final_state_parse, trajectory_parse
from interop.importers.context import run_finish
from interop.run_file.fields import (
    _cost_basis,
    _count,
    _decimal,
    _details,
    _flag,
    _grader,
    _latency,
    _need,
    _objects,
    _score,
    _text,
    _when,
    target_check,
)
from judges.models import Judge, JudgeVersion
from judges.models.versions import judge_version_hash

BATCH = 1000
# A trial's status in a run file: finished (ok, error) or cancelled; queued and running
# trials have not finished and are refused.
UNFINISHED = (Trial.Status.QUEUED, Trial.Status.RUNNING)
FINISHED_OR_CANCELLED = tuple(s for s in Trial.Status.values if s not in UNFINISHED)


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
    a bad time, token count, cost or cost basis, unstorable text (``core.text``), context or
    tags the case rule refuses, an unknown grade status, a trial that is not ok with a
    passing grade.
    Long by design: one transaction whose steps share their lookups."""
    if not isinstance(data, dict) or data.get("format") != RUN_FILE_FORMAT:
        raise DomainError(f"expected {RUN_FILE_FORMAT!r}", field="format")
    if data.get("version") != 1:
        raise DomainError(f"{data.get('version')!r} is not supported (1)", field="version")
    unstorable_refuse(data)
    meta = _need(data, "run", "file")
    if not isinstance(meta, dict):
        raise DomainError(f"expected an object, got {value_shown(meta)}", field="run")
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
    file_cases = _objects(_need(data, "cases", "file"), "cases")
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
        target=target_check(meta.get("target")),
        graders=meta.get("graders") or [],
        source_version=meta.get("source_version") or "",
        trials_per_case=_count(meta, "trials_per_case", "run", minimum=1) or 1,
        status=status,
        started_at=timezone.now(),
        finished_at=_when(meta.get("finished_at"), "run.finished_at"),
        started_by=user,
    )
    trials, grade_specs = [], []
    for i, (case, c) in enumerate(zip(cases, file_cases, strict=True)):
        attempts: dict[int, str] = {}  # attempt -> where it was first given, per case
        for j, t in enumerate(_objects(c.get("trials"), f"cases[{i}].trials")):
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
            if attempt in attempts:
                raise DomainError(
                    f"attempt {attempt} of this case is already {attempts[attempt]}",
                    field=f"{where}.attempt",
                )
            attempts[attempt] = where
            trials.append(
                Trial(
                    run=run,
                    case=case,
                    attempt=attempt,
                    status=status,
                    output=_text(t, "output", where),
                    error_message=_text(t, "error_message", where),
                    latency_ms=_latency(t, where),
                    input_tokens=_count(t, "input_tokens", where),
                    output_tokens=_count(t, "output_tokens", where),
                    cache_write_tokens=_count(t, "cache_write_tokens", where),
                    cache_read_tokens=_count(t, "cache_read_tokens", where),
                    reasoning_tokens=_count(t, "reasoning_tokens", where),
                    cost_usd=_decimal(t.get("cost_usd"), f"{where}.cost_usd"),
                    cost_basis=_cost_basis(t, where),
                    trajectory=trajectory_parse(t.get("trajectory"), field=f"{where}.trajectory"),
                    final_state=final_state_parse(
                        t.get("final_state"), field=f"{where}.final_state"
                    ),
                    created_at=_when(t.get("created_at"), f"{where}.created_at") or timezone.now(),
                    # A comparison's top-up trials stay out of later comparisons' looks.
                    top_up_round=round_,
                )
            )
            grade_specs.append((where, _objects(t.get("grades"), f"{where}.grades")))
    Trial.objects.bulk_create(trials, batch_size=BATCH)
    grades = []
    for trial, (where, specs) in zip(trials, grade_specs, strict=True):
        for k, g in enumerate(specs):
            ref = g.get("judge_version")
            if ref is not None and ref not in versions:
                raise DomainError(
                    f"{ref!r} is not in judge_versions", field=f"{where}.grades[{k}].judge_version"
                )
            at = f"{where}.grades[{k}]"
            status, passed, score = g.get("status", "ok"), g.get("passed"), _score(g, at)
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
                    grader=_grader(g, at),
                    grader_version=_text(g, "grader_version", at),
                    judge_version=versions.get(ref) if ref else None,
                    status=status,
                    passed=passed,
                    score=score,
                    reason=_text(g, "reason", at),
                    details=_details(g, at),
                    gating=_flag(g, "gating", at, default=True),
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
