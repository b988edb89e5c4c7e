"""What one import writes into: the suite, its new runs, counters and caches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from core.errors import DomainError
from evals.cases import cases_upsert
from evals.models import Grade, Run, Suite
from evals.run_status import RunTrialCount, run_problems
from judges.models import Judge, JudgeVersion
from judges.models.versions import judge_version_hash

BATCH_SIZE = 1000
RETIRED_SHOWN = 100  # retired case keys listed in an import's answer; the rest are counted


def retired_cases_shown(keys: list[str]) -> list[str]:
    """The first ``RETIRED_SHOWN`` retired case keys, sorted (the count is given apart)."""
    return sorted(keys)[:RETIRED_SHOWN]


def retired_sentence(keys: list[str]) -> str:
    """What an import says about the cases it retired ("" when none)."""
    if not keys:
        return ""
    shown = retired_cases_shown(keys)
    more = f" and {len(keys) - len(shown)} more" if len(keys) > len(shown) else ""
    noun = "case" if len(keys) == 1 else "cases"
    return (
        f"Retired {len(keys)} {noun} of the suite, replaced by the file's new content for "
        f"the same key: {', '.join(shown)}{more}."
    )


@dataclass
class ImportSummary:
    """Counts of rows an import created (``judge_versions``: distinct versions used, created
    or reused). ``runs`` holds the created runs, first the one to show."""

    suite: Suite
    runs: list[Run] = field(default_factory=list)
    cases: int = 0
    trials: int = 0
    grades: int = 0
    labels: int = 0
    preference_labels: int = 0
    pairwise_verdicts: int = 0
    judge_versions: int = 0
    format: str = ""
    # Keys of the suite's cases this import retired: a row gave a key new content, so the
    # old case was replaced (``evals.cases.cases_upsert``). Every surface says which.
    retired_cases: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """Strict-JSON-safe dict: ``{"suite", "runs": [names], "cases", ...}``."""
        return {
            "suite": self.suite.name,
            "runs": [r.name for r in self.runs],
            "run_ids": [str(r.uuid) for r in self.runs],
            "format": self.format,
            "cases": self.cases,
            "trials": self.trials,
            "grades": self.grades,
            "labels": self.labels,
            "preference_labels": self.preference_labels,
            "pairwise_verdicts": self.pairwise_verdicts,
            "judge_versions": self.judge_versions,
            "retired_cases": retired_cases_shown(self.retired_cases),
            "retired_count": len(self.retired_cases),
        }

    def retired_sentence(self) -> str:
        """Empty when no case was retired, else "Retired 2 cases (their content changed): c1,
        c2." (at most ``RETIRED_SHOWN`` keys, then "and n more")."""
        return retired_sentence(self.retired_cases)


@dataclass
class ImportContext:
    """Per-import state: the suite, the requested run name, the source file name, and the
    judge-version cache keyed by (judge_model, protocol, judge_type)."""

    suite: Suite
    run_name: str
    filename: str
    summary: ImportSummary
    user: Any = None
    judge_versions: dict[tuple[str, str, str], JudgeVersion] = field(default_factory=dict)
    case_ids_seen: set[int] = field(default_factory=set)

    def run_create(
        self,
        *,
        name: str,
        fmt: str,
        model: str = "",
        extra: dict | None = None,
        source_version: str = "",
    ) -> Run:
        """Create an imported run named ``name`` (error when the suite already has one)."""
        if Run.objects.filter(suite=self.suite, name=name).exists():
            raise DomainError(
                f"run name {name!r} already exists in suite {self.suite.name!r}; choose a new one"
            )
        now = timezone.now()
        run = Run.objects.create(
            suite=self.suite,
            name=name,
            source=Run.Source.IMPORTED,
            target_kind="imported",
            model=model,
            source_version=source_version,
            target={"kind": "imported", "format": fmt, "file": self.filename, **(extra or {})},
            status=Run.Status.RUNNING,
            started_at=now,
            started_by=self._user_or_none(),
        )
        self.summary.runs.append(run)
        return run

    def _user_or_none(self):
        user = self.user
        return user if user is not None and getattr(user, "is_authenticated", False) else None

    def cases_upsert(self, specs: list) -> dict:
        """``evals.cases.cases_upsert`` into this import's suite, recording in the summary
        the keys of the cases it retired."""
        retired: list = []
        out = cases_upsert(
            suite=self.suite, specs=specs, retired=retired, by=self._user_or_none(), via="import"
        )
        self.summary.retired_cases.extend(c.key for c in retired)
        return out

    def cases_seen(self, cases) -> None:
        """Count distinct cases touched (created or reused) by this import."""
        for case in cases:
            self.case_ids_seen.add(case.id)
        self.summary.cases = len(self.case_ids_seen)

    def recorded_judge_version(
        self, *, judge_model: str, protocol: str, judge_type: str
    ) -> JudgeVersion:
        """The judge version of a recorded judge, reused by content hash: kind ``recorded``, name
        ``"<judge_model> / <protocol>"``, params ``{"judge_type": ...}`` (no prompt is known)."""
        cache_key = (judge_model, protocol, judge_type)
        version = self.judge_versions.get(cache_key)
        if version is not None:
            return version
        name = f"{judge_model} / {protocol}"[:200]
        judge, _ = Judge.objects.get_or_create(name=name, defaults={"kind": Judge.Kind.RECORDED})
        params = {"judge_type": judge_type}
        digest = judge_version_hash(
            model=judge_model,
            protocol=protocol,
            prompt_template="",
            params=params,
            output_schema={},
            threshold=None,
        )
        version = JudgeVersion.objects.filter(judge=judge, content_hash=digest).first()
        if version is None:
            last = judge.versions.order_by("-number").values_list("number", flat=True).first()
            version = JudgeVersion.objects.create(
                judge=judge,
                number=(last or 0) + 1,
                model=judge_model,
                protocol=protocol,
                params=params,
            )
        version.judge = judge  # grader_key reads judge.name without another query
        self.judge_versions[cache_key] = version
        self.summary.judge_versions = len(self.judge_versions)
        return version


def run_finish(
    run: Run,
    *,
    trials: int,
    errored: int = 0,
    cancelled: int = 0,
    graders: list[dict] | None = None,
    trials_per_case: int = 1,
    planned: int | None = None,
    source_status: str = "",
    status: str = Run.Status.SUCCEEDED,
) -> None:
    """Close an imported run with its counts, grader set and problems. One query and a save.

    ``trials`` finished (``errored`` of them), ``cancelled`` never run; ``planned`` what the
    source meant to run when it says (Inspect: samples × epochs; a run file: cases × trials per
    case). ``trials_total`` is ``trials`` + ``cancelled``, or ``planned`` when larger: never
    cases × the highest attempt. Fewer recorded than planned is partial. ``error_message``
    follows ``evals.run_status.run_problems`` ("1 of 3 trials errored; 1 cancelled; ...; the
    source's status is 'cancelled'"). The stored status is ``succeeded`` (shown as imported),
    or ``status``, a run file's own."""
    tpc = max(1, trials_per_case)
    total = max(trials + cancelled, planned or 0)
    grade_errors = Grade.objects.filter(trial__run=run, status=Grade.Status.ERROR).count()
    count = RunTrialCount(finished=trials, planned=total, errored=errored, cancelled=cancelled)
    problems = list(run_problems(count, grade_errors=grade_errors))
    if source_status:
        problems.append(f"the source's status is {source_status!r}")
    run.status = status
    run.trials_total = total
    run.trials_finished = trials
    run.trials_errored = errored
    run.trials_cancelled = cancelled
    run.trials_per_case = tpc
    run.error_message = "; ".join(problems)
    run.finished_at = run.finished_at or timezone.now()
    if graders is not None:
        run.graders = graders
    run.save(
        update_fields=[
            "status",
            "trials_total",
            "trials_finished",
            "trials_errored",
            "trials_cancelled",
            "trials_per_case",
            "error_message",
            "finished_at",
            "graders",
        ]
    )
