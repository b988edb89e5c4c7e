"""Writes of the judges app: judge versions, judge grades, judge runs, pairwise verdicts.

Invariants:
- A judge version is content-addressed (``judge_version_hash``): the same content returns
  the existing version, any change makes a new, untrusted version (never trusted by
  inheritance).
- Every judge call ends as a grade: a verdict, or an errored grade (``passed = None``,
  ``reason`` one of ``judges.parsing.ERROR_REASONS``) that keeps the raw reply or the
  provider's message. Never a pass, never a counted fail, never a silent skip.
- Grades go through the unique (trial, grader) key; a trial already graded by the grader is
  not called again, so a redelivered task changes nothing.
- A judge grade is gating only when its version is trusted; until then it is provisional.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from evals.models import Case, Grade, Run, Trial, TrialPair
from evals.runner.pricing import Price, cost_breakdown, price_lookup
from judges import kinds
from judges.client import JudgeClient, JudgeReply
from judges.models import Judge, JudgeRun, JudgeVersion, PairwiseVerdict, judge_version_hash
from judges.parsing import ParseError, reply_parse
from judges.prompts import PromptTemplateError, imitates_markers

Sleep = Callable[[float], Awaitable[None]]
JUDGE_RUN_CHUNK = 50


class JudgeConfigError(ValueError):
    """A judge version definition is invalid; the message names the field."""


# --- versions ------------------------------------------------------------------------------


def judge_version_create(
    *,
    judge_name: str,
    kind: str,
    model: str,
    base_url: str,
    prompt_template: str,
    params: dict,
    output_schema: dict,
    threshold: float | None = None,
) -> tuple[JudgeVersion, bool]:
    """The judge version with this content, created when new: ``(version, created)``.

    An empty ``prompt_template`` / ``output_schema`` takes the kind's default (so the stored
    version records the exact prompt template it renders). Raises ``JudgeConfigError``
    naming the field (unknown kind, a judge of that name with another kind, a placeholder
    the kind does not offer, non-object params).
    """
    if kind not in Judge.Kind.values or kind == Judge.Kind.RECORDED:
        raise JudgeConfigError(f"kind: unknown or not callable kind {kind!r}")
    if not judge_name.strip():
        raise JudgeConfigError("judge_name: required")
    if not model.strip():
        raise JudgeConfigError("model: required")
    if not base_url.startswith(("http://", "https://")):
        raise JudgeConfigError("base_url: must start with http:// or https://")
    if not isinstance(params, dict):
        raise JudgeConfigError("params: expected an object")
    if "api_key_env" in params:
        from evals.runner.targets.openai import api_key_env_problem

        problem = api_key_env_problem(params["api_key_env"])
        if problem:
            raise JudgeConfigError(f"params.api_key_env: {problem}")
    if params.get("reply_format", "json") not in ("json", "line"):
        raise JudgeConfigError("params.reply_format: expected 'json' or 'line'")
    if not isinstance(output_schema, dict):
        raise JudgeConfigError("output_schema: expected an object")
    template = prompt_template or kinds.DEFAULT_TEMPLATES[kind]
    try:
        kinds.template_check(kind, template)
    except PromptTemplateError as exc:
        raise JudgeConfigError(str(exc)) from exc
    if not output_schema and kind not in (kinds.FAITHFULNESS_CLAIMS, kinds.CONTEXT_RELEVANCE):
        output_schema = kinds.default_schema(kind, threshold=threshold)
    base_url = base_url.rstrip("/")
    digest = judge_version_hash(
        model=model,
        protocol="",
        prompt_template=template,
        params=params,
        output_schema=output_schema,
        threshold=threshold,
        base_url=base_url,
    )
    for _ in range(3):  # a concurrent creator may win the unique number; read it back
        with transaction.atomic():
            judge, _created = Judge.objects.get_or_create(name=judge_name, defaults={"kind": kind})
            if judge.kind != kind:
                raise JudgeConfigError(
                    f"kind: judge {judge_name!r} is a {judge.kind} judge, not {kind}"
                )
            judge = Judge.objects.select_for_update().get(pk=judge.pk)
            existing = judge.versions.filter(content_hash=digest).first()
            if existing:
                return existing, False
            last = judge.versions.order_by("-number").values_list("number", flat=True).first()
            try:
                with transaction.atomic():
                    version = JudgeVersion.objects.create(
                        judge=judge,
                        number=(last or 0) + 1,
                        base_url=base_url,
                        model=model,
                        prompt_template=template,
                        params=params,
                        output_schema=output_schema,
                        threshold=threshold,
                    )
                return version, True
            except IntegrityError:
                continue
    raise JudgeConfigError("judge_name: could not create a version (concurrent writers)")


# --- one call, from prompt to grade fields ----------------------------------------------------


@dataclass(frozen=True)
class JudgeCall:
    """A built call and, after it ran, its reply."""

    built: kinds.Built
    reply: JudgeReply | None = None


@dataclass(frozen=True)
class Verdict:
    """The grade fields of one judge call (``status`` "ok" or "error")."""

    status: str
    passed: bool | None
    score: float | None
    reason: str
    details: dict = field(default_factory=dict)
    preferred: str | None = None


def _material(trial: Trial) -> kinds.Material:
    case: Case = trial.case
    return kinds.Material(
        output=trial.output or "",
        input=case.input_text,
        reference=None if case.expected is None else kinds._text(case.expected),
        documents=list(case.context or []),
    )


def _build(version: JudgeVersion, material: kinds.Material) -> kinds.Built:
    return kinds.call_build(
        kind=version.judge.kind,
        template=version.prompt_template,
        criteria=str(version.params.get("criteria", "")),
        material=material,
        output_schema=version.output_schema or None,
        threshold=version.threshold,
    )


def _cost(
    reply: JudgeReply, version: JudgeVersion, prices: dict[str, Price | None]
) -> tuple[str | None, str | None]:
    model = reply.model or version.model
    if model not in prices:
        prices[model] = price_lookup(model)
    breakdown = cost_breakdown(prices[model], reply.input_tokens, reply.output_tokens)
    if breakdown is None:
        return None, None
    return str(breakdown.total_usd), breakdown.source


def verdict_read(
    *,
    version: JudgeVersion,
    call: JudgeCall,
    untrusted: list[str],
    prices: dict[str, Price | None] | None = None,
) -> Verdict:
    """Turn a finished call into grade fields: tokens, latency (ms), cost (USD, null when
    unknown), the prompt sent and the raw reply always in ``details``."""
    reply = call.reply
    assert reply is not None
    cost, source = _cost(reply, version, {} if prices is None else prices)
    details: dict[str, Any] = {
        "judge_version": str(version.uuid),
        "kind": version.judge.kind,
        "prompt": call.built.prompt.text,
        "nonce": call.built.prompt.nonce,
        "raw_reply": reply.content,
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "latency_ms": round(reply.latency_ms, 3),
        "attempts": reply.attempts,
        "model": reply.model,
        "cost_usd": cost,
        "price_source": source,
        "imitates_markers": any(imitates_markers(t) for t in untrusted),
    }
    if call.built.id_map:
        details["documents"] = [{"doc_id": k, "source_id": v} for k, v in call.built.id_map.items()]
    if not reply.ok:
        details.update(
            error=reply.reason, provider_message=reply.message[:4000], raw_response=reply.raw
        )
        return Verdict("error", None, None, reply.reason or "http_error", details)
    parsed = reply_parse(
        reply.content or "",
        reply_format=version.params.get("reply_format", "json"),
        schema=call.built.schema,
        nonce=call.built.prompt.nonce,
    )
    if isinstance(parsed, ParseError):
        details.update(error=parsed.reason, parse_message=parsed.message)
        return Verdict("error", None, None, parsed.reason, details)
    outcome = kinds.outcome_read(
        kind=version.judge.kind,
        data=parsed.data,
        id_map=call.built.id_map,
        threshold=version.threshold,
    )
    details.update(outcome.details)
    if outcome.error:
        details["error"] = outcome.error
        return Verdict("error", None, None, outcome.error, details)
    return Verdict(
        "ok", outcome.passed, outcome.score, outcome.reason, details, preferred=outcome.preferred
    )


def _run_async(factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine on a fresh event loop in its own thread (safe whether or not the
    caller already runs a loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(factory())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="judge-calls")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def calls_run(
    *, version: JudgeVersion, calls: list[JudgeCall], sleep: Sleep | None = None
) -> list[JudgeCall]:
    """Send ``calls`` concurrently (``params.concurrency``, default 8); same order back."""

    async def run_all() -> list[JudgeCall]:
        client = JudgeClient(
            base_url=version.base_url, model=version.model, params=version.params, sleep=sleep
        )
        try:
            replies = await asyncio.gather(
                *(
                    client.complete(messages=c.built.prompt.messages(), schema=c.built.schema)
                    for c in calls
                )
            )
        finally:
            await client.aclose()
        return [JudgeCall(built=c.built, reply=r) for c, r in zip(calls, replies, strict=True)]

    if not calls:
        return []
    return _run_async(run_all)


# --- grading trials ---------------------------------------------------------------------------


def _decided_below(trials: list[Trial]) -> dict[int, str]:
    """Trial id -> key of a gating deterministic grader that already failed it."""
    rows = (
        Grade.objects.filter(
            trial__in=trials, passed=False, gating=True, judge_version__isnull=True
        )
        .order_by("trial_id", "grader")
        .values_list("trial_id", "grader")
    )
    decided: dict[int, str] = {}
    for trial_id, grader in rows:
        decided.setdefault(trial_id, grader)
    return decided


def judge_grade_trials(
    *,
    trials: list[Trial],
    judge_version: JudgeVersion,
    grader: str | None = None,
    skip_if_failed: bool = False,
    gating: bool = True,
    sleep: Sleep | None = None,
) -> int:
    """Grade ok ``trials`` with ``judge_version``; returns the number of grades written.

    Idempotent; safe under redelivery: trials that already hold a grade of ``grader``
    (default ``judge_version.grader_key``) are not called again, and rows go through the
    unique (trial, grader) key. Errored trials get no judge grade (errored, not failed).
    With ``skip_if_failed`` a trial already failed by a gating deterministic grader is not
    sent to the judge; its grade says which rung decided (``details.decided_by``).
    A grade is gating only when ``gating`` and the version is trusted (else provisional).
    """
    if judge_version.judge.kind in (Judge.Kind.PAIRWISE, Judge.Kind.RECORDED):
        raise JudgeConfigError(
            f"judge_version: a {judge_version.judge.kind} judge does not grade single trials"
        )
    grader = grader or judge_version.grader_key
    trials = [t for t in trials if t.status == Trial.Status.OK]
    done = set(
        Grade.objects.filter(trial__in=trials, grader=grader).values_list("trial_id", flat=True)
    )
    todo = [t for t in trials if t.id not in done]
    if not todo:
        return 0
    gating = gating and judge_version.is_trusted
    rows: list[Grade] = []
    decided = _decided_below(todo) if skip_if_failed else {}
    for trial in todo:
        if trial.id in decided:
            key = decided[trial.id]
            rows.append(
                Grade(
                    trial=trial,
                    grader=grader,
                    grader_version=str(judge_version.number),
                    judge_version=judge_version,
                    status=Grade.Status.OK,
                    passed=False,
                    score=None,
                    reason=f"not judged: deterministic grader {key!r} already failed this trial",
                    details={"decided_by": key, "skipped": True},
                    gating=gating,
                )
            )
    pending = [t for t in todo if t.id not in decided]
    calls, untrusted = [], []
    for trial in pending:
        material = _material(trial)
        calls.append(JudgeCall(built=_build(judge_version, material)))
        untrusted.append(
            [material.output]
            + [
                str(d.get("text", "")) if isinstance(d, dict) else str(d)
                for d in material.documents
            ]
        )
    prices: dict[str, Price | None] = {}
    replies = calls_run(version=judge_version, calls=calls, sleep=sleep)
    for trial, call, texts in zip(pending, replies, untrusted, strict=True):
        v = verdict_read(version=judge_version, call=call, untrusted=texts, prices=prices)
        details = {**v.details, "decided_by": "judge"}
        rows.append(
            Grade(
                trial=trial,
                grader=grader,
                grader_version=str(judge_version.number),
                judge_version=judge_version,
                status=v.status,
                passed=v.passed,
                score=v.score,
                reason=v.reason,
                details=details,
                gating=gating,
            )
        )
    Grade.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def judge_grade_trial(
    *, trial: Trial, judge_version: JudgeVersion, sleep: Sleep | None = None
) -> Grade | None:
    """Grade one trial (see ``judge_grade_trials``); returns its grade, None for a trial
    that is not ok."""
    judge_grade_trials(trials=[trial], judge_version=judge_version, sleep=sleep)
    return Grade.objects.filter(trial=trial, grader=judge_version.grader_key).first()


def run_chunk_judge(*, run_id: int, trial_ids: list[int], sleep: Sleep | None = None) -> int:
    """The judge rung of a run's grader ladder for one chunk: grade the chunk's ok trials with
    every judge spec of the run's grader set (``kind: judge``), after their deterministic
    grades, then finalize the run (it closes once every judge grade is in). Returns the
    number of grades written.

    Idempotent; safe under redelivery: grades go through the unique (trial, grader) key and
    trials already judged are not called again. A cancelled run's chunk is not judged.
    Raises ``GraderConfigError`` if the stored grader set no longer parses (a deleted
    judge version cannot happen: grades protect it, and run_start checked it).
    """
    from evals.grading.graders import parse_grader_specs
    from evals.runner.finalize import run_finalize

    run = Run.objects.filter(id=run_id).first()
    if run is None or run.status == Run.Status.CANCELLED:
        return 0
    specs = [s for s in parse_grader_specs(run.graders or []) if s.is_judge]
    trials = list(
        Trial.objects.filter(
            id__in=trial_ids, run_id=run_id, status=Trial.Status.OK
        ).select_related("case")
    )
    written = 0
    for spec in specs:
        version = JudgeVersion.objects.select_related("judge").get(
            uuid=spec.config["judge_version"]
        )
        written += judge_grade_trials(
            trials=trials,
            judge_version=version,
            grader=spec.key,
            skip_if_failed=bool(spec.config.get("skip_if_failed", False)),
            gating=spec.gating,
            sleep=sleep,
        )
    run_finalize(run_id=run_id)
    return written


# --- judge runs -------------------------------------------------------------------------------


def judge_run_start(
    *,
    run: Run,
    judge_version: JudgeVersion,
    sample: int | None = None,
    by=None,
    seed: int | None = None,
) -> JudgeRun:
    """Grade ``run``'s ok trials (all, or a random ``sample`` of them, reproducible with
    ``seed``) with ``judge_version`` in Celery tasks enqueued after commit, in chunks of
    ``JUDGE_RUN_CHUNK`` trials. Raises ``JudgeConfigError`` naming the field for a bad
    sample size, or for a pairwise or recorded judge version (they do not grade single
    trials: refused here, before a task could fail on it)."""
    from judges.tasks import judge_run_execute

    if judge_version.judge.kind in (Judge.Kind.PAIRWISE, Judge.Kind.RECORDED):
        raise JudgeConfigError(
            f"judge_version: a {judge_version.judge.kind} judge does not grade single trials"
        )
    if sample is not None and sample < 1:
        raise JudgeConfigError(f"sample: expected a positive number, got {sample}")
    ids = list(
        run.trials.filter(status=Trial.Status.OK).order_by("id").values_list("id", flat=True)
    )
    if sample is not None and sample < len(ids):
        ids = sorted(random.Random(seed).sample(ids, sample))
    with transaction.atomic():
        judge_run, _ = JudgeRun.objects.select_for_update().get_or_create(
            run=run,
            judge_version=judge_version,
            defaults={"grader": judge_version.grader_key},
        )
        judge_run.status = JudgeRun.Status.QUEUED
        judge_run.trial_ids = ids
        judge_run.trials_total = len(ids)
        judge_run.started_by = by
        judge_run.finished_at = None
        judge_run.save()
        chunks = [ids[i : i + JUDGE_RUN_CHUNK] for i in range(0, len(ids), JUDGE_RUN_CHUNK)]
        for chunk in chunks or [[]]:
            transaction.on_commit(
                lambda c=chunk: judge_run_execute.delay(run.id, judge_version.id, c)
            )
    return judge_run


def judge_run_execute(
    *, run_id: int, judge_version_id: int, trial_ids: list[int], sleep: Sleep | None = None
) -> None:
    """Grade one chunk of a judge run, then recount its progress.

    Idempotent; safe under redelivery (grades keyed by (trial, grader)). A cancelled judge
    run does nothing.
    """
    judge_run = (
        JudgeRun.objects.filter(run_id=run_id, judge_version_id=judge_version_id)
        .select_related("judge_version__judge")
        .first()
    )
    if judge_run is None or judge_run.status == JudgeRun.Status.CANCELLED:
        return
    JudgeRun.objects.filter(id=judge_run.id, status=JudgeRun.Status.QUEUED).update(
        status=JudgeRun.Status.RUNNING
    )
    trials = list(Trial.objects.filter(id__in=trial_ids, run_id=run_id).select_related("case"))
    judge_grade_trials(
        trials=trials, judge_version=judge_run.judge_version, grader=judge_run.grader, sleep=sleep
    )
    judge_run_progress(judge_run_id=judge_run.id)


def judge_run_progress(*, judge_run_id: int) -> JudgeRun:
    """Recount graded and errored trials from the grade rows; close the judge run once every
    trial has a grade (compare-and-set: a cancelled run stays cancelled)."""
    judge_run = JudgeRun.objects.get(id=judge_run_id)
    grades = Grade.objects.filter(trial_id__in=judge_run.trial_ids, grader=judge_run.grader)
    graded = grades.count()
    errored = grades.filter(status=Grade.Status.ERROR).count()
    JudgeRun.objects.filter(id=judge_run.id).update(trials_graded=graded, trials_errored=errored)
    if graded >= judge_run.trials_total:
        JudgeRun.objects.filter(id=judge_run.id).exclude(status__in=JudgeRun.TERMINAL).update(
            status=JudgeRun.Status.SUCCEEDED, finished_at=timezone.now()
        )
    judge_run.refresh_from_db()
    return judge_run


def judge_run_cancel(*, judge_run: JudgeRun) -> bool:
    """Cancel a judge run not yet finished; chunks not yet started then do nothing.
    Returns False when it was already terminal."""
    return bool(
        JudgeRun.objects.filter(id=judge_run.id)
        .exclude(status__in=JudgeRun.TERMINAL)
        .update(status=JudgeRun.Status.CANCELLED, finished_at=timezone.now())
    )


# --- pairwise --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairOutcome:
    """A pair's judged outcome in the original naming: ``winner`` "A", "B", "tie" (the two
    orders disagree) or None (a presentation errored: no outcome, counted as an error)."""

    winner: str | None
    original: str | None
    swapped: str | None


def _pair_outcome(rows: dict[str, PairwiseVerdict]) -> PairOutcome:
    orig, swap = rows.get("original"), rows.get("swapped")
    a = orig.preferred if orig and orig.status == PairwiseVerdict.Status.OK else None
    b = swap.preferred if swap and swap.status == PairwiseVerdict.Status.OK else None
    if a is None or b is None:
        return PairOutcome(None, a, b)
    return PairOutcome(a if a == b else "tie", a, b)


def pair_judge(
    *, pair: TrialPair, judge_version: JudgeVersion, sleep: Sleep | None = None
) -> PairOutcome:
    """Judge a pair in both orders: A/B ("original"), then B/A ("swapped"), each answer mapped
    back to the original naming and stored as a ``PairwiseVerdict``; the pair counts for a
    side only when both orders agree, else it is a tie.

    Idempotent: presentations already stored are not called again (unique (pair, judge
    version, position)).
    """
    if judge_version.judge.kind != Judge.Kind.PAIRWISE:
        raise JudgeConfigError("judge_version: not a pairwise judge")
    existing = {v.position: v for v in pair.verdicts.filter(judge_version=judge_version)}
    case = pair.case
    a_text, b_text = pair.trial_a.output or "", pair.trial_b.output or ""
    orders = {"original": (a_text, b_text), "swapped": (b_text, a_text)}
    todo = [p for p in ("original", "swapped") if p not in existing]
    calls = [
        JudgeCall(
            built=_build(
                judge_version,
                kinds.Material(
                    input=case.input_text, response_a=orders[p][0], response_b=orders[p][1]
                ),
            )
        )
        for p in todo
    ]
    rows = []
    replies = calls_run(version=judge_version, calls=calls, sleep=sleep)
    for position, call in zip(todo, replies, strict=True):
        v = verdict_read(version=judge_version, call=call, untrusted=[a_text, b_text])
        preferred = ""
        if v.status == "ok" and v.preferred:
            slot = v.preferred
            preferred = slot if position == "original" else {"A": "B", "B": "A"}[slot]
        rows.append(
            PairwiseVerdict(
                pair=pair,
                judge_version=judge_version,
                position=position,
                status=PairwiseVerdict.Status.OK if preferred else PairwiseVerdict.Status.ERROR,
                preferred=preferred,
                reason=(
                    f"{position} order: the judge chose slot {v.preferred}"
                    if preferred
                    else v.reason
                ),
            )
        )
    PairwiseVerdict.objects.bulk_create(rows, ignore_conflicts=True)
    stored = {v.position: v for v in pair.verdicts.filter(judge_version=judge_version)}
    return _pair_outcome(stored)


@dataclass(frozen=True)
class PairwiseTally:
    """Head against base over cases: wins, ties (order-inconsistent) and errors."""

    head_wins: int = 0
    base_wins: int = 0
    ties: int = 0
    errors: int = 0


def runs_pair_judge(
    *, base: Run, head: Run, judge_version: JudgeVersion, sleep: Sleep | None = None
) -> PairwiseTally:
    """Compare head against base case by case (attempt 1 of each, ok trials only): the base
    trial is A, the head trial is B, judged in both orders (``pair_judge``)."""
    base_trials = {t.case_id: t for t in base.trials.filter(attempt=1, status=Trial.Status.OK)}
    counts = {"A": 0, "B": 0, "tie": 0, None: 0}
    for head_trial in (
        head.trials.filter(attempt=1, status=Trial.Status.OK)
        .select_related("case")
        .order_by("case_id")
    ):
        base_trial = base_trials.get(head_trial.case_id)
        if base_trial is None:
            continue
        pair, _ = TrialPair.objects.get_or_create(
            trial_a=base_trial, trial_b=head_trial, defaults={"case": head_trial.case}
        )
        counts[pair_judge(pair=pair, judge_version=judge_version, sleep=sleep).winner] += 1
    return PairwiseTally(
        head_wins=counts["B"], base_wins=counts["A"], ties=counts["tie"], errors=counts[None]
    )


def cost_usd_sum(values: list[str | None]) -> Decimal | None:
    """Sum of known costs (USD); None when none is known."""
    known = [Decimal(v) for v in values if v is not None]
    return sum(known, Decimal(0)) if known else None
