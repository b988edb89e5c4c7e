"""The one run loader: a run's trials, grades, cases, per-case usage and judge versions as
flat rows, read once. The run report (``evals.report.selectors.run_report``), the
comparison and the gate (``evals.comparison.run_data.run_data_get``) all start from
``run_rows_get``, so they cannot read a run differently.

Output text is never loaded; verdicts come back as small integers and rows straight from
the cursor (``core.db.raw_rows``), so no per-row converter runs.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from operator import itemgetter
from typing import Any

from django.db import models
from django.db.models import Case as CaseWhen
from django.db.models.functions import Coalesce

from core.db import raw_rows
from evals.grading.rungs import judge_rung
from evals.models import Case, Grade, Run, Trial


def judge_version_label(judge_name: str, number: int) -> str:
    """A judge version as people name it: ``"<judge name>-v<number>"`` ("judge-v2")."""
    return f"{judge_name}-v{number}"


@dataclass(frozen=True)
class JudgeInfo:
    """A judge version that graded the run: ``label`` ("judge-v2"), judge ``name``,
    ``trusted`` (an active approval exists), and that approval's id and figures (None when
    untrusted; the figures hold the confusion matrix the corrected pass rate uses)."""

    label: str
    name: str
    trusted: bool
    approval_id: int | None = None
    approval_figures: dict | None = None


@dataclass(frozen=True)
class RunRows:
    """A run as flat rows (see ``run_rows_get``).

    ``trials``: ``(id, case_id, status, latency_ms, look)`` by case id then attempt; ``grades``
    on ok trials: ``(trial_id, grader, code, score, gating, judge_version_id)``, code 1 pass,
    0 fail, -1 errored, -2 not judged; ``cases``: ``(id, uuid, key, tags, content_hash)`` by
    key; ``usage``: case id -> sums over finished trials (``cost`` known USD as Decimal or None,
    token sums, ``*_unknown`` counts, ``latency_sum`` ms, ``latency_n``); ``judges``: version id
    -> ``JudgeInfo``."""

    trials: list[tuple]
    grades: list[tuple]
    cases: list[tuple]
    usage: dict[Any, dict[str, Any]]
    judges: dict[Any, JudgeInfo]
    usage_totals: dict[str, Any] | None = None

    @property
    def totals(self) -> dict[str, Any]:
        """The usage summed over cases: ``finished``, token sums and unknowns, ``cost`` (known USD,
        Decimal, None when none known), ``cost_unknown``; one row when loaded with
        ``usage="totals"``."""
        if self.usage_totals is not None:
            return self.usage_totals
        rows = list(self.usage.values())
        costs = [r["cost"] for r in rows if r["cost"] is not None]
        return {
            "finished": sum(r["finished"] for r in rows),
            "input_sum": sum(r["input_sum"] or 0 for r in rows),
            "output_sum": sum(r["output_sum"] or 0 for r in rows),
            "input_unknown": sum(r["input_unknown"] for r in rows),
            "output_unknown": sum(r["output_unknown"] for r in rows),
            "cost": sum(costs, Decimal(0)) if costs else None,
            "cost_unknown": sum(r["cost_unknown"] for r in rows),
        }

    @property
    def approvals(self) -> dict[Any, tuple[int, dict | None]]:
        """Judge version id -> (approval id, figures) for the trusted versions."""
        return {
            v: (j.approval_id, j.approval_figures)
            for v, j in self.judges.items()
            if j.approval_id is not None
        }


def grade_code(relation: str = "") -> CaseWhen:
    """A grade's code as SQL: 1 pass, 0 fail, -1 errored, -2 not judged, the code of an absent
    grade too. ``relation``: "" on a Grade query; on a Trial query, a ``FilteredRelation`` to
    one grade of each trial."""
    at = f"{relation}__" if relation else ""
    absent = [models.When(**{f"{at}id__isnull": True}, then=-2)] if relation else []
    return CaseWhen(
        *absent,
        models.When(**{f"{at}status": Grade.Status.ERROR}, then=-1),
        models.When(**{f"{at}status": Grade.Status.NOT_JUDGED}, then=-2),
        models.When(**{f"{at}passed": True}, then=1),
        default=0,
        output_field=models.IntegerField(),
    )


GRADE_CODE = grade_code()
GATING = CaseWhen(models.When(gating=True, then=1), default=0, output_field=models.IntegerField())


ALL_TRIALS = "all"


def run_trials(*, run: Run, top_up: object = ALL_TRIALS) -> models.QuerySet:
    """The trials of ``run`` a reader counts, never a retried one: with ``ALL_TRIALS`` every
    top-up's too; with None the run's own; with a ``TopUp`` id, its own and that top-up's."""
    trials = Trial.objects.filter(run=run, replaced_by__isnull=True)
    if top_up is None:
        trials = trials.filter(top_up_round__isnull=True)
    elif top_up != ALL_TRIALS:
        trials = trials.filter(models.Q(top_up_round__isnull=True) | models.Q(top_up_id=top_up))
    return trials.order_by()


def run_rows_get(*, run: Run, top_up: object = ALL_TRIALS, usage: str = "cases") -> RunRows:
    """Read ``run`` as ``RunRows``. Four queries whatever its size, plus one when judges graded
    it. ``usage="cases"`` reads usage per case; ``usage="totals"`` only its sums over the run
    (``RunRows.usage_totals``, with every top-up's trials). ``ValueError`` for another
    ``usage``."""
    if usage == "cases":
        return _rows_by_run(run_trials(run=run, top_up=top_up), [run.id])[run.id]
    if usage != "totals" or top_up != ALL_TRIALS:
        raise ValueError(f"usage={usage!r} with top_up={top_up!r}")
    rows = _rows_by_run(run_trials(run=run), [run.id], usage=False)[run.id]
    return replace(rows, usage_totals=runs_usage_totals(runs=[run])[run.id])


def _readable_trials(runs: Sequence[Run], case_ids: Iterable[int] | None) -> models.QuerySet:
    """The trials of ``runs`` a reader counts (every top-up's), of ``case_ids`` when given."""
    trials = Trial.objects.filter(run_id__in=[r.id for r in runs], replaced_by__isnull=True)
    if case_ids is not None:
        trials = trials.filter(case_id__in=list(case_ids))
    return trials.order_by()


def runs_rows_get(
    *,
    runs: Sequence[Run],
    case_ids: Iterable[int] | None = None,
    usage: bool = True,
    top_up: object = ALL_TRIALS,
) -> dict:
    """Several runs at once, run id -> ``RunRows`` as ``run_rows_get`` reads each, restricted to
    ``case_ids`` when given. ``usage=False`` leaves per-case usage out. The same queries
    whatever the number of runs, cases and trials."""
    case_ids = None if case_ids is None else list(case_ids)
    trials = _readable_trials(runs, case_ids)
    if top_up is None:
        trials = trials.filter(top_up_round__isnull=True)
    elif top_up != ALL_TRIALS:
        trials = trials.filter(models.Q(top_up_round__isnull=True) | models.Q(top_up_id=top_up))
    return _rows_by_run(trials, [r.id for r in runs], usage=usage, case_ids=case_ids)


# The token classes beyond input and output (``providers.usage``), summed for the report only.
EXTRA_CLASSES = ("cache_write", "cache_read", "reasoning")


def _class_sums(finished: models.Q) -> dict[str, Any]:
    """``<class>_sum`` and ``<class>_unknown`` aggregates of ``EXTRA_CLASSES``."""
    out: dict[str, Any] = {}
    for name in EXTRA_CLASSES:
        column = f"{name}_tokens"
        out[f"{name}_sum"] = models.Sum(column, filter=finished)
        out[f"{name}_unknown"] = models.Count(
            "id", filter=finished & models.Q(**{f"{column}__isnull": True})
        )
    return out


def runs_usage_totals(*, runs: Sequence[Run]) -> dict[int, dict[str, Any]]:
    """Run id -> ``RunRows.totals`` for each of ``runs``, summed in the database: one query."""
    ok, err = Trial.Status.OK, Trial.Status.ERROR
    finished = models.Q(status__in=[ok, err])
    rows = (
        _readable_trials(runs, None)
        .values("run_id")
        .annotate(
            finished=models.Count("id", filter=finished),
            cost=models.Sum("cost_usd", filter=finished),
            cost_unknown=models.Count("id", filter=finished & models.Q(cost_usd__isnull=True)),
            input_sum=models.Sum("input_tokens", filter=finished),
            output_sum=models.Sum("output_tokens", filter=finished),
            input_unknown=models.Count("id", filter=finished & models.Q(input_tokens__isnull=True)),
            output_unknown=models.Count(
                "id", filter=finished & models.Q(output_tokens__isnull=True)
            ),
            **_class_sums(finished),
        )
    )
    empty = {
        "finished": 0,
        "cost": None,
        "cost_unknown": 0,
        "input_sum": 0,
        "output_sum": 0,
        "input_unknown": 0,
        "output_unknown": 0,
        **{f"{name}_sum": 0 for name in EXTRA_CLASSES},
        **{f"{name}_unknown": 0 for name in EXTRA_CLASSES},
    }
    out = {r.id: dict(empty) for r in runs}
    for row in rows:
        out[row.pop("run_id")] = {**row, "cost": row["cost"]}
    return out


def _rows_by_run(
    trials_qs: models.QuerySet,
    run_ids: list[int],
    *,
    usage: bool = True,
    case_ids: list[int] | None = None,
) -> dict[int, RunRows]:
    """``RunRows`` per run id from the trials in ``trials_qs`` (split by run in Python). Long: the
    four reads and their folding into rows share one set of trial ids."""
    ok, err = Trial.Status.OK, Trial.Status.ERROR
    # Ordered by attempt so per-case verdict lists read the same from the database and from
    # an exported file (PostgreSQL returns rows in no fixed order otherwise).
    trial_rows = raw_rows(
        trials_qs.order_by("run_id", "case_id", "attempt").values_list(
            "run_id", "id", "case_id", "status", "latency_ms", Coalesce("top_up_round", 0)
        )
    )
    # Grades and cases are read through every trial of the runs (of ``case_ids``), a
    # subquery an index answers alone (run, case), then kept for the readable ok trials in
    # Python: filtering the subquery on the trials' own columns (replaced, top-up, status)
    # made SQLite read every wide trial row again (grades 42 -> 19 ms, cases 23 -> 2 ms at
    # 10,000 trials), and joining the trial table for its status made PostgreSQL hash the
    # whole table.
    scope = Trial.objects.filter(run_id__in=run_ids).order_by()
    if case_ids is not None:
        scope = scope.filter(case_id__in=case_ids)
    ok_trials = {row[1] for row in trial_rows if row[3] == ok}
    grades = [
        g
        for g in raw_rows(
            Grade.objects.filter(trial__in=scope)
            .order_by()
            .values_list("trial_id", "grader", GRADE_CODE, "score", GATING, "judge_version_id")
        )
        if g[0] in ok_trials
    ]
    cases = list(
        Case.objects.filter(id__in=scope.values("case_id"))
        .order_by("key", "id")
        .values_list("id", "uuid", "key", "tags", "content_hash")
    )
    finished = models.Q(status__in=[ok, err])
    usage_rows = (
        (trials_qs if usage else trials_qs.none())
        .values("run_id", "case_id")
        .annotate(
            finished=models.Count("id", filter=finished),
            cost=models.Sum("cost_usd", filter=finished),
            cost_unknown=models.Count("id", filter=finished & models.Q(cost_usd__isnull=True)),
            input_sum=models.Sum("input_tokens", filter=finished),
            output_sum=models.Sum("output_tokens", filter=finished),
            input_unknown=models.Count("id", filter=finished & models.Q(input_tokens__isnull=True)),
            output_unknown=models.Count(
                "id", filter=finished & models.Q(output_tokens__isnull=True)
            ),
            tokens_unknown=models.Count(
                "id",
                filter=finished
                & (models.Q(input_tokens__isnull=True) | models.Q(output_tokens__isnull=True)),
            ),
            latency_sum=models.Sum("latency_ms", filter=finished),
            latency_n=models.Count("latency_ms", filter=finished),
        )
    )
    judges = _judges({g[5] for g in grades if g[5] is not None})

    # Rows come ordered by run: cut at each change of run, drop the run column in C (map
    # with itemgetter), and file each grade under its trial's run.
    trials_of: dict[int, list[tuple]] = {r: [] for r in run_ids}
    strip = itemgetter(1, 2, 3, 4, 5)
    run_column = list(map(itemgetter(0), trial_rows))  # ascending: the query orders by run
    for run_id in run_ids:
        lo, hi = bisect_left(run_column, run_id), bisect_right(run_column, run_id)
        trials_of[run_id] = list(map(strip, trial_rows[lo:hi]))
    grades_of: dict[int, list[tuple]] = {r: [] for r in run_ids}
    if len(run_ids) == 1:
        grades_of[run_ids[0]] = grades
    else:
        run_of_trial = dict(map(itemgetter(1, 0), trial_rows))
        grade_runs = map(run_of_trial.__getitem__, map(itemgetter(0), grades))
        for g, run_id in zip(grades, grade_runs, strict=True):
            grades_of[run_id].append(g)
    usage_of: dict[int, dict] = {r: {} for r in run_ids}
    for row in usage_rows:
        usage_of[row.pop("run_id")][row.pop("case_id")] = row
    out = {}
    for run_id in run_ids:
        mine = trials_of[run_id]
        case_set = {t[1] for t in mine}
        versions = {g[5] for g in grades_of[run_id] if g[5] is not None}
        out[run_id] = RunRows(
            trials=mine,
            grades=grades_of[run_id],
            cases=[c for c in cases if c[0] in case_set],
            usage=usage_of[run_id],
            judges={v: j for v, j in judges.items() if v in versions},
        )
    return out


def _judges(version_ids: set[int]) -> dict[int, JudgeInfo]:
    """The judge versions among a run's grades with their active approval (one query, by
    ``JudgeRung.versions_trust``). Without a rung each is untrusted ("judge version 7")."""
    if not version_ids:
        return {}
    rung = judge_rung()
    if rung is None:
        return {
            v: JudgeInfo(label=f"judge version {v}", name=f"judge version {v}", trusted=False)
            for v in version_ids
        }
    return {
        v: JudgeInfo(
            label=judge_version_label(t.name, t.number),
            name=t.name,
            trusted=t.approval_id is not None,
            approval_id=t.approval_id,
            approval_figures=t.approval_figures,
        )
        for v, t in rung.versions_trust(version_ids=version_ids).items()
    }
