"""What the experiment page reads beyond the decision: the variant × case grid sorted by the
cases that separate the variants, one case's trials side by side across variants, the points
of the quality–cost chart. The decision itself (best set, cheapest, front, sentence) is
``evals.experiments.decision``; this module only arranges it for a page."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
from django.db.models import Count

from evals.blindness import blind_for, grades_prefetch, labels_prefetch
from evals.charts.pareto import ParetoPoint
from evals.experiments.decision import ExperimentDecision, experiment_variants
from evals.models import Case, Experiment, ExperimentVariant
from evals.selectors import trial_preview_queryset
from evals.target_diff import TargetDiff, target_diff
from evals.target_shown import ShownRow, target_shown

GRID_PAGE_SIZE = 100  # cases on one page of the grid (the first view shows the first page)
GRID_SORTS = ("separates", "case")  # separating cases first (the default), or case order


@dataclass(frozen=True)
class GridCell:
    """One variant on one case: ``passed`` of ``graded`` trials; ``rate`` None when none graded."""

    label: str
    passed: int
    graded: int
    rate: float | None

    @property
    def tone(self) -> str:
        """The cell's colour class: ``pass`` (all), ``fail`` (none), ``mixed``, ``none``."""
        if not self.graded:
            return "none"
        if self.passed == self.graded:
            return "pass"
        return "fail" if self.passed == 0 else "mixed"


@dataclass(frozen=True)
class GridRow:
    """One case of the grid: its ``case`` (uuid, key) and ``spread`` (highest minus lowest pass
    rate across variants with a graded trial, 0 to 1), one cell per variant by position."""

    case: Case
    spread: float
    cells: tuple[GridCell, ...]


@dataclass(frozen=True)
class GridPage:
    """A page of the grid: ``rows``, ``number`` (1-based), ``pages``, ``total`` cases and how
    many follow this page (``more``)."""

    rows: tuple[GridRow, ...]
    number: int
    pages: int
    total: int
    more: int
    sort: str


def case_spread(passed: np.ndarray, graded: np.ndarray) -> np.ndarray:
    """Per case (columns of the ``(V, C)`` counts): the highest minus the lowest pass rate over
    the variants that graded it (0 when fewer than two did); shape ``(C,)``, 0 to 1."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(graded > 0, passed / np.maximum(graded, 1), np.nan)
    seen = np.sum(graded > 0, axis=0)
    high = np.nanmax(np.where(np.isnan(rates), -np.inf, rates), axis=0, initial=-np.inf)
    low = np.nanmin(np.where(np.isnan(rates), np.inf, rates), axis=0, initial=np.inf)
    spread = np.where(seen >= 2, high - low, 0.0)
    return spread if spread.size else np.zeros(passed.shape[1])


def experiment_grid(
    *, decision: ExperimentDecision, page: int = 1, sort: str = "separates"
) -> GridPage:
    """The grid's page ``page`` (clamped to 1..pages) of ``GRID_PAGE_SIZE`` cases, sorted by
    ``sort``: ``separates`` (largest spread first, then case id) or ``case`` (case id). One
    query (the page's cases), whatever the suite's size."""
    case_ids, passed, graded = decision.case_ids, decision.passed, decision.graded
    total = int(case_ids.shape[0])
    if sort == "separates" and total:
        spread = case_spread(passed, graded)
        order = np.lexsort((case_ids, -spread))  # spread descending, ties by case id
    else:
        spread = case_spread(passed, graded) if total else np.zeros(0)
        order = np.arange(total)
    pages = max(1, -(-total // GRID_PAGE_SIZE))
    number = min(max(1, page), pages)
    shown = order[(number - 1) * GRID_PAGE_SIZE : number * GRID_PAGE_SIZE]
    cases = Case.objects.only("id", "uuid", "key", "suite_id").in_bulk(
        [int(case_ids[j]) for j in shown]
    )
    labels = [v.label for v in decision.variants]
    rows = []
    for j in shown:
        cells = []
        for i, label in enumerate(labels):
            p, g = int(passed[i, j]), int(graded[i, j])
            cells.append(GridCell(label=label, passed=p, graded=g, rate=p / g if g else None))
        case = cases[int(case_ids[j])]
        rows.append(GridRow(case=case, spread=float(spread[j]), cells=tuple(cells)))
    more = max(0, total - number * GRID_PAGE_SIZE)
    return GridPage(rows=tuple(rows), number=number, pages=pages, total=total, more=more, sort=sort)


@dataclass(frozen=True)
class CaseVariant:
    """One variant's trials of a case, by attempt, as the viewer may see them (output preview,
    grades, labels, ``blind``)."""

    variant: ExperimentVariant
    trials: list


def experiment_case_get(
    *, experiment: Experiment, case_key: str, viewer
) -> tuple[Case, list[CaseVariant]]:
    """A case of the experiment's suite (by UUID or key) with each variant's trials side by side:
    grades and labels as ``viewer`` may see them (``evals.blindness``), outputs cut to
    ``ASSAY["OUTPUT_PREVIEW_CHARS"]``. Four queries, whatever the number of variants. Raises
    ``Case.DoesNotExist``."""
    cases = Case.objects.filter(suite_id=experiment.suite_id)
    try:
        case = cases.get(uuid=uuid.UUID(case_key))
    except ValueError:  # not a UUID: a key (its newest version, as edits keep the key)
        found = list(cases.filter(key=case_key).order_by("-id")[:1])
        if not found:
            raise Case.DoesNotExist(case_key) from None
        case = found[0]
    blind = blind_for(viewer)
    variants = experiment_variants(experiment=experiment)
    trials = (
        trial_preview_queryset()
        .filter(run__in=[v.run for v in variants], case=case, replaced_by__isnull=True)
        .prefetch_related(grades_prefetch(viewer, blind=blind), labels_prefetch(viewer))
        .order_by("attempt", "id")
    )
    by_run: dict[int, list] = {v.run_id: [] for v in variants}
    for trial in trials:
        trial.blind = blind.holds(case)
        by_run[trial.run_id].append(trial)
    return case, [CaseVariant(variant=v, trials=by_run[v.run_id]) for v in variants]


def attempt_rows(columns: list[CaseVariant]) -> list[tuple[int, list]]:
    """``[(attempt, [trial or None per variant])]`` by attempt: the case's trials side by side,
    an attempt a variant lacks (not run, or replaced) None."""
    attempts = sorted({t.attempt for col in columns for t in col.trials})
    by = [{t.attempt: t for t in col.trials} for col in columns]
    return [(a, [trials.get(a) for trials in by]) for a in attempts]


@dataclass(frozen=True)
class ChartPoint:
    """One variant on the quality–cost plane: ``quality`` (the metric's estimate, 0 to 1) and
    ``cost`` (USD per trial) with their intervals, None when unknown; ``on_front``,
    ``in_set``."""

    label: str
    quality: float | None
    low: float | None
    high: float | None
    cost: float | None
    on_front: bool | None
    in_set: bool
    cost_low: float | None = None
    cost_high: float | None = None


def chart_points(decision: ExperimentDecision) -> list[ChartPoint]:
    """The decision's variants as points of the quality–cost chart and its text table."""
    return [
        ChartPoint(
            label=v.label,
            quality=v.estimate,
            low=v.low,
            high=v.high,
            cost=v.cost_per_trial,
            cost_low=v.cost_per_trial_low,
            cost_high=v.cost_per_trial_high,
            on_front=v.on_front,
            in_set=v.in_set,
        )
        for v in decision.variants
    ]


def chart_drawn(points: list[ChartPoint]) -> tuple[list[ParetoPoint], list[str]]:
    """``(drawn, left_out)``: the points ``evals.charts.pareto.pareto_chart`` can draw (quality,
    its interval and cost known; cost per trial with its interval, a point where it has none:
    one case, or no upper bound)
    and the labels of the others (unknown cost or no graded trial), which the table still
    lists."""
    drawn: list[ParetoPoint] = []
    left_out: list[str] = []
    for p in points:
        if p.quality is None or p.low is None or p.high is None or p.cost is None:
            left_out.append(p.label)
            continue
        low, high = min(p.low, p.quality), max(p.high, p.quality)
        cost = p.cost
        c_low = cost if p.cost_low is None else min(p.cost_low, cost)
        c_high = cost if p.cost_high is None else max(p.cost_high, cost)
        drawn.append(
            ParetoPoint(
                p.label, p.quality, low, high, cost, c_low, c_high, bool(p.on_front), p.in_set
            )
        )
    return drawn, left_out


@dataclass(frozen=True)
class VariantConfig:
    """The first variant's target as shown (``rows``, keys masked: ``evals.target_shown``), or
    another's ``diff`` against it (``evals.target_diff``: templates word by word, settings)."""

    label: str
    rows: list[ShownRow] | None = None
    diff: TargetDiff | None = None


def variant_configs(variants: list) -> list[VariantConfig]:
    """Each variant's configuration for the page: the first (``variants[0]``, with ``label`` and
    ``run``) in full, every other as what differs from it. No query."""
    if not variants:
        return []
    first = variants[0].run.target or {}
    configs = [VariantConfig(label=variants[0].label, rows=target_shown(first))]
    for v in variants[1:]:
        configs.append(VariantConfig(label=v.label, diff=target_diff(first, v.run.target or {})))
    return configs


def experiments_of_suite(*, suite, limit: int = 10) -> list[Experiment]:
    """The suite's newest experiments (``limit``), each with ``variant_count``; one query."""
    return list(
        Experiment.objects.filter(suite=suite)
        .annotate(variant_count=Count("variants"))
        .order_by("-created_at", "-id")[:limit]
    )
