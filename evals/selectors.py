"""Reads for evals: the run list, run resolution, the run-case view and the trial page."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.core.management.base import CommandError
from django.core.paginator import Page, Paginator
from django.db import models
from django.db.models.functions import Length, Substr

from core.errors import DomainError
from core.ids import uuid_parse
from evals.blindness import blind_for, blind_run_ids, grades_prefetch, labels_prefetch
from evals.comparison.baseline_verdicts import NO_MARK, baseline_marks_get, with_suite_baseline
from evals.grading.verdict import trial_verdict_annotations
from evals.models import Case, Run, Trial
from evals.report.cost_quality import CostQuality, cost_quality
from evals.report.costs import runs_cost_classes
from evals.run_status import run_trial_count, runs_status_shown_filter
from evals.trajectory.timeline import trajectory_timeline
from stats.intervals import clustered_rate_interval

RUN_LIST_PAGE_SIZE = 50


@dataclass(frozen=True)
class RunListStats:
    """Per-run aggregates for the run list, by the run report's rules (``evals.report``).

    ``pass_rate``: mean of per-case rates in [0, 1], None when nothing was graded (the report's
    ``overall.pass_rate.mean``), with its 95% interval ``pass_rate_low``/``_high``
    (``stats.intervals.clustered_rate_interval``); ``passed``/``graded`` trials;
    ``judge_errors``: ok trials out for an errored gating grade; ``errored_trials``;
    ``cost_known_usd`` (USD, Decimal) and ``cost_unknown`` over ``finished`` trials;
    ``cost_why``: why costs are unknown (``evals.report.costs.CostClasses.reasons``)."""

    passed: int
    graded: int
    errored_trials: int
    judge_errors: int
    cost_known_usd: Decimal | None
    cost_unknown: int
    finished: int
    pass_rate: float | None = None
    pass_rate_low: float | None = None
    pass_rate_high: float | None = None
    cost_why: str = ""

    @property
    def quality(self) -> CostQuality:
        """Cost per passing trial and pass rate per dollar (``evals.report.cost_quality``)."""
        return cost_quality(
            finished=self.finished,
            cost_known_usd=self.cost_known_usd,
            cost_unknown=self.cost_unknown,
            passed=self.passed,
            pass_rate=self.pass_rate,
            pass_rate_low=self.pass_rate_low,
            pass_rate_high=self.pass_rate_high,
            unknown_why=self.cost_why,
        )

    @property
    def cost_state(self) -> str:
        """ "none", "unknown" (every cost), "partial" (a lower bound) or "known"."""
        if self.finished == 0:
            return "none"
        if self.cost_unknown == self.finished:
            return "unknown"
        return "partial" if self.cost_unknown else "known"


EMPTY_RUN_STATS = RunListStats(0, 0, 0, 0, None, 0, 0)


def run_resolve(*, ref: str, field: str = "run") -> Run:
    """The run named by ``ref``: its UUID, ``suite/run`` (a name holding slashes is tried at every
    slash) or a run name unique in the database; suite selected. Raises
    ``DomainError(field=field)``: ``not_found``, or ``conflict`` when several match."""
    text = (ref or "").strip()
    hint = "give a run UUID, 'suite/run' or a unique run name"
    if not text:
        raise DomainError(f"expected a run: {hint}", field=field)
    runs = Run.objects.select_related("suite")
    value = uuid_parse(text)
    if value is not None:
        run = runs.filter(uuid=value).first()
        if run is None:
            raise DomainError(f"no run with id {value}", field=field, code="not_found")
        return run
    matches: dict[int, Run] = {}
    for i, char in enumerate(text):
        if char == "/":
            for run in runs.filter(suite__name=text[:i], name=text[i + 1 :]):
                matches[run.id] = run
    if not matches:
        matches = {run.id: run for run in runs.filter(name=text)[:2]}
        if len(matches) > 1:
            raise DomainError(
                f"{text!r} names runs of several suites; give 'suite/run' or the run UUID",
                field=field,
                code="conflict",
            )
    if not matches:
        raise DomainError(f"no run {text!r}: {hint}", field=field, code="not_found")
    if len(matches) > 1:
        raise DomainError(
            f"{text!r} is ambiguous ({len(matches)} runs); give the run UUID",
            field=field,
            code="conflict",
        )
    return next(iter(matches.values()))


def run_lookup(ref: str) -> Run:
    """``run_resolve`` for management commands; ``CommandError`` with the message alone."""
    try:
        return run_resolve(ref=ref)
    except DomainError as exc:
        raise CommandError(exc.message) from exc


def run_list(
    *,
    suite_uuid: str | None = None,
    status: str | None = None,
    page: int | str = 1,
    per_page: int = RUN_LIST_PAGE_SIZE,
    viewer=None,
) -> Page:
    """Runs, newest first, filtered by suite UUID and shown status, one page at a time.

    Each run has suite and started_by joined, ``stats`` (``RunListStats``), ``trial_count`` and
    ``mark`` (``evals.comparison.baseline_verdicts.BaselineMark``). Queries: count, page, one
    aggregate per distinct gating grader set, at most four for the marks (none without a
    baseline), and one more with a
    ``viewer`` still labeling (a run blind for them gets ``blind`` True and empty stats).
    Raises ``DomainError`` for an unknown ``status`` or a ``suite_uuid`` that is not a UUID."""
    runs = with_suite_baseline(Run.objects.select_related("suite", "started_by")).order_by(
        "-created_at", "-id"
    )
    if suite_uuid:
        parsed = uuid_parse(str(suite_uuid))
        if parsed is None:
            raise DomainError(f"{suite_uuid!r} is not a suite id", field="suite")
        runs = runs.filter(suite__uuid=parsed)
    if status:
        runs = runs_status_shown_filter(runs, status=status)
    page_obj = Paginator(runs, per_page).get_page(page)
    page_obj.object_list = list(page_obj.object_list)
    stats = run_list_stats(runs=page_obj.object_list)
    blind = blind_run_ids(viewer, run_ids=[r.id for r in page_obj.object_list]) if viewer else ()
    marks = baseline_marks_get(runs=page_obj.object_list)
    for run in page_obj.object_list:
        run.mark = marks.get(run.id, NO_MARK)  # baseline badge, regression flag
        run.blind = run.id in blind  # its verdict totals are withheld (evals.blindness)
        run.stats = EMPTY_RUN_STATS if run.blind else stats.get(run.id, EMPTY_RUN_STATS)
        run.trial_count = run_trial_count(run)
    return page_obj


def run_list_stats(
    *, runs: list[Run] | None = None, run_ids: list[int] | None = None
) -> dict[int, RunListStats]:
    """Aggregates by run id for ``runs`` (or ``run_ids``): one query per gating grader set, and
    one for why costs are unknown when some are (``evals.report.costs``)."""
    if runs is None:
        runs = list(Run.objects.filter(id__in=run_ids or []).only("id", "graders"))
    by_keys: dict[tuple[str, ...], list[int]] = {}
    for run in runs:
        by_keys.setdefault(run.grader_set.gating_keys, []).append(run.id)
    rows: list[dict] = []
    for keys, run_ids in by_keys.items():
        rows.extend(_run_case_counts(run_ids=run_ids, keys=keys))
    per_run: dict[int, list[dict]] = {}
    for row in rows:
        per_run.setdefault(row["run_id"], []).append(row)
    stats = {run_id: _fold_case_counts(case_rows) for run_id, case_rows in per_run.items()}
    unknown = [run for run in runs if run.id in stats and stats[run.id].cost_unknown]
    if unknown:
        for run_id, classes in runs_cost_classes(runs=unknown).items():
            stats[run_id] = dataclasses.replace(stats[run_id], cost_why=classes.reasons)
    return stats


def _run_case_counts(*, run_ids: list[int], keys: tuple[str, ...]) -> list[dict]:
    """Trial counts per (run, case) for runs sharing the gating grader set ``keys``."""
    ok, err = Trial.Status.OK, Trial.Status.ERROR
    trial_ok = models.Q(status=ok)
    fail = trial_ok & models.Q(v_has_fail=True)
    grade_err = trial_ok & models.Q(v_has_fail=False, v_has_grade_error=True)
    passed = trial_ok & models.Q(
        v_has_fail=False, v_has_grade_error=False, v_gating_passed=len(keys)
    )
    if not keys:  # no gating grader: nothing can pass or fail (the report says "missing")
        passed = fail = grade_err = models.Q(pk__in=[])
    finished = models.Q(status__in=[ok, err])
    return list(
        Trial.objects.filter(run_id__in=run_ids)
        .annotate(**trial_verdict_annotations(keys))
        .values("run_id", "case_id")
        .order_by()
        .annotate(
            n_pass=models.Count("id", filter=passed),
            n_fail=models.Count("id", filter=fail),
            n_grade_err=models.Count("id", filter=grade_err),
            n_err=models.Count("id", filter=models.Q(status=err)),
            n_finished=models.Count("id", filter=finished),
            n_total=models.Count("id"),
            n_cost_unknown=models.Count("id", filter=finished & models.Q(cost_usd__isnull=True)),
            cost=models.Sum("cost_usd", filter=finished),
        )
    )


def _fold_case_counts(rows: list[dict]) -> RunListStats:
    """One run's per-case rows -> ``RunListStats`` (mean of per-case rates, clustered interval)."""
    counts = [(r["n_pass"], r["n_pass"] + r["n_fail"]) for r in rows if r["n_pass"] + r["n_fail"]]
    rate = clustered_rate_interval([p for p, _ in counts], [g for _, g in counts])
    costs = [r["cost"] for r in rows if r["cost"] is not None]

    def total(field: str) -> int:
        return sum(r[field] for r in rows)

    return RunListStats(
        passed=total("n_pass"),
        graded=total("n_pass") + total("n_fail"),
        errored_trials=total("n_err"),
        judge_errors=total("n_grade_err"),
        cost_known_usd=sum(costs, Decimal(0)) if costs else None,
        cost_unknown=total("n_cost_unknown"),
        finished=total("n_finished"),
        pass_rate=rate.mean,
        pass_rate_low=rate.ci_low,
        pass_rate_high=rate.ci_high,
    )


def trial_preview_queryset() -> models.QuerySet:
    """Trials without their full output: ``output_preview`` (first
    ``ASSAY["OUTPUT_PREVIEW_CHARS"]`` characters, cut in the database), ``output_length`` and
    ``output_truncated``."""
    limit = settings.ASSAY["OUTPUT_PREVIEW_CHARS"]
    return (
        Trial.objects.defer("output", "raw_response")
        .annotate(output_preview=Substr("output", 1, limit), output_length=Length("output"))
        .annotate(
            output_truncated=models.ExpressionWrapper(
                models.Q(output_length__gt=limit), output_field=models.BooleanField()
            )
        )
    )


def run_case_get(*, run_uuid, case_uuid, viewer) -> tuple[Run, Case, list[Trial]]:
    """A case as seen in a run by ``viewer``: ``(run, case, trials)`` by attempt, each with its
    output preview, grades and labels as ``viewer`` may see them (``evals.blindness``), and
    ``blind``. Raises ``Run.DoesNotExist`` / ``Case.DoesNotExist`` (the case must be of the run's
    suite)."""
    run = Run.objects.select_related("suite").get(uuid=run_uuid)
    case = Case.objects.get(uuid=case_uuid, suite_id=run.suite_id)
    blind = blind_for(viewer)
    trials = list(
        trial_preview_queryset()
        .filter(run=run, case=case)
        .prefetch_related(grades_prefetch(viewer, blind=blind), labels_prefetch(viewer))
        .order_by("attempt")
    )
    for trial in trials:
        trial.blind = blind.holds(case)
    return run, case, trials


def trial_get(*, trial_uuid, viewer) -> Trial:
    """One trial with its full output, grades and labels as ``viewer`` may see them, ``blind``, and
    ``timeline`` (``evals.trajectory.timeline``; None without a trajectory). Raises
    ``Trial.DoesNotExist``."""
    blind = blind_for(viewer)
    trial = (
        Trial.objects.select_related("run__suite", "case")
        .prefetch_related(grades_prefetch(viewer, blind=blind), labels_prefetch(viewer))
        .get(uuid=trial_uuid)
    )
    trial.blind = blind.holds(trial.case)
    trial.timeline = trajectory_timeline(trial.trajectory)
    return trial


# --- run report ---------------------------------------------------------------------------


# --- baselines ----------------------------------------------------------------------------
