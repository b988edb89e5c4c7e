"""Writing a run as a run file (``interop.run_file``'s format)."""

from __future__ import annotations

import json
from typing import Any

from django.db.models import QuerySet

from core.decimals import decimal_plain
from core.ids import uuid_parse
from evals.blindness import GOLD_GRADER, grades_visible_to, sees_everything
from evals.comparison.run_data import RUN_FILE_FORMAT
from evals.models import Case, Grade, Run, Trial
from judges.models import JudgeVersion
from providers.usage import EXTRA_TOKEN_FIELDS as EXTRA_TOKEN_CLASSES

# The token classes after input and output (docs/costs.md), written only when known.


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
        *EXTRA_TOKEN_CLASSES,
        "cost_usd",
        "cost_basis",
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
                **{k: getattr(t, k) for k in EXTRA_TOKEN_CLASSES if getattr(t, k) is not None},
                "cost_usd": decimal_plain(t.cost_usd) if t.cost_usd is not None else None,
                **({"cost_basis": t.cost_basis} if t.cost_basis is not None else {}),
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
