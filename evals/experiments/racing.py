"""Settling an experiment with more trials ("racing"): new trials go only to the variants still
in the best set, on the cases that separate them, in rounds of a design fixed when settling
starts (``stats.racing``: the plan's alpha spent over its looks; docs/statistics.md).

``experiment_settle_start`` fixes the plan (``Experiment.racing``), decides look 0 on the
finished runs and adds the first round's trials (``evals.runner.start.trials_add``: ordinary
trials of the variant's run). Each variant run's finalize enqueues
``experiment_settle_advance`` (a task, through the outbox), which waits until every variant
run is finished, decides the next look and adds its round or ends. A look is claimed by a
compare-and-set on ``Experiment.racing_look`` (the looks decided so far), in the transaction
that adds its trials, so a redelivered message or two workers decide a look once.

``Experiment.racing``: ``{"plan": RacingPlan.to_json(), "status": "running"|"done"|"failed",
"error", "rounds", "trials_per_round", "started_by", "looks": [look, ...]}``, each look
``{"look", "in_set": [positions], "active": [positions], "cases": [case ids sampled next],
"done", "reason", "trials_added", "figures": [{"position", "in_set", "beaten_by", "drop",
"drop_low", "drop_high"}]}``. A variant out at any look stays out: the experiment's set is
the intersection of its looks' sets (``racing_in_set``), never a fresh best set over all
the data at alpha."""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.db import transaction

from core.errors import DomainError
from core.roles import ENGINEER, LEAD, role_require
from evals.models import Experiment, ExperimentVariant, Run
from evals.run_status import runs_unanswered
from evals.runner.start import trials_add

ROUNDS_MAX = 5
TRIALS_PER_ROUND_MAX = 20
RUNNING, DONE, FAILED = "running", "done", "failed"


def _bounded(value, *, field: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DomainError("must be an integer", field=field)
    if not 1 <= value <= high:
        raise DomainError(f"must be from 1 to {high} (got {value})", field=field)
    return value


def experiment_settle_start(
    *, experiment: Experiment, rounds: int, trials_per_round: int, by=None
) -> Experiment:
    """Start racing ``experiment``: at most ``rounds`` (1 to ``ROUNDS_MAX``) rounds of
    ``trials_per_round`` (1 to ``TRIALS_PER_ROUND_MAX``) more trials per sampled case, each
    given only to the variants still in the set. Decides look 0 now.

    Raises ``PermissionDenied`` for anyone but engineers and leads (``by`` None: a command);
    ``DomainError`` on ``rounds`` / ``trials_per_round`` out of bounds, ``conflict`` when
    settling was already asked or a variant run is not finished (or was cancelled)."""
    if by is not None:
        role_require(by, ENGINEER, LEAD, action="settling an experiment with more trials")
    rounds = _bounded(rounds, field="rounds", high=ROUNDS_MAX)
    trials_per_round = _bounded(
        trials_per_round, field="trials_per_round", high=TRIALS_PER_ROUND_MAX
    )
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().get(id=experiment.id)
        if experiment.racing:
            raise DomainError(
                f"experiment {experiment.ref_text} is already settling or settled",
                field="rounds",
                code="conflict",
            )
        runs = _runs(experiment)
        unfinished = [r for r in runs if not r.is_terminal or r.status == Run.Status.CANCELLED]
        if unfinished:
            raise DomainError(
                f"every variant run must have finished first ({unfinished[0].ref_text} is "
                f"{unfinished[0].status})",
                field="rounds",
                code="conflict",
            )
        unanswered = runs_unanswered(runs)
        if unanswered:
            raise DomainError(
                f"{unanswered[0].ref_text} has no answered trial (every trial errored): retry "
                "its errored trials before settling",
                field="rounds",
                code="conflict",
            )
        from stats.racing import racing_plan  # noqa: PLC0415 - scipy, loaded when racing

        plan = racing_plan(alpha=experiment.alpha, rounds=rounds, trials_per_round=trials_per_round)
        racing: dict = {
            "plan": plan.to_json(),
            "status": RUNNING,
            "error": "",
            "rounds": rounds,
            "trials_per_round": trials_per_round,
            "started_by": getattr(by, "username", None),
            "looks": [],
        }
        Experiment.objects.filter(id=experiment.id).update(racing=racing)
        experiment.racing = racing
        _look_take(experiment, look_index=0)
    return Experiment.objects.get(id=experiment.id)


def experiment_settle_advance(*, experiment_id: int) -> Experiment:
    """Take racing one step: once every variant run has finished, decide the next look and add
    its round, or end. Idempotent (nothing while trials run; a look decided once)."""
    experiment = Experiment.objects.get(id=experiment_id)
    if experiment.racing.get("status") != RUNNING:
        return experiment
    runs = _runs(experiment)
    if not all(r.is_terminal for r in runs):
        return experiment  # a round's trials still run: their run's finalize calls again
    cancelled = [r for r in runs if r.status == Run.Status.CANCELLED]
    if cancelled:
        _end(experiment, FAILED, error=f"run {cancelled[0].ref_text} was cancelled")
        return Experiment.objects.get(id=experiment_id)
    try:
        with transaction.atomic():
            _look_take(experiment, look_index=experiment.racing_look)
    except DomainError as error:
        # A run reopened or cancelled since the check above: nothing of the look was
        # written; a cancelled run ends the racing, any other finalize calls again.
        stopped = Run.objects.filter(
            experiment_variant__experiment=experiment, status=Run.Status.CANCELLED
        ).first()
        if stopped is None:
            return Experiment.objects.get(id=experiment_id)
        _end(experiment, FAILED, error=f"run {stopped.ref_text} was cancelled: {error.message}")
    return Experiment.objects.get(id=experiment_id)


def _runs(experiment: Experiment) -> list[Run]:
    return [
        v.run
        for v in ExperimentVariant.objects.filter(experiment=experiment)
        .select_related("run")
        .order_by("position")
    ]


def _end(experiment: Experiment, status: str, *, error: str = "") -> None:
    racing = {**experiment.racing, "status": status, "error": error}
    Experiment.objects.filter(id=experiment.id, racing_look=experiment.racing_look).update(
        racing=racing
    )


def _look_take(experiment: Experiment, *, look_index: int) -> bool:
    """Decide look ``look_index`` and add its round, in the caller's transaction; False when
    another call decided it first (compare-and-set on ``racing_look``)."""
    from evals.experiments.decision import experiment_decision  # noqa: PLC0415 - cycle
    from stats.racing import RacingPlan, race_look  # noqa: PLC0415 - scipy, loaded when racing

    plan = RacingPlan.from_json(experiment.racing["plan"])
    looks = list(experiment.racing.get("looks", []))
    decision = experiment_decision(experiment=experiment)
    active_before = tuple(looks[-1]["active"]) if looks else None
    look = race_look(
        plan,
        look_index,
        decision.passed,
        decision.graded,
        active_before=active_before,
        metric=experiment.metric,
        k=int(experiment.k),
        names=[v.label for v in decision.variants],
    )
    done = bool(look.done) or look_index >= plan.rounds or not look.cases
    case_ids = [int(decision.case_ids[c]) for c in look.cases] if not done else []
    active = sorted(int(i) for i in look.active)
    record = {
        "look": look_index,
        "in_set": sorted(int(i) for i in look.best.in_set_indices()),
        "active": active,
        "cases": case_ids,
        "done": done,
        "reason": look.reason,
        "trials_added": 0,
        "figures": [_figure(f) for f in look.best.variants],
    }
    per_case = dict.fromkeys(case_ids, plan.trials_per_round)
    if not done:
        record["trials_added"] = len(active) * len(case_ids) * plan.trials_per_round
    racing = {**experiment.racing, "looks": [*looks, record], "status": DONE if done else RUNNING}
    claimed = Experiment.objects.filter(id=experiment.id, racing_look=look_index).update(
        racing=racing, racing_look=look_index + 1
    )
    if not claimed:
        return False
    if not done:
        variants = {v.position: v.run for v in _variant_rows(experiment)}
        for position in active:
            trials_add(run=variants[position], per_case=per_case)
    experiment.racing, experiment.racing_look = racing, look_index + 1
    return True


def _variant_rows(experiment: Experiment) -> list[ExperimentVariant]:
    return list(ExperimentVariant.objects.filter(experiment=experiment).select_related("run"))


def _figure(figure) -> dict:
    """A ``stats.best_set.VariantFigure`` as JSON (positions, not labels)."""
    return {
        "position": int(figure.index),
        "in_set": bool(figure.in_set),
        "beaten_by": None if figure.beaten_by is None else int(figure.beaten_by),
        "drop": _float(figure.drop),
        "drop_low": _float(figure.drop_low),
        "drop_high": _float(figure.drop_high),
        "note": figure.note,
    }


def _float(value) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class RacingSet:
    """What racing decided so far: ``in_set`` (positions in every look's set), for each
    position out, the ``figure`` of the first look that put it out (``out_figures``) and its
    ``look``; ``status`` of the racing; ``looks`` decided."""

    in_set: tuple[int, ...]
    out_figures: dict[int, dict]
    out_look: dict[int, int]
    status: str
    looks: int


def racing_in_set(experiment: Experiment) -> RacingSet | None:
    """The intersection of the stored looks' sets (None when the experiment never raced or no
    look is decided yet). No query."""
    looks = experiment.racing.get("looks", []) if experiment.racing else []
    if not looks:
        return None
    in_set = set(looks[0]["in_set"])
    out_figures: dict[int, dict] = {}
    out_look: dict[int, int] = {}
    for record in looks:
        for figure in record["figures"]:
            position = figure["position"]
            if not figure["in_set"] and position not in out_figures:
                out_figures[position] = figure
                out_look[position] = record["look"]
        in_set &= set(record["in_set"])
    return RacingSet(
        in_set=tuple(sorted(in_set)),
        out_figures=out_figures,
        out_look=out_look,
        status=experiment.racing.get("status", ""),
        looks=len(looks),
    )


def racing_best_set(*, experiment: Experiment, best):
    """``best`` (a ``stats.best_set.BestSet`` over all the data) with the set racing decided:
    a variant is in only when it was in at every look (``racing_in_set``); one out keeps the
    figures (``beaten_by``, drop and interval, ``note``) of the look that put it out.
    ``best`` itself when the experiment never raced. No query."""
    raced = racing_in_set(experiment)
    if raced is None:
        return best
    figures = []
    for f in best.variants:
        out = raced.out_figures.get(f.index)
        if f.index in raced.in_set or out is None:
            figures.append(replace(f, in_set=f.index in raced.in_set))
            continue
        figures.append(
            replace(
                f,
                in_set=False,
                beaten_by=out["beaten_by"],
                drop=out["drop"],
                drop_low=out["drop_low"],
                drop_high=out["drop_high"],
                p_value=None,
                note=f"{out.get('note') or ''} (racing look {raced.out_look[f.index]})".strip(),
            )
        )
    last = experiment.racing["looks"][-1]
    return replace(
        best,
        variants=tuple(figures),
        decided=len(raced.in_set) == 1,
        reason=last["reason"],
        method=f"{best.method}; raced: the set is the intersection of {raced.looks} looks' "
        "sets, each at its share of alpha (docs/statistics.md)",
    )
