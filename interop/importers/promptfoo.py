"""promptfoo results files (``promptfoo eval --repeat N -o results.json``, output version >= 2)
as one run: one trial per ``results.results[i]``. The field mapping: docs/interop.md,
"promptfoo: field mapping" (tested against promptfoo 0.121.20, tests/fixtures/interop).

Rules a reader of this code must know: every row must come from one provider and one
prompt; attempts follow ``testIdx`` within a case (promptfoo writes no repeat number); a
cost of 0 is unknown (promptfoo writes 0 for an unpriced model); a provider error is an
errored trial whatever ``success`` says, an assertion that threw an errored ``promptfoo``
grade; the gating grade is promptfoo's own verdict, assertions' grades do not gate. Agent
fields come from ``response.metadata`` and ``testCase.metadata``
(``interop.importers.agent_fields``). A bare NaN/Infinity is "not scored" in a score and
refused elsewhere.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from decimal import Decimal
from typing import Any

from core.strict_json import NON_FINITE
from evals.cases import CaseSpec
from evals.grading.grader_set import IMPORTED_KIND
from interop.importers.agent_fields import AgentFields, agent_fields_parse
from interop.importers.context import ImportContext
from interop.importers.harness import (
    GradeIn,
    TrialIn,
    as_bool,
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

GATING_GRADER = "promptfoo"
FAILURE_ERROR = 2  # promptfoo's ResultFailureReason.ERROR


def is_promptfoo(obj: Any) -> bool:
    """True for the shape of a promptfoo ``-o results.json`` document."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("results"), dict)
        and isinstance(obj["results"].get("results"), list)
    )


def _score(value: Any, path: str) -> tuple[float | None, dict]:
    """A [0, 1] score or None (absent, NaN, or outside [0, 1]: kept in details)."""
    if value is None or isinstance(value, NON_FINITE):
        return None, ({"score": None, "not_scored": True} if value is not None else {})
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(path, f"expected a number or null, got {show(value)}")
    if 0 <= value <= 1:
        return float(value), {}
    return None, {"score": value}


def _cost(value: Any, path: str) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(path, f"expected a number of USD >= 0, got {show(value)}")
    amount = Decimal(str(value))
    if not amount.is_finite() or amount < 0:
        raise fail(path, f"expected a number of USD >= 0, got {show(value)}")
    cost_check(amount, path)
    return amount if amount > 0 else None  # promptfoo's 0 means "no price known"


def _output(value: Any, path: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    check_finite(value, path)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _case(row: dict, path: str) -> CaseSpec:
    test = as_dict(need(row, "testCase", path), f"{path}.testCase")
    variables = test.get("vars", row.get("vars"))
    variables = {} if variables is None else as_dict(variables, f"{path}.testCase.vars")
    check_finite(variables, f"{path}.testCase.vars")
    description = as_str(test.get("description"), f"{path}.testCase.description", nullable=True)
    if description and description.strip():
        key = case_key_check(description, f"{path}.testCase.description")
    else:
        canonical = json.dumps(variables, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        key = "vars-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]
    return case_size_check_at(
        CaseSpec(key=key, input=variables, expected=None), {"input": f"{path}.testCase.vars"}
    )


def _agent(row: dict, response: dict | None, path: str) -> AgentFields:
    """An agent row's trajectory, final state and goal state (module docstring)."""
    test = row.get("testCase")
    test = test if isinstance(test, dict) else {}
    test_meta = test.get("metadata")
    test_meta = test_meta if isinstance(test_meta, dict) else {}
    meta = (response or {}).get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    values = {
        "trajectory": meta.get("trajectory"),
        "final_state": meta.get("final_state"),
        "goal_state": test_meta.get("goal_state"),
    }
    names = {
        "trajectory": f"{path}.response.metadata.trajectory",
        "final_state": f"{path}.response.metadata.final_state",
        "goal_state": f"{path}.testCase.metadata.goal_state",
    }
    return agent_fields_parse(values, where=path, fields=names)


def _components(grading: dict, path: str) -> list[GradeIn]:
    items = grading.get("componentResults")
    if items is None:
        return []
    grades: list[GradeIn] = []
    seen: dict[str, int] = {GATING_GRADER: 1}  # a component never takes the verdict's name
    for j, comp in enumerate(as_list(items, f"{path}.componentResults")):
        cpath = f"{path}.componentResults[{j}]"
        comp = as_dict(comp, cpath)
        assertion = comp.get("assertion")
        assertion = {} if assertion is None else as_dict(assertion, f"{cpath}.assertion")
        name = (
            as_str(assertion.get("metric"), f"{cpath}.assertion.metric", nullable=True)
            or as_str(assertion.get("type"), f"{cpath}.assertion.type", nullable=True)
            or "assertion"
        )
        seen[name] = seen.get(name, 0) + 1
        grader = name if seen[name] == 1 else f"{name}#{seen[name]}"
        passed = as_bool(need(comp, "pass", cpath), f"{cpath}.pass")
        score, extra = _score(comp.get("score"), f"{cpath}.score")
        reason = as_str(comp.get("reason"), f"{cpath}.reason", nullable=True) or (
            f"assertion {'passed' if passed else 'failed'}"
        )
        details = {"assertion": json_clean(assertion), "source": cpath, **extra}
        grades.append(
            GradeIn(
                grader=grader[:200],
                passed=passed,
                score=score,
                reason=reason,
                gating=False,
                details=details,
            )
        )
    return grades


def _row(row: Any, path: str) -> tuple[int, TrialIn, str]:
    """``(test index, trial without its attempt, provider/prompt identity)`` of one row. Long by
    design: one check per field, in the file's order."""
    row = as_dict(row, path)
    case = _case(row, path)
    test_idx = row.get("testIdx")
    if isinstance(test_idx, bool) or not isinstance(test_idx, int | type(None)):
        raise fail(f"{path}.testIdx", f"expected an integer, got {show(test_idx)}")
    provider = row.get("provider")
    if isinstance(provider, dict):
        provider_id = as_str(need(provider, "id", f"{path}.provider"), f"{path}.provider.id")
    else:
        provider_id = as_str(provider, f"{path}.provider", nullable=True) or ""
    prompt = row.get("prompt")
    prompt = {} if prompt is None else as_dict(prompt, f"{path}.prompt")
    identity = json.dumps([provider_id, row.get("promptIdx"), prompt.get("label")])
    response = row.get("response")
    response = None if response is None else as_dict(response, f"{path}.response")
    error_text = as_str(row.get("error"), f"{path}.error", nullable=True) or ""
    failure = row.get("failureReason")
    if failure is not None and (isinstance(failure, bool) or not isinstance(failure, int)):
        raise fail(f"{path}.failureReason", f"expected an integer, got {show(failure)}")
    response_error = (
        ""
        if response is None
        else (as_str(response.get("error"), f"{path}.response.error", nullable=True) or "")
    )
    provider_failed = response is None or bool(response_error)
    agent = _agent(row, response, path)
    if agent.goal_state is not None:
        case = case_size_check_at(
            replace(case, goal_state=agent.goal_state),
            {
                "input": f"{path}.testCase.vars",
                "goal_state": f"{path}.testCase.metadata.goal_state",
            },
        )
    latency = opt_latency_ms(
        row.get("latencyMs", (response or {}).get("latencyMs")), f"{path}.latencyMs"
    )
    cost = _cost(row.get("cost"), f"{path}.cost")
    raw = {
        "format": "promptfoo",
        "record": path,
        "id": json_clean(row.get("id")),
        "testIdx": test_idx,
        "promptIdx": json_clean(row.get("promptIdx")),
        "provider": provider_id,
        "prompt": json_clean(prompt.get("raw")),
        "failureReason": failure,
        "namedScores": json_clean(row.get("namedScores")),
    }
    if provider_failed:  # whatever failureReason says: a provider error is never a fail
        message = response_error or error_text or "promptfoo reported an error"
        trial = TrialIn(
            where=path,
            case=case,
            attempt=0,
            output="",
            error=message,
            latency_ms=latency,
            cost_usd=cost,
            raw=raw,
            trajectory=agent.trajectory,
            final_state=agent.final_state,
        )
        return test_idx if test_idx is not None else -1, trial, identity
    if response is None:
        raise fail(f"{path}.response", "missing (a row without an error needs a response)")
    usage = response.get("tokenUsage")
    usage = {} if usage is None else as_dict(usage, f"{path}.response.tokenUsage")
    raw.update(
        cached=json_clean(response.get("cached")),
        finishReason=json_clean(response.get("finishReason")),
    )
    grading = row.get("gradingResult")
    grading = {} if grading is None else as_dict(grading, f"{path}.gradingResult")
    if failure == FAILURE_ERROR:
        verdict = GradeIn(
            grader=GATING_GRADER,
            passed=None,
            score=None,
            gating=True,
            reason=error_text or "promptfoo reported a grading error",
            details={"source": path},
        )
    else:
        passed = as_bool(need(row, "success", path), f"{path}.success")
        score, extra = _score(row.get("score"), f"{path}.score")
        reason = (
            as_str(grading.get("reason"), f"{path}.gradingResult.reason", nullable=True)
            or error_text
            or ("passed" if passed else "failed")
        )
        verdict = GradeIn(
            grader=GATING_GRADER,
            passed=passed,
            score=score,
            gating=True,
            reason=reason,
            details={"source": path, **extra},
        )
    trial = TrialIn(
        where=path,
        case=case,
        attempt=0,
        output=_output(response.get("output"), f"{path}.response.output"),
        latency_ms=latency,
        input_tokens=opt_count(usage.get("prompt"), f"{path}.response.tokenUsage.prompt"),
        output_tokens=opt_count(usage.get("completion"), f"{path}.response.tokenUsage.completion"),
        cost_usd=cost,
        grades=[verdict, *_components(grading, f"{path}.gradingResult")],
        raw=raw,
        trajectory=agent.trajectory,
        final_state=agent.final_state,
    )
    return test_idx if test_idx is not None else -1, trial, identity


def promptfoo_import(*, ctx: ImportContext, document: Any) -> None:
    """Store a parsed promptfoo results document as the new run ``ctx.run_name``. Raises
    ``DomainError`` naming the JSON path and field."""
    if not is_promptfoo(document):
        raise fail(
            "results",
            "not a promptfoo results file (expected an object with "
            "results.results, as written by promptfoo eval -o results.json)",
        )
    results = document["results"]
    version = results.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 2:
        raise fail(
            "results.version", f"expected promptfoo output version >= 2, got {show(version)}"
        )
    parsed = []
    identity_first: tuple[str, str] | None = None
    for i, row in enumerate(results["results"]):
        test_idx, trial, identity = _row(row, f"results.results[{i}]")
        if identity_first is None:
            identity_first = (identity, trial.where)
        elif identity != identity_first[0]:
            raise fail(
                f"{trial.where}.provider",
                "a second provider or prompt "
                f"(first on {identity_first[1]}); import one provider and prompt per "
                "run (promptfoo eval --filter-providers, one prompt per file)",
            )
        parsed.append((test_idx, i, trial))
    parsed.sort(key=lambda item: (item[0], item[1]))
    counts: dict[str, int] = {}
    graders: dict[str, dict] = {
        GATING_GRADER: {"key": GATING_GRADER, "kind": IMPORTED_KIND, "gating": True}
    }
    trials = []
    for _, _, trial in parsed:
        counts[trial.case.key] = counts.get(trial.case.key, 0) + 1
        trial.attempt = counts[trial.case.key]
        for g in trial.grades:
            graders.setdefault(
                g.grader, {"key": g.grader, "kind": IMPORTED_KIND, "gating": g.gating}
            )
        trials.append(trial)
    meta = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    stats = results.get("stats") if isinstance(results.get("stats"), dict) else {}
    model = json.loads(identity_first[0])[0] if identity_first else ""
    extra = {
        "promptfoo": {
            "evalId": json_clean(document.get("evalId")),
            "version": version,
            "promptfooVersion": json_clean(meta.get("promptfooVersion")),
            "printed": {k: json_clean(stats.get(k)) for k in ("successes", "failures", "errors")},
        }
    }
    trials_store(
        ctx=ctx,
        fmt="promptfoo",
        model=model[:200],
        extra=extra,
        trials=trials,
        graders=list(graders.values()),
    )
