"""The grid of runs of one suite: one row per case, one column per run, each cell the case's
pass rate in that run with its Wilson 95% interval (``grid_get``).

Rows are the cases with a trial in a picked run (a changed case is a new row); a cell counts
the run report's overall verdicts (``evals.grid.cells``). Flaky: 0 < passed < graded;
``variance``: population variance of a case's rates; ``change``: ``change_class`` from the
first to the last graded column. A cell blind for the viewer (``evals.blindness``) is
hidden and so are its run's pass rate and cost. Finished runs' columns are cached under
their fingerprint (``evals.grid.cache``); blindness and cases are applied on every view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple
from urllib.parse import urlencode

from django.core.cache import cache

from core.errors import DomainError
from core.gc_pause import gc_paused_call
from core.ids import uuid_parse
from evals.baselines import baseline_current
from evals.blindness import Blind, blind_for
from evals.comparison.compute import CHANGE_CLASSES, NO_VERDICT, change_class
from evals.grid.cache import GRID_CACHE_SECONDS, grid_column_state
from evals.grid.cells import RunCaseCounts, runs_case_counts, runs_gating_keys
from evals.grid.grader_sets import GRADERS_DIFFER, gating_set, grader_set_differences, same_gating
from evals.models import Case, Run, Suite, Trial
from evals.report.cost_quality import CostQuality, cost_quality
from evals.report.figures import case_wilson
from evals.report.rows import runs_usage_totals
from evals.run_status import RunStatusShown, run_status_shown
from stats.intervals import clustered_rate_interval

MAX_RUNS = 20
DEFAULT_LAST = 10
# ``?flaky=``: the checkbox sends 1, the API documents true; an empty value is no filter.
FLAKY_VALUES = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False}
SORTS = {
    "variance": "largest variance across runs first",
    "rate": "lowest mean rate first",
    "key": "case key",
}
DEFAULT_SORT = "variance"
# ``?change=``: a change class, or "graders differ" (``evals.grid.grader_sets``).
GRID_CHANGES = (*CHANGE_CLASSES, GRADERS_DIFFER)
BLIND_CELL = (
    "hidden while you label: these cells hold trials that share their input with items of "
    "a calibration set you have not finished labeling, and their pass rates would show "
    "verdicts or gold labels"
)


@dataclass(frozen=True)
class GridQuery:
    """What grid to show: ``runs`` (run UUIDs as text, at most ``MAX_RUNS``; empty: the last
    ``last`` runs), filters ``tag`` (a whole tag, "" any), ``change`` (a change class, ""
    any), ``flaky`` (only cases flaky in some run) and ``sort`` (a key of ``SORTS``)."""

    runs: tuple[str, ...] = ()
    last: int = DEFAULT_LAST
    tag: str = ""
    change: str = ""
    flaky: bool = False
    sort: str = DEFAULT_SORT

    @classmethod
    def from_params(cls, params: Mapping[str, str], runs: list[str] | None = None) -> GridQuery:
        """Read ``runs`` (repeated or comma-separated UUIDs), ``last``, ``tag``, ``change``,
        ``flaky`` and ``sort`` strictly (docs/api.md). Raises ``DomainError`` naming the parameter
        for more than ``MAX_RUNS`` runs, a run id not a UUID, ``last`` outside 1..``MAX_RUNS``,
        an unknown ``change`` or ``sort``, or a ``flaky`` outside ``FLAKY_VALUES``."""
        picked: list[str] = []
        for value in runs if runs is not None else [params.get("runs", "")]:
            picked += [v.strip() for v in str(value).split(",") if v.strip()]
        if len(picked) > MAX_RUNS:
            raise DomainError(f"at most {MAX_RUNS} runs, got {len(picked)}", field="runs")
        for value in picked:
            if uuid_parse(value) is None:
                raise DomainError(f"{value[:60]!r} is not a run id", field="runs")
        raw_last = str(params.get("last") or DEFAULT_LAST)
        if (
            not raw_last.isascii()
            or not raw_last.isdigit()
            or len(raw_last) > 6  # never int() of thousands of digits
            or not 1 <= int(raw_last) <= MAX_RUNS
        ):
            raise DomainError(
                f"expected an integer from 1 to {MAX_RUNS}, got {raw_last[:20]!r}",
                field="last",
            )
        change = str(params.get("change") or "")
        if change and change not in GRID_CHANGES:
            raise DomainError(
                f"expected one of {', '.join(GRID_CHANGES)}, got {change[:40]!r}",
                field="change",
            )
        sort = str(params.get("sort") or DEFAULT_SORT)
        if sort not in SORTS:
            raise DomainError(
                f"expected one of {', '.join(SORTS)}, got {sort[:40]!r}", field="sort"
            )
        flaky = str(params.get("flaky") or "").lower()
        if flaky and flaky not in FLAKY_VALUES:
            raise DomainError(
                f"expected one of {', '.join(sorted(FLAKY_VALUES))}, got {flaky[:40]!r}",
                field="flaky",
            )
        return cls(
            runs=tuple(dict.fromkeys(str(uuid_parse(v)) for v in picked)),
            last=int(raw_last),
            tag=str(params.get("tag", ""))[:200],
            change=change,
            flaky=FLAKY_VALUES.get(flaky, False),
            sort=sort,
        )

    def url(self, **changes: object) -> str:
        """This query as a query string with ``changes`` ("?last=10&flaky=1")."""
        values = {
            "runs": ",".join(self.runs),
            "last": "" if self.runs else self.last,
            "tag": self.tag,
            "change": self.change,
            "flaky": "1" if self.flaky else "",
            "sort": self.sort,
            **changes,
        }
        return "?" + urlencode({k: v for k, v in values.items() if v not in ("", None, False)})


class GridCell(NamedTuple):
    """One case in one run: ``passed`` of ``graded`` trials, ``errored`` (left out), ``trials``,
    the rate with its Wilson 95% interval (None when nothing was graded), and ``hidden`` (blind
    for the viewer: zeros and None). A named tuple: a grid makes tens of thousands."""

    passed: int
    graded: int
    errored: int
    trials: int
    rate: float | None
    low: float | None
    high: float | None
    hidden: bool = False

    @property
    def flaky(self) -> bool:
        return not self.hidden and 0 < self.passed < self.graded


HIDDEN_CELL = GridCell(0, 0, 0, 0, None, None, None, hidden=True)


@dataclass(frozen=True)
class GridColumn:
    """One run: identity, ``is_baseline``, ``hidden`` (holds a trial blind for the viewer: pass rate
    and cost withheld) and ``quality`` (pass rate with interval, cost per trial and per passing
    trial, pass rate per dollar)."""

    uuid: str
    name: str
    created_at: datetime
    status: str
    is_simulated: bool
    is_baseline: bool
    hidden: bool
    quality: CostQuality | None
    status_shown: RunStatusShown | None = None  # what its badge says (evals.run_status)


@dataclass(frozen=True)
class GridRow:
    """One case: identity, ``retired``, one cell per column (None: not in that run),
    ``mean_rate`` and ``variance`` of its rates over graded visible cells, ``flaky_any``
    and ``change`` (module rules)."""

    case_uuid: str
    key: str
    tags: tuple[str, ...]
    cells: tuple[GridCell | None, ...]
    mean_rate: float | None
    variance: float | None
    flaky_any: bool
    change: str


@dataclass(frozen=True)
class Grid:
    """The grid: ``columns`` oldest first, ``rows`` after filters and sort, ``n_cases`` before
    filters, ``tags`` of every case, ``hidden_cells`` withheld from the viewer (with
    ``blind_note`` saying why), the ``query`` that made it, and ``grader_warnings``: one
    sentence per run graded by another grader set than the newest
    (``evals.grid.grader_sets``)."""

    suite_uuid: str
    suite_name: str
    columns: list[GridColumn]
    rows: list[GridRow]
    n_cases: int
    tags: list[str]
    hidden_cells: int
    query: GridQuery
    blind_note: str = ""
    grader_warnings: tuple[str, ...] = ()


def grid_runs_pick(*, suite: Suite, query: GridQuery) -> list[Run]:
    """The runs of ``suite`` the grid shows, oldest first: ``query.runs`` when given (each
    must be a run of the suite: ``DomainError`` on field ``runs`` naming the first that is
    not), else the ``query.last`` newest. One query."""
    runs = Run.objects.filter(suite=suite)
    if query.runs:
        found = list(runs.filter(uuid__in=query.runs))
        missing = set(query.runs) - {str(r.uuid) for r in found}
        if missing:
            raise DomainError(
                f"not a run of suite {suite.name!r}: {sorted(missing)[0]}",
                field="runs",
                code="not_found",
            )
    else:
        found = list(runs.order_by("-created_at", "-id")[: query.last])
    return sorted(found, key=lambda r: (r.created_at, r.id))


@gc_paused_call
def grid_get(*, suite: Suite, query: GridQuery, viewer) -> Grid:
    """The grid of ``suite`` for ``viewer``; fixed query count; raises as ``grid_runs_pick``."""
    runs = grid_runs_pick(suite=suite, query=query)
    baseline = baseline_current(suite=suite)
    blind = _blind_cases(runs=runs, blind=blind_for(viewer))
    built = _columns_get(runs=runs)
    per_run: list[dict[int, GridCell]] = []
    columns = []
    hidden_cells = 0
    for run in runs:
        column = built[run.id]
        cells = dict(zip(column.case_ids, column.cells, strict=True))
        hidden = blind.get(run.id, set()) & cells.keys()
        cells.update(dict.fromkeys(hidden, HIDDEN_CELL))
        hidden_cells += len(hidden)
        per_run.append(cells)
        columns.append(
            GridColumn(
                uuid=str(run.uuid),
                name=run.name,
                created_at=run.created_at,
                status=run.status,
                is_simulated=run.is_simulated,
                is_baseline=baseline is not None and baseline.run_id == run.id,
                hidden=bool(hidden),
                quality=None if hidden else column.quality,
                status_shown=run_status_shown(run),
            )
        )
    cases = _cases_get(suite=suite, ids={i for c in built.values() for i in c.case_ids})
    gatings = tuple(gating_set(run) for run in runs)
    all_rows = [
        _row(case, tuple(cells.get(case[0]) for cells in per_run), gatings)
        for case in sorted(cases, key=lambda c: (c[2], c[0]))
    ]
    tags = sorted({t for r in all_rows for t in r.tags})
    shown = [
        r
        for r in all_rows
        if (not query.tag or query.tag in r.tags)
        and (not query.change or r.change == query.change)
        and (not query.flaky or r.flaky_any)
    ]
    return Grid(
        suite_uuid=str(suite.uuid),
        suite_name=suite.name,
        columns=columns,
        rows=_sorted(shown, query.sort),
        n_cases=len(all_rows),
        tags=tags,
        hidden_cells=hidden_cells,
        query=query,
        blind_note=BLIND_CELL if hidden_cells else "",
        grader_warnings=tuple(grader_set_differences(runs)),
    )


@dataclass(frozen=True)
class _Column:
    """One run's column as computed and cached, before blindness: ``case_ids`` (the run's
    cases), ``cells`` (one ``GridCell`` per case, same order), and its cost against
    ``quality`` over every cell."""

    case_ids: tuple[int, ...]
    cells: tuple[GridCell, ...]
    quality: CostQuality


def _columns_get(*, runs: list[Run]) -> dict[int, _Column]:
    """Run id -> ``_Column``: finished runs' from the cache, the others counted and then cached."""
    if not runs:
        return {}
    keys, graded = grid_column_state(runs=runs)
    hits = cache.get_many([k for k in keys.values() if k is not None])
    out = {r.id: hits[keys[r.id]] for r in runs if keys[r.id] in hits}
    missing = [r for r in runs if r.id not in out]
    if missing:
        gating = runs_gating_keys(runs=missing, graded=graded)
        counts = runs_case_counts(runs=missing, gating=gating)
        totals = runs_usage_totals(runs=missing)
        fresh = {}
        for run in missing:
            out[run.id] = _column(counts[run.id], totals[run.id])
            if keys[run.id] is not None:
                fresh[keys[run.id]] = out[run.id]
        cache.set_many(fresh, GRID_CACHE_SECONDS)
    return out


def _column(counts: RunCaseCounts, totals: dict) -> _Column:
    """One run's ``_Column`` from its case counts and usage totals."""
    t = counts.tally
    passed, graded = t.passed.tolist(), t.graded.tolist()
    errored = (t.pipeline_errors + t.grade_errors).tolist()
    trials = counts.trials.tolist()
    cells = []
    for i in range(len(trials)):
        p, g = passed[i], graded[i]
        low, high = case_wilson(p, g) if g else (None, None)
        cells.append(GridCell(p, g, errored[i], trials[i], p / g if g else None, low, high))
    return _Column(
        case_ids=tuple(counts.case_ids.tolist()),
        cells=tuple(cells),
        quality=_quality(totals, cells),
    )


def _blind_cases(*, runs: list[Run], blind: Blind) -> dict[int, set[int]]:
    """Run id -> the cases of that run holding a trial blind for the viewer (``blind``), among the
    trials the grid reads. No query when ``blind`` is empty, else one."""
    if not blind or not runs:
        return {}
    out: dict[int, set[int]] = {}
    for run_id, case_id in (
        Trial.objects.filter(
            blind.trials_q(), run_id__in=[r.id for r in runs], replaced_by__isnull=True
        )
        .order_by()
        .values_list("run_id", "case_id")
        .distinct()
    ):
        out.setdefault(run_id, set()).add(case_id)
    return out


def _cases_get(*, suite: Suite, ids: set[int]) -> list[tuple]:
    """``(id, uuid, key, tags)`` of the cases with ``ids``, read fresh (tags are not in a column's
    cache key). One query, two when some are outside the suite."""
    found = [
        c
        for c in Case.objects.filter(suite=suite).values_list("id", "uuid", "key", "tags")
        if c[0] in ids
    ]
    others = ids - {c[0] for c in found}
    if others:
        found += Case.objects.filter(id__in=others).values_list("id", "uuid", "key", "tags")
    return found


def _quality(totals: dict, cells: list[GridCell]) -> CostQuality:
    graded = [c for c in cells if c.graded]
    rate = clustered_rate_interval([c.passed for c in graded], [c.graded for c in graded])
    return cost_quality(
        finished=totals["finished"],
        cost_known_usd=totals["cost"],
        cost_unknown=totals["cost_unknown"],
        passed=sum(c.passed for c in cells),
        pass_rate=rate.mean,
        pass_rate_low=rate.ci_low,
        pass_rate_high=rate.ci_high,
    )


def _row(
    case: tuple, cells: tuple[GridCell | None, ...], gatings: tuple[frozenset[str], ...]
) -> GridRow:
    """One case's row; its change is "graders differ" when the first and last graded columns'
    gating graders differ (a grader absent from one run is no change of the target)."""
    graded_at = [i for i, c in enumerate(cells) if c is not None and c.graded]
    graded = [c for c in cells if c is not None and c.graded]
    rates = [c.passed / c.graded for c in graded]
    if len(graded) < 2:
        change = NO_VERDICT
    elif not same_gating(gatings[graded_at[0]], gatings[graded_at[-1]]):
        change = GRADERS_DIFFER
    else:
        first, last = graded[0], graded[-1]
        change = change_class(first.passed, first.graded, last.passed, last.graded)
    return GridRow(
        case_uuid=str(case[1]),
        key=case[2],
        tags=tuple(str(t) for t in (case[3] or [])),
        cells=cells,
        mean_rate=sum(rates) / len(rates) if rates else None,
        variance=_variance(rates),
        flaky_any=any(c is not None and c.flaky for c in cells),
        change=change,
    )


def _variance(rates: list[float]) -> float | None:
    """Population variance (mean squared deviation) of two or more rates; None otherwise."""
    if len(rates) < 2:
        return None
    mean = sum(rates) / len(rates)
    return sum((r - mean) ** 2 for r in rates) / len(rates)


def _sorted(rows: list[GridRow], sort: str) -> list[GridRow]:
    if sort == "key":
        return sorted(rows, key=lambda r: r.key)
    if sort == "rate":
        return sorted(rows, key=lambda r: (r.mean_rate is None, r.mean_rate or 0.0, r.key))
    return sorted(rows, key=lambda r: (r.variance is None, -(r.variance or 0.0), r.key))


CHOICE_RUNS = 100


def grid_run_choices(*, suite: Suite) -> list[Run]:
    """The suite's newest ``CHOICE_RUNS`` runs, newest first, to pick from. One query."""
    return list(
        Run.objects.filter(suite=suite)
        .order_by("-created_at", "-id")
        .only("uuid", "name", "created_at", "status")[:CHOICE_RUNS]
    )
