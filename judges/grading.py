"""Writes of the judges app: judge versions, judge grades, judge runs, pairwise verdicts.

Invariants:
- A judge version is content-addressed (``judge_version_hash``): any change makes a new,
  untrusted version.
- Every judge call ends as a grade: a verdict, or an errored grade (``passed = None``,
  ``reason`` in ``judges.parsing.ERROR_REASONS``) keeping the raw reply; never a pass or a
  counted fail. A rung the ladder skipped is stored "not judged" (no call, no verdict).
- A version whose stored template is refused (``template_refusal``) is not called: each
  trial gets an errored grade whose reason starts ``bad_template:``.
- Grades go through the unique (trial, grader) key; a graded trial is not called again.
- A judge grade gates only when its version is trusted; until then it is provisional.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models.fields.json import KT

from core.decimals import decimal_plain
from core.errors import DomainError
from core.text import REPLACED_KEY, replaced_record
from evals.grading.grader_set import RECORDED_JUDGE_KIND, recorded_kind_reason
from evals.grading.rungs import rung_finished
from evals.models import Case, Grade, Run, Trial
from judges import kinds
from judges.calling import calls_send
from judges.claims import (
    claim_renew_every_s,
    grade_claims_take,
    holder_new,
    judge_claims_release,
    judge_claims_renew,
)
from judges.client import JudgeReply
from judges.ledger import CallAnswered, CallNotes, CallOpened, judge_calls_close
from judges.models import Judge, JudgeVersion
from judges.parsing import ParseError, reply_parse
from judges.prompts import imitates_markers
from providers.pricing import Costing, Price, price_lookup, usage_cost
from providers.usage import usage_of, usage_tokens

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


# --- versions ------------------------------------------------------------------------------


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


def template_refusal(version: JudgeVersion) -> str | None:
    """Why ``version``'s stored template cannot be sent (``kinds.template_check``), or None.
    Versions are immutable: the way out is a new version."""
    try:
        kinds.template_check(version.judge.kind, version.prompt_template)
    except DomainError as exc:
        return f"bad_template: {exc}; make a new version with the template fixed"
    return None


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
        examples=version.params.get("examples") or None,
    )


def _cost(
    reply: JudgeReply, version: JudgeVersion, prices: dict[str, Price | None]
) -> tuple[str | None, Costing]:
    """(cost USD as plain text or None, the costing) of ``reply`` at its model's price."""
    model = reply.model or version.model
    if model not in prices:
        prices[model] = price_lookup(model)
    costing = usage_cost(prices[model], usage_of(reply), model=model)
    return None if costing.total_usd is None else decimal_plain(costing.total_usd), costing


def call_answered(call: JudgeCall, verdict: Verdict, *, stored: bool) -> CallAnswered:
    """The ledger's record of an answered ``call`` read as ``verdict`` (its cost and price
    source from ``verdict.details``); ``stored``: whether its grade or verdict was kept."""
    assert call.reply is not None  # calls_send records answered calls only
    return CallAnswered(
        nonce=call.built.prompt.nonce,
        reply=call.reply,
        cost_usd=verdict.details.get("cost_usd"),
        price_source=verdict.details.get("price_source"),
        cost_basis=verdict.details.get("cost_basis"),
        stored=stored,
    )


def verdict_read(
    *,
    version: JudgeVersion,
    call: JudgeCall,
    untrusted: list[str],
    prices: dict[str, Price | None] | None = None,
) -> Verdict:
    """Grade fields of a finished call: tokens, latency (ms), cost (USD, null when unknown), the
    prompt and raw reply in ``details``; ``details[REPLACED_KEY]`` counts per place the
    characters replaced with U+FFFD because the database cannot store them (``core.text``)."""
    reply = call.reply
    assert reply is not None
    cost, costing = _cost(reply, version, {} if prices is None else prices)
    details: dict[str, Any] = {
        "judge_version": str(version.uuid),
        "kind": version.judge.kind,
        "prompt": call.built.prompt.text,
        "nonce": call.built.prompt.nonce,
        "raw_reply": reply.content,
        **usage_tokens(usage_of(reply)),
        "latency_ms": round(reply.latency_ms, 3),
        "attempts": reply.attempts,
        "model": reply.model,
        "cost_usd": cost,
        "price_source": costing.source,
        "cost_basis": costing.basis(),
        "imitates_markers": any(imitates_markers(t) for t in untrusted),
    }
    replaced = replaced_record(reply.raw)
    if replaced:
        details[REPLACED_KEY] = replaced
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
    if parsed.replaced:
        details[REPLACED_KEY] = {**replaced, "reply_fields": parsed.replaced}
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


# --- grading trials ---------------------------------------------------------------------------


Checkpoint = Callable[[], bool]


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


def _uncalled_grades(
    *,
    trials: list[Trial],
    judge_version: JudgeVersion,
    grader: str,
    skip_if_failed: bool,
    gating: bool,
) -> tuple[list[Grade], list[Trial]]:
    """The grades of ``trials`` needing no call (skipped rung: "not judged"; refused template:
    errored), and the trials left to call."""
    rows: list[Grade] = []
    decided = _decided_below(trials) if skip_if_failed else {}
    for trial in trials:
        if trial.id in decided:
            key = decided[trial.id]
            rows.append(
                Grade(
                    trial=trial,
                    grader=grader,
                    grader_version=str(judge_version.number),
                    judge_version=judge_version,
                    status=Grade.Status.NOT_JUDGED,
                    passed=None,
                    score=None,
                    reason=f"not judged: deterministic grader {key!r} already failed this trial",
                    details={"decided_by": key, "skipped": True},
                    gating=gating,
                )
            )
    pending = [t for t in trials if t.id not in decided]
    refusal = template_refusal(judge_version)
    if refusal:
        rows.extend(
            Grade(
                trial=trial,
                grader=grader,
                grader_version=str(judge_version.number),
                judge_version=judge_version,
                status=Grade.Status.ERROR,
                passed=None,
                score=None,
                reason=refusal,
                details={
                    "judge_version": str(judge_version.uuid),
                    "kind": judge_version.judge.kind,
                    "error": "bad_template",
                    "decided_by": "judge",
                },
                gating=gating,
            )
            for trial in pending
        )
        pending = []
    return rows, pending


def _untrusted(material: kinds.Material) -> list[str]:
    return [material.output] + [
        str(d.get("text", "")) if isinstance(d, dict) else str(d) for d in material.documents
    ]


def judge_grade_trials(
    *,
    trials: list[Trial],
    judge_version: JudgeVersion,
    grader: str | None = None,
    skip_if_failed: bool = False,
    gating: bool = True,
    sleep: Sleep | None = None,
    checkpoint: Checkpoint | None = None,
    judge_run_id: int | None = None,
) -> int:
    """Grade ok ``trials`` with ``judge_version``; returns the number of grades written.

    Idempotent under redelivery and concurrent duplicates: each (trial, grader) is claimed
    before its call (``judges.claims``), claims are renewed while calls are in flight, rows go
    through the unique key. Every call sent is in the ledger (``judges.ledger``), ``lost`` when
    another call's grade was stored first. ``checkpoint()`` is asked between calls: False stops
    every call not yet sent. Errored trials get no judge grade. With ``skip_if_failed`` a trial
    a gating deterministic grader failed is "not judged" (``details.decided_by``).

    Long by design: the steps (skip, claim, build, permit and open in the ledger, call, read,
    store and close, release) share the chunk's claims holder, calls and materials."""
    if judge_version.judge.kind == Judge.Kind.RECORDED:
        raise DomainError(
            f"{judge_version} is {recorded_kind_reason(RECORDED_JUDGE_KIND)}",
            field="judge_version",
        )
    if judge_version.judge.kind == Judge.Kind.PAIRWISE:
        raise DomainError("a pairwise judge does not grade single trials", field="judge_version")
    grader = grader or judge_version.grader_key
    trials = [t for t in trials if t.status == Trial.Status.OK]
    done = set(
        Grade.objects.filter(trial__in=trials, grader=grader).values_list("trial_id", flat=True)
    )
    todo = [t for t in trials if t.id not in done]
    if not todo:
        return 0
    gating = gating and judge_version.is_trusted
    rows, pending = _uncalled_grades(
        trials=todo,
        judge_version=judge_version,
        grader=grader,
        skip_if_failed=skip_if_failed,
        gating=gating,
    )
    Grade.objects.bulk_create(rows, ignore_conflicts=True)
    written = len(rows)
    if not pending:
        return written
    holder = holder_new()
    held = grade_claims_take(
        trial_ids=[t.id for t in pending],
        grader=grader,
        judge_version_id=judge_version.id,
        holder=holder,
        judge_run_id=judge_run_id,
    )
    pending = [t for t in pending if t.id in held]
    try:
        materials = [_material(t) for t in pending]
        calls = [JudgeCall(built=_build(judge_version, m)) for m in materials]
        prices: dict[str, Price | None] = {}

        notes = CallNotes(judge_version=judge_version, judge_run_id=judge_run_id)

        def permit(indexes: list[int]) -> bool:
            if checkpoint is not None and not checkpoint():
                return False
            notes.permitted(
                CallOpened(
                    nonce=calls[i].built.prompt.nonce,
                    run_id=pending[i].run_id,
                    trial_id=pending[i].id,
                    grader=grader,
                )
                for i in indexes
            )
            return True

        def record(answers: list[tuple[int, JudgeCall]]) -> None:
            nonlocal written
            notes.flush()
            if not answers:
                return
            verdicts = {
                i: verdict_read(
                    version=judge_version,
                    call=call,
                    untrusted=_untrusted(materials[i]),
                    prices=prices,
                )
                for i, call in answers
            }
            written += _grades_store(
                judge_version=judge_version,
                grader=grader,
                gating=gating,
                holder=holder,
                answered=[(pending[i], call, verdicts[i]) for i, call in answers],
            )

        calls_send(
            version=judge_version,
            calls=calls,
            record=record,
            permit=permit,
            sending=lambda indexes: notes.sent(calls[i].built.prompt.nonce for i in indexes),
            renew=lambda: judge_claims_renew(holder=holder),
            renew_every_s=claim_renew_every_s(),
            sleep=sleep,
        )
    finally:
        judge_claims_release(holder=holder)
    return written


def _grades_store(
    *,
    judge_version: JudgeVersion,
    grader: str,
    gating: bool,
    holder,
    answered: list[tuple[Trial, JudgeCall, Verdict]],
) -> int:
    """Store the answered calls' grades, close their ledger rows and release their claims in one
    transaction; returns the grades stored. A (trial, grader) written first elsewhere closes
    its call ``lost``."""
    rows = [
        Grade(
            trial=trial,
            grader=grader,
            grader_version=str(judge_version.number),
            judge_version=judge_version,
            status=v.status,
            passed=v.passed,
            score=v.score,
            reason=v.reason,
            details={**v.details, "decided_by": "judge"},
            gating=gating,
        )
        for trial, _, v in answered
    ]
    trial_ids = [trial.id for trial, _, _ in answered]
    with transaction.atomic():
        Grade.objects.bulk_create(rows, ignore_conflicts=True)
        kept = dict(
            Grade.objects.filter(trial_id__in=trial_ids, grader=grader).values_list(
                "trial_id", KT("details__nonce")
            )
        )
        stored = {
            trial.id for trial, call, _ in answered if kept.get(trial.id) == call.built.prompt.nonce
        }
        judge_calls_close(
            answers=[
                call_answered(call, v, stored=trial.id in stored) for trial, call, v in answered
            ]
        )
        judge_claims_release(holder=holder, trial_ids=trial_ids, grader=grader)
    for trial, _, _ in answered:
        if trial.id in stored:
            continue
        logger.warning(
            "judge call on trial %s (%s) lost a race: another call's grade was stored first; "
            "the call is in the ledger",
            trial.uuid,
            grader,
        )
    return len(stored)


def run_live(*, run_id: int) -> bool:
    """True while run ``run_id`` exists and is not cancelled."""
    return Run.objects.filter(id=run_id).exclude(status=Run.Status.CANCELLED).exists()


def run_chunk_judge(*, run_id: int, trial_ids: list[int], sleep: Sleep | None = None) -> int:
    """The judge rung for one chunk: grade its ok trials with every judge spec of the run's
    grader set, then ``evals.grading.rungs.rung_finished``. Returns the number of grades
    written. Idempotent as ``judge_grade_trials``; a cancelled run's chunk is not judged.
    Raises ``DomainError`` if the stored grader set no longer parses."""

    if not run_live(run_id=run_id):
        return 0
    run = Run.objects.get(id=run_id)
    specs = list(run.grader_set.judges)
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
            checkpoint=lambda: run_live(run_id=run_id),
        )
    rung_finished(run_id=run_id)
    return written
