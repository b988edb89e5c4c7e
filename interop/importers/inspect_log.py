"""Inspect AI eval logs in JSON (``inspect eval ... --log-format json``) as one run: one trial
per sample and epoch. The field mapping and the score table: docs/interop.md, "Inspect AI:
field mapping" (tested against inspect-ai 0.3.285, tests/fixtures/interop).

Rules a reader of this code must know: a binary ``.eval`` log, a log still ``started`` and
one without samples are refused; an ``error`` or a ``limit`` makes an errored trial, never a
fail (a limit's message starts with ``evals.trajectory.limits``' kind; scores kept only in
``raw_response``); a score Inspect cannot compute is an errored grade, never 0, and only
full credit (1) passes; the headline scorer's grades gate, so with C/I scores the pass rate
equals Inspect's accuracy. Agent samples: ``interop.importers.inspect_trajectory``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from typing import Any

from core.bounds import count_problem
from core.errors import DomainError
from core.strict_json import NON_FINITE
from evals.cases import CaseSpec
from evals.grading.grader_set import IMPORTED_KIND
from evals.trajectory.limits import INSPECT_LIMITS, OTHER_CAP, limit_error
from interop.importers.context import ImportContext
from interop.importers.harness import (
    GradeIn,
    TrialIn,
    as_dict,
    as_list,
    as_str,
    case_key_check,
    case_size_check_at,
    check_finite,
    cost_check,
    fail,
    json_clean,
    need,
    opt_count,
    opt_latency_ms,
    show,
    trials_store,
)
from interop.importers.inspect_trajectory import (
    sample_final_state,
    sample_goal_state,
    sample_trajectory,
)

ZIP_MAGIC = b"PK\x03\x04"
CONSTANTS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}  # Inspect's CORRECT, PARTIAL, ...
WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


def is_inspect(obj: Any) -> bool:
    """True for the shape of an Inspect AI JSON eval log."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("eval"), dict)
        and "status" in obj
        and "version" in obj
    )


def refuse_binary_log() -> DomainError:
    """The error for Inspect's zipped ``.eval`` log."""
    return DomainError(
        "file: this is Inspect's binary .eval log; convert it first with "
        "`inspect log convert FILE --to json --output-dir DIR` (or run with --log-format json)"
    )


def value_to_float(value: Any) -> float | None:
    """Inspect's default ``value_to_float`` for one scalar; None where Inspect would warn and
    use 0 (Assay records an errored grade)."""
    if isinstance(value, str) and value in CONSTANTS:
        return CONSTANTS[value]
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in WORDS:
            return WORDS[text]
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _grade(name: str, value: Any, score_obj: dict, path: str, gating: bool) -> GradeIn:
    details = {
        "source": path,
        "value": json_clean(value),
        "answer": json_clean(score_obj.get("answer")),
    }
    explanation = score_obj.get("explanation")
    explanation = explanation if isinstance(explanation, str) else ""
    number = None if isinstance(value, NON_FINITE) else value_to_float(value)
    if number is None:
        why = (
            "not scored"
            if value is None or isinstance(value, NON_FINITE)
            else (f"could not compute a score from value {show(value)}")
        )
        return GradeIn(
            grader=name, passed=None, score=None, reason=why, gating=gating, details=details
        )
    passed = number == 1.0
    score = number if 0 <= number <= 1 else None
    reason = explanation or f"value {show(value)}"
    return GradeIn(
        grader=name, passed=passed, score=score, reason=reason, gating=gating, details=details
    )


def _grades(scores: dict, path: str, headline: str | None) -> list[GradeIn]:
    grades: list[GradeIn] = []
    for name, score_obj in scores.items():
        spath = f"{path}.{name}"
        score_obj = as_dict(score_obj, spath)
        value = need(score_obj, "value", spath)
        gating = name == headline
        if isinstance(value, dict):
            for key, inner in value.items():
                # Inspect may name a dict score's metrics after the key alone.
                grades.append(
                    _grade(
                        f"{name}/{key}"[:200],
                        inner,
                        score_obj,
                        f"{spath}.value.{key}",
                        gating or headline in (key, f"{name}/{key}"),
                    )
                )
        else:
            grades.append(_grade(name[:200], value, score_obj, f"{spath}.value", gating))
    return grades


def _case(sample: dict, path: str) -> CaseSpec:
    sid = need(sample, "id", path)
    if isinstance(sid, bool) or not isinstance(sid, str | int):
        raise fail(f"{path}.id", f"expected a string or integer, got {show(sid)}")
    key = case_key_check(str(sid), f"{path}.id")
    text = need(sample, "input", path)
    check_finite(text, f"{path}.input")
    if isinstance(text, list):
        text = {"messages": text}
    elif not isinstance(text, str):
        raise fail(f"{path}.input", f"expected a string or a list of messages, got {show(text)}")
    target = sample.get("target")
    check_finite(target, f"{path}.target")
    if isinstance(target, list):
        for j, t in enumerate(target):
            as_str(t, f"{path}.target[{j}]")
    elif target is not None:
        as_str(target, f"{path}.target")
    return CaseSpec(key=key, input=text, expected=target if target not in ("", []) else None)


def _usage(sample: dict, path: str, model: str) -> tuple[int | None, int | None, Decimal | None]:
    usage = sample.get("model_usage")
    if usage is None:
        return None, None, None
    usage = as_dict(usage, f"{path}.model_usage")
    mine = usage.get(model)
    if mine is None:
        return None, None, None
    upath = f"{path}.model_usage.{model}"
    mine = as_dict(mine, upath)
    cost = mine.get("total_cost")
    if cost is not None:
        if (
            isinstance(cost, bool)
            or not isinstance(cost, int | float)
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise fail(
                f"{upath}.total_cost", f"expected a number of USD >= 0 or null, got {show(cost)}"
            )
        cost = cost_check(Decimal(str(cost)), f"{upath}.total_cost")
    return (
        opt_count(mine.get("input_tokens"), f"{upath}.input_tokens"),
        opt_count(mine.get("output_tokens"), f"{upath}.output_tokens"),
        cost,
    )


def _headline(document: dict, samples: list) -> str | None:
    results = document.get("results")
    if isinstance(results, dict) and isinstance(results.get("scores"), list):
        for entry in results["scores"]:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                return entry["name"]
    for sample in samples:
        if isinstance(sample, dict) and isinstance(sample.get("scores"), dict) and sample["scores"]:
            return next(iter(sample["scores"]))
    return None


def _sample(sample: Any, path: str, model: str, headline: str | None) -> TrialIn:
    sample = as_dict(sample, path)
    case = _case(sample, path)
    goal_state = sample_goal_state(sample, path)
    if goal_state is not None:
        case = replace(case, goal_state=goal_state)
    case_size_check_at(
        case,
        {
            "input": f"{path}.input",
            "expected": f"{path}.target",
            "goal_state": f"{path}.metadata.goal_state",
        },
    )
    epoch = need(sample, "epoch", path)
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        raise fail(f"{path}.epoch", f"expected an integer >= 1, got {show(epoch)}")
    problem = count_problem(epoch, minimum=1)
    if problem:
        raise fail(f"{path}.epoch", problem)
    latency_ms = opt_latency_ms(sample.get("total_time"), f"{path}.total_time", per_unit_ms=1000)
    input_tokens, output_tokens, cost = _usage(sample, path, model)
    trajectory = sample_trajectory(sample, path)
    raw = {
        "format": "inspect",
        "record": path,
        "uuid": json_clean(sample.get("uuid")),
        "metadata": json_clean(sample.get("metadata")),
        "model_usage": json_clean(sample.get("model_usage")),
    }
    trial = TrialIn(
        where=path,
        case=case,
        attempt=epoch,
        output="",
        latency_ms=latency_ms,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost,
        raw=raw,
        trajectory=trajectory,
        final_state=sample_final_state(
            sample, path, agent=trajectory is not None or goal_state is not None
        ),
    )
    limit = _limit_error(sample, path)
    if limit is not None:  # stopped before its end: no verdict, as in the tool loop
        trial.error = limit
        trial.raw["scores"] = json_clean(sample.get("scores"))
        return trial
    error = sample.get("error")
    if error is not None:
        error = as_dict(error, f"{path}.error")
        trial.error = (
            as_str(need(error, "message", f"{path}.error"), f"{path}.error.message")
            or "Inspect reported a sample error"
        )
        return trial
    output = sample.get("output")
    output = {} if output is None else as_dict(output, f"{path}.output")
    trial.output = (
        as_str(output.get("completion", ""), f"{path}.output.completion", nullable=True) or ""
    )
    scores = sample.get("scores")
    scores = {} if scores is None else as_dict(scores, f"{path}.scores")
    trial.grades = _grades(scores, f"{path}.scores", headline)
    return trial


def _limit_error(sample: dict, path: str) -> str | None:
    """The error message of a sample stopped at its ``limit`` (``{"type": "message", "limit":
    10}``), with ``evals.trajectory.limits``' kind; None when no limit was hit."""
    limit = sample.get("limit")
    if limit is None:
        return None
    limit = as_dict(limit, f"{path}.limit")
    kind = as_str(need(limit, "type", f"{path}.limit"), f"{path}.limit.type")
    value = limit.get("limit")
    bound = (
        f" ({value:g})" if isinstance(value, int | float) and not isinstance(value, bool) else ""
    )
    return limit_error(
        INSPECT_LIMITS.get(kind, OTHER_CAP),
        f"Inspect stopped the sample at its {kind}_limit{bound}"[:1000],
    )


def inspect_import(*, ctx: ImportContext, document: Any) -> None:
    """Store a parsed Inspect AI JSON log as the new run ``ctx.run_name``. Raises
    ``DomainError`` naming the JSON path and field."""
    if not is_inspect(document):
        raise fail(
            "eval",
            "not an Inspect AI JSON log (expected an object with version, "
            "status and eval, as written by inspect eval --log-format json)",
        )
    status = as_str(document["status"], "status")
    if status == "started":
        raise fail(
            "status", "the eval is still running (status 'started'); import the finished log"
        )
    model = as_str(need(document["eval"], "model", "eval"), "eval.model")
    samples = document.get("samples")
    if not samples:
        raise fail(
            "samples",
            "the log holds no samples (written with --no-log-samples?); Assay imports every sample",
        )
    samples = as_list(samples, "samples")
    headline = _headline(document, samples)
    trials = [_sample(s, f"samples[{i}]", model, headline) for i, s in enumerate(samples)]
    graders: dict[str, dict] = {}
    for t in trials:
        for g in t.grades:
            graders.setdefault(
                g.grader, {"key": g.grader, "kind": IMPORTED_KIND, "gating": g.gating}
            )
    results = document.get("results") if isinstance(document.get("results"), dict) else {}
    ev = document["eval"]
    extra = {
        "inspect": {
            "status": status,
            "task": json_clean(ev.get("task")),
            "eval_id": json_clean(ev.get("eval_id")),
            "run_id": json_clean(ev.get("run_id")),
            "version": json_clean(document.get("version")),
            "packages": json_clean(ev.get("packages")),
            "headline": headline,
            "printed": json_clean(results.get("scores")),
        }
    }
    trials_store(
        ctx=ctx,
        fmt="inspect",
        model=model[:200],
        extra=extra,
        trials=trials,
        graders=list(graders.values()),
        planned=_planned(ev),
        # "success" is a finished eval; "error" and "cancelled" stopped early.
        source_status="" if status == "success" else status[:100],
    )


def _planned(ev: dict) -> int | None:
    """Trials the eval meant to run: ``eval.dataset.sample_ids`` × ``eval.config.epochs`` (1 when
    absent); None when the log does not say, never guessed from ``dataset.samples``."""
    dataset = ev.get("dataset")
    dataset = dataset if isinstance(dataset, dict) else {}
    config = ev.get("config")
    config = config if isinstance(config, dict) else {}
    ids, epochs = dataset.get("sample_ids"), config.get("epochs")
    epochs = 1 if epochs is None else epochs
    if not isinstance(ids, list) or isinstance(epochs, bool) or not isinstance(epochs, int):
        return None
    return len(ids) * epochs if epochs >= 1 else None
