"""Settling suspects with more trials: a comparison's top-up, and adaptive runs.

A top-up adds trials in rounds to the suspect cases of a head run and of its base (replayed
too) until the gate's decision is final or a cap is hit. The design is fixed at the start
(``evals.comparison.gate.gate_plan``, ``stats.sequential``); every look decides with
``gate_evaluate`` over the runs' own trials plus the top-up's. Added trials are ordinary
trials marked with the top-up and round; nothing is deleted.

``top_up_advance`` (a task, idempotent) waits until both runs are finished, decides, and
ends the top-up or adds the next round (``trials_add``, compare-and-set on the round
number); each run's finalize enqueues it again."""

from __future__ import annotations

import json
import time
from copy import copy
from dataclasses import replace
from decimal import Decimal

from django.db import transaction
from django.db.models import Avg, Count, F, Q, Sum
from django.utils import timezone

from core.errors import DomainError
from core.money import usd_text
from core.outbox import outbox_enqueue
from core.roles import ENGINEER, LEAD, role_require
from evals.comparison.gate import (
    TOP_UP_VERDICTS,
    GateDecision,
    gate_evaluate,
    gate_exit_code,
    gate_plan,
    plan_json,
)
from evals.comparison.render import gate_json
from evals.comparison.run_data import runs_data_get
from evals.models import Case, Run, TopUp, Trial
from evals.runner.finalize import run_finalize, trials_cancel
from evals.runner.replay import run_replay_refusal
from evals.runner.start import trials_add
from evals.tasks import top_up_advance as top_up_advance_task
from stats.design import fixed_design_trials, simulate_design
from stats.sequential import TopUpPlan

ACTIVE = (TopUp.Status.QUEUED, TopUp.Status.RUNNING)


def top_up_start(
    *,
    base: Run,
    head: Run,
    alpha: float = 0.05,
    max_trials_per_case: int | None = None,
    max_cost_usd: Decimal | None = None,
    by=None,
    adaptive: bool = False,
) -> TopUp:
    """Start settling the suspects of ``head`` against ``base`` with more trials.

    ``max_trials_per_case``: trials a side a case may reach, first N included (whole rounds;
    default 4N); ``max_cost_usd``: stop before a round that would pass it (USD). An active
    top-up of the same runs is returned as it is. Raises PermissionDenied for anyone but
    engineers and leads (``by`` None: a command), ``DomainError`` for a run that cannot be
    replayed (naming ``head`` or ``base``), runs of different suites, or a cost cap on runs
    of unknown cost."""
    if by is not None:
        role_require(by, ENGINEER, LEAD, action="settling suspects with more trials")
    existing = _existing(base=base, head=head, alpha=alpha)
    if existing is not None:
        return existing
    if base.suite_id != head.suite_id:
        raise DomainError("base and head are runs of different suites", field="base")
    for side, run in (("head", head), ("base", base)):
        refusal = _replay_refusal(run)
        if refusal:
            raise DomainError(refusal, field=side)
    if max_cost_usd is not None:
        if max_cost_usd <= 0:
            raise DomainError("must be a positive amount of USD", field="max_cost_usd")
        for run in (head, base):
            unknown = Trial.objects.filter(
                run=run, status=Trial.Status.OK, cost_usd__isnull=True
            ).count()
            if unknown:
                raise DomainError(
                    f"the cost of {unknown} trial(s) of run {run.name!r} is unknown: a cost "
                    "cap cannot be kept",
                    field="max_cost_usd",
                )
    plan = gate_plan(
        alpha=alpha,
        trials_per_case=head.trials_per_case,
        suite_kind=head.suite.kind,
        top_up=True,
        max_trials_per_case=max_trials_per_case,
    )
    with transaction.atomic():
        # One start at a time per head run (PostgreSQL; SQLite serialises writes anyway).
        Run.objects.select_for_update().filter(id=head.id).first()
        existing = _existing(base=base, head=head, alpha=alpha)
        if existing is not None:
            return existing
        top_up = TopUp.objects.create(
            base=base,
            head=head,
            alpha=alpha,
            plan=plan_json(plan),
            max_trials_per_case=plan.cap,
            max_cost_usd=max_cost_usd,
            adaptive=adaptive,
            started_by=by if getattr(by, "is_authenticated", False) else None,
        )
        outbox_enqueue(top_up_advance_task, top_up.id, subject=f"evals.top_up:{top_up.id}")
    return top_up


def _replay_refusal(run: Run) -> str | None:
    """``run_replay_refusal``, but a run busy with another top-up's round (a shared base) serves."""
    if (
        run.status == Run.Status.RUNNING
        and TopUp.objects.filter(Q(base=run) | Q(head=run), status=TopUp.Status.RUNNING).exists()
    ):
        run = copy(run)
        run.status = Run.Status.SUCCEEDED
    return run_replay_refusal(run=run)


def _existing(*, base: Run, head: Run, alpha: float) -> TopUp | None:
    """The pair's top-up a new start joins: an active one, or one settled at the same alpha (its
    decision is final; starting again would ask the same question twice)."""
    return (
        TopUp.objects.filter(base=base, head=head)
        .filter(Q(status__in=ACTIVE) | Q(status=TopUp.Status.SETTLED, alpha=alpha))
        .first()
    )


def top_up_refused(decision: GateDecision, reason: str) -> GateDecision:
    """The decision on the trials there are for a top-up that cannot run (``reason``: why), with a
    note naming the unresolved suspects and the trials a side that would settle them."""
    unresolved = [
        f"{v.key} (a new run of about {v.settle_trials} trials a side)"
        if v.settle_trials
        else f"{v.key} (no feasible number of trials)"
        for v in decision.suspects
    ]
    note = f"no trial can be added ({reason}): decided on the trials there are"
    if unresolved:
        more = f" and {len(unresolved) - 10} more" if len(unresolved) > 10 else ""
        note += f"; unresolved: {', '.join(unresolved[:10])}{more}"
    return replace(decision, notes=[note, *decision.notes])


def _plan(top_up: TopUp, head: Run) -> TopUpPlan:
    return gate_plan(
        alpha=top_up.alpha,
        trials_per_case=top_up.plan.get("first_trials", head.trials_per_case),
        suite_kind=top_up.plan.get("suite_kind", head.suite.kind),
        top_up=True,
        max_trials_per_case=top_up.max_trials_per_case,
    )


def top_up_decide(*, top_up: TopUp):
    """``(comparison, decision)`` of the runs with this top-up's rounds, under its fixed design."""
    base = Run.objects.select_related("suite").get(id=top_up.base_id)
    head = Run.objects.select_related("suite").get(id=top_up.head_id)
    plan = _plan(top_up, head)
    data = runs_data_get(runs=[base, head], top_up=top_up.id)
    return gate_evaluate(
        head=data[head.id],
        base=data[base.id],
        alpha=top_up.alpha,
        plan=plan,
    )


def _finish(top_up: TopUp, status: str, decision: dict | None, error: str = "") -> None:
    """End the top-up with ``decision`` taken at look ``top_up.rounds_done``, by compare-and-set on
    ``rounds_done``: a decision overtaken by a newer round is dropped (that round decides)."""
    TopUp.objects.filter(id=top_up.id, status__in=ACTIVE, rounds_done=top_up.rounds_done).update(
        status=status, decision=decision, error=error, finished_at=timezone.now()
    )


def _cost_per_trial(run_id: int) -> Decimal | None:
    row = Trial.objects.filter(run_id=run_id, status=Trial.Status.OK).aggregate(
        mean=Avg("cost_usd"), unknown=Count("id", filter=Q(cost_usd__isnull=True))
    )
    if row["unknown"] or row["mean"] is None:
        return None
    return Decimal(str(row["mean"]))


def _spent(top_up: TopUp) -> Decimal:
    total = Trial.objects.filter(top_up=top_up).aggregate(s=Sum("cost_usd"))["s"]
    return Decimal(str(total or 0))


def top_up_advance(*, top_up_id: int) -> TopUp:
    """Take the top-up one step: decide once both runs are finished, then end it or add the next
    round. Idempotent: the round is added by compare-and-set; nothing while trials run."""
    top_up = TopUp.objects.select_related("base", "head").get(id=top_up_id)
    if top_up.is_terminal:
        return top_up
    if not (top_up.base.is_terminal and top_up.head.is_terminal):
        return top_up  # trials of this round are still running: their finalize calls again
    for run in (top_up.head, top_up.base):
        if run.status == Run.Status.CANCELLED:
            _finish(top_up, TopUp.Status.FAILED, None, error=f"run {run.name!r} was cancelled")
            return TopUp.objects.get(id=top_up_id)
    comparison, decision = top_up_decide(top_up=top_up)
    decided = json.loads(gate_json(comparison, decision))
    if decision.exit_code == 2 and decision.verdict not in TOP_UP_VERDICTS:
        _finish(top_up, TopUp.Status.FAILED, decided, error=decision.sentence)
        return TopUp.objects.get(id=top_up_id)
    if decision.verdict not in TOP_UP_VERDICTS:
        if top_up.adaptive:
            decided["design"] = design_figure(
                comparison=comparison, plan=_plan(top_up, top_up.head)
            )
        _finish(top_up, TopUp.Status.SETTLED, decided)
        return TopUp.objects.get(id=top_up_id)
    next_round = decision.next_round
    if top_up.max_cost_usd is not None:
        added = sum(b + h for b, h in next_round.values())
        per_trial = _cost_per_trial(top_up.head_id)
        estimate = None if per_trial is None else per_trial * added
        if estimate is None or _spent(top_up) + estimate > top_up.max_cost_usd:
            capped = dict(decided)
            capped["decision"] = {
                **decided["decision"],
                "exit_code": gate_exit_code("cannot decide"),
                "title": "cannot decide",
                "verdict": "cannot decide",
                "sentence": (
                    f"Cannot decide: {len(next_round)} suspect case(s) are unresolved and the "
                    f"next round (about {_usd(estimate)}) would pass the cost cap of "
                    f"{usd_text(top_up.max_cost_usd)}; " + decision.sentence
                ),
            }
            if top_up.adaptive:
                capped["design"] = design_figure(
                    comparison=comparison, plan=_plan(top_up, top_up.head)
                )
            _finish(top_up, TopUp.Status.CAPPED, capped)
            return TopUp.objects.get(id=top_up_id)
    look = top_up.rounds_done + 1
    # Cases are matched by content: the comparison's key names head's case.
    digest = {row.key: row.content_hash for row in comparison.cases}
    head_case = _case_ids(top_up.head_id, [digest[k] for k in next_round])
    base_case = _case_ids(top_up.base_id, [digest[k] for k in next_round])
    # The claim of the round and its trials commit together: a round is never counted
    # without its trials (a run reopened meanwhile, e.g. a base shared with another
    # top-up, rolls both back; that run's finalize calls this again).
    try:
        _round_add(top_up, look, next_round, head_case, base_case, digest)
    except DomainError as exc:
        if Run.objects.filter(
            id__in=[top_up.base_id, top_up.head_id], status=Run.Status.CANCELLED
        ).exists():
            _finish(top_up, TopUp.Status.FAILED, decided, error=str(exc))
    return TopUp.objects.get(id=top_up_id)


def _round_add(top_up, look, next_round, head_case, base_case, digest) -> bool:
    """Claim round ``look`` (compare-and-set on ``rounds_done``) and add its trials, in one
    transaction; False when another call claimed it first. Raises ``DomainError`` (nothing
    written) when a run is not finished."""
    with transaction.atomic():
        claimed = TopUp.objects.filter(
            id=top_up.id, status__in=ACTIVE, rounds_done=top_up.rounds_done
        ).update(status=TopUp.Status.RUNNING, rounds_done=look)
        if not claimed:
            return False
        head_ids = trials_add(
            run=top_up.head,
            per_case={head_case[digest[k]]: h for k, (_, h) in next_round.items()},
            top_up=top_up,
            top_up_round=look,
        )
        base_ids = trials_add(
            run=top_up.base,
            per_case={base_case[digest[k]]: b for k, (b, _) in next_round.items()},
            top_up=top_up,
            top_up_round=look,
        )
        TopUp.objects.filter(id=top_up.id).update(
            trials_added=F("trials_added") + len(head_ids) + len(base_ids)
        )
    return True


DESIGN_SIMULATIONS = 200  # power SE at most 0.035; about a second a look at 12 cases
DESIGN_MAX_TRIALS = 64  # per case a side: the largest fixed design searched


def design_figure(*, comparison, plan: TopUpPlan) -> dict:
    """ "Trials spent vs a fixed design of the same power" for an ended adaptive top-up.

    ``spent_trials``: both sides, first ones included. Taking each case's observed cumulative
    rates as the truth (a plug-in alternative): ``power`` (± ``power_se``, Monte Carlo over
    ``n_sim`` seeded simulations) and ``expected_trials`` of this design
    (``stats.design.simulate_design``); ``fixed_trials`` and ``fixed_trials_per_case`` for one
    look at that power (``stats.design.fixed_design_trials``; None past ``DESIGN_MAX_TRIALS``).
    Without a case worse in head, those are None and ``note`` says why."""
    rows = [r for r in comparison.cases if r.base_graded and r.head_graded]
    base_rates, head_rates = [], []
    for r in rows:
        bp, bg = (sum(x) for x in zip(*r.base_looks, strict=True))
        hp, hg = (sum(x) for x in zip(*r.head_looks, strict=True))
        base_rates.append(bp / bg if bg else 0.0)
        head_rates.append(hp / hg if hg else 0.0)
    out = {
        "spent_trials": comparison.base_counts.trials + comparison.head_counts.trials,
        "expected_trials": None,
        "fixed_trials": None,
        "fixed_trials_per_case": None,
        "power": None,
        "power_se": None,
        "n_sim": DESIGN_SIMULATIONS,
        "note": "",
    }
    if not any(h < b for b, h in zip(base_rates, head_rates, strict=True)):
        out["note"] = "no case did worse in head: there is no drop to power against"
        return out
    adaptive = simulate_design(
        base_rates=base_rates, head_rates=head_rates, plan=plan, n_sim=DESIGN_SIMULATIONS
    )
    out.update(
        power=adaptive.power, power_se=adaptive.power_se, expected_trials=round(adaptive.trials)
    )
    if adaptive.power <= 0:
        out["note"] = "the observed drops are too small for either design to catch"
        return out
    fixed = fixed_design_trials(
        base_rates=base_rates,
        head_rates=head_rates,
        # A power of 1 in n_sim simulations is "at least 1 - 1/(2 n_sim)".
        target_power=min(adaptive.power, 1 - 0.5 / DESIGN_SIMULATIONS),
        alpha=plan.alpha,
        suite_kind=plan.suite_kind,
        max_trials=DESIGN_MAX_TRIALS,
        n_sim=DESIGN_SIMULATIONS,
    )
    if fixed.trials is None:
        out["note"] = (
            f"a fixed design would need more than {DESIGN_MAX_TRIALS} trials per case a side"
        )
    out.update(fixed_trials=fixed.trials, fixed_trials_per_case=fixed.trials_per_side)
    return out


def _case_ids(run_id: int, hashes: list[str]) -> dict[str, int]:
    """Content hash -> id of the case the run's trials are of."""
    return dict(
        Case.objects.filter(content_hash__in=hashes, trials__run_id=run_id)
        .values_list("content_hash", "id")
        .distinct()
    )


def top_up_cancel(*, top_up: TopUp, by=None) -> bool:
    """Stop a top-up (compare-and-set): no further round, its queued trials cancelled, calls in
    flight finish and count. False when it had already ended."""
    if by is not None:
        role_require(by, ENGINEER, LEAD, action="cancelling a top-up")
    with transaction.atomic():
        changed = TopUp.objects.filter(id=top_up.id, status__in=ACTIVE).update(
            status=TopUp.Status.CANCELLED, finished_at=timezone.now()
        )
        if changed:
            queued: dict[int, list[int]] = {}
            for trial_id, run_id in Trial.objects.filter(
                top_up_id=top_up.id, status=Trial.Status.QUEUED
            ).values_list("id", "run_id"):
                queued.setdefault(run_id, []).append(trial_id)
            for run_id, trial_ids in queued.items():
                trials_cancel(run_id=run_id, trial_ids=trial_ids, uncount=True)
    if changed:
        for run_id in (top_up.base_id, top_up.head_id):
            run_finalize(run_id=run_id)
    return bool(changed)


def _usd(value: Decimal | None) -> str:
    return "an unknown cost" if value is None else usd_text(value)


def top_up_result(*, top_up: TopUp):
    """``(comparison, decision)`` of an ended top-up. One that ended with suspects open (cost cap,
    failure, cancel) cannot decide (exit 2) and says why; only a settled one passes or blocks."""
    comparison, decision = top_up_decide(top_up=top_up)
    if top_up.status != TopUp.Status.SETTLED and decision.verdict in TOP_UP_VERDICTS:
        stored = (top_up.decision or {}).get("decision", {})
        if top_up.status == TopUp.Status.CAPPED and stored.get("sentence"):
            sentence = stored["sentence"]
        else:
            why = f": {top_up.error}" if top_up.error else ""
            sentence = (
                f"Cannot decide: the top-up {top_up.get_status_display()}{why}; "
                + decision.sentence
            )
        decision = replace(
            decision,
            verdict="cannot decide",
            title="cannot decide",
            sentence=sentence,
            reasons=[sentence],
        )
    return comparison, decision


def top_up_settled_get(*, base: Run, head: Run, alpha: float) -> TopUp | None:
    """The newest settled (or cost-capped) top-up of the pair at ``alpha``: its decision holds."""
    return (
        TopUp.objects.filter(
            base=base,
            head=head,
            alpha=alpha,
            status__in=(TopUp.Status.SETTLED, TopUp.Status.CAPPED),
        )
        .order_by("-id")
        .first()
    )


def comparison_decision(
    *,
    base: Run,
    head: Run,
    alpha: float,
    max_errored_fraction: float = 0.0,
    allow_untrusted: bool = False,
    allow_incomparable: bool = False,
):
    """``(comparison, decision)`` of ``head`` against ``base`` as every surface shows it: under the
    default policy, once a top-up at ``alpha`` settled or hit its cost cap, the top-up's
    (``top_up_result``); else ``gate_evaluate`` on the runs' own trials, raising what it raises."""
    default_policy = not (max_errored_fraction or allow_untrusted or allow_incomparable)
    top_up = top_up_settled_get(base=base, head=head, alpha=alpha) if default_policy else None
    if top_up is not None:
        return top_up_result(top_up=top_up)
    return gate_evaluate(
        head=head,
        base=base,
        alpha=alpha,
        max_errored_fraction=max_errored_fraction,
        allow_untrusted=allow_untrusted,
        allow_incomparable=allow_incomparable,
    )


def top_up_wait(*, top_up: TopUp, timeout_s: float, poll_s: float = 0.5) -> TopUp:
    """Wait up to ``timeout_s`` seconds for ``top_up`` to end; returns it as it then is."""
    deadline = time.monotonic() + timeout_s
    while True:
        top_up.refresh_from_db()
        if top_up.is_terminal or time.monotonic() >= deadline:
            return top_up
        time.sleep(poll_s)


def adaptive_start(*, run_id: int) -> TopUp | None:
    """The top-up of an adaptive run once its first N trials per case are done; None when the run
    did not succeed or has no baseline. Idempotent. When it cannot start, a failed top-up
    records why, so the page says so and ``run_suite --wait`` ends."""
    run = Run.objects.select_related("suite", "against").get(id=run_id)
    if run.against is None or run.status != Run.Status.SUCCEEDED:
        return None
    existing = TopUp.objects.filter(head=run, base=run.against).first()
    if existing is not None:
        return existing
    try:
        return top_up_start(base=run.against, head=run, adaptive=True)
    except DomainError as exc:
        return TopUp.objects.create(
            base=run.against,
            head=run,
            adaptive=True,
            plan={"first_trials": run.trials_per_case},
            max_trials_per_case=run.trials_per_case,
            status=TopUp.Status.FAILED,
            error=f"no trial could be added: {exc}",
            finished_at=timezone.now(),
        )
