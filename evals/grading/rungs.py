"""The grader rungs beyond the cheap graders: which kinds have one, what evals needs of each,
and the registry another app fills in.

A kind in ``RUNG_KINDS`` is graded by a rung another app registers when Django is ready:
``judge`` by the judges app (``rung_register``). evals reaches it through ``judge_rung()``
and imports nothing of that app; the data types it reads back live here.

With nothing registered, a grader set naming a judge is refused (``NO_JUDGE_RUNG``), and
readers see no trusted version, corrected rate, judge spend or pairwise judging."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from evals.grading.grader_set import JUDGE_KIND
from evals.runner.finalize import run_finalize

if TYPE_CHECKING:
    import numpy as np

    from providers.pricing import RepriceTally

# The grader kinds graded by a rung another app registers, not by ``run_grader``.
RUNG_KINDS = (JUDGE_KIND,)

NO_JUDGE_RUNG = (
    "no judge rung is registered (the judges app is not installed): a judge grader cannot "
    "be run here"
)


@dataclass(frozen=True)
class Spend:
    """Judge calls and what they cost, from the ledger: ``calls`` (sent); ``requests`` (retries
    included); ``lost`` (paid, answer lost a race); ``unanswered``; token sums with
    ``*_unknown``; ``known_usd`` (None when none known) and ``cost_unknown`` calls, all over
    the calls sent; ``unsent`` (claimed, never sent: not calls, nothing paid); ``repaid``
    (sent calls a lost worker left with no answer recorded whose grade another call then
    wrote: paid twice)."""

    calls: int
    requests: int
    lost: int
    unanswered: int
    input: int
    input_unknown: int
    output: int
    output_unknown: int
    known_usd: Decimal | None
    cost_unknown: int
    unsent: int = 0
    repaid: int = 0


@dataclass(frozen=True)
class CorrectedPassRate:
    """A run's raw judge pass rate and its Rogan–Gladen correction
    (``stats.correction.corrected_rate_interval``); ``corrected`` None with ``reason`` when
    undefined. ``observed``: the mean of per-case judge rates; ``ci_low``/``ci_high``: 95%,
    clustered by case, carrying the uncertainty of ``tpr`` and ``tnr``; ``method``:
    ``"rogan-gladen-mover"``."""

    judge_version_id: int
    approval_id: int | None
    observed: float | None
    observed_numerator: int
    observed_denominator: int
    corrected: float | None
    ci_low: float | None
    ci_high: float | None
    tpr: float | None
    tnr: float | None
    reason: str = ""
    method: str = ""


@dataclass(frozen=True)
class VersionTrust:
    """A judge version as readers see it: ``name``, ``number``, approval id and figures or None."""

    name: str
    number: int
    approval_id: int | None = None
    approval_figures: dict | None = None


class JudgeRung(Protocol):
    """What evals needs of the ``judge`` rung. Every method takes keywords only."""

    def chunk_enqueue(self, *, run_id: int, trial_ids: list[int], subject: str) -> None:
        """Enqueue a chunk's rung (``core.outbox``); it ends in ``rung_finished``."""

    def version_resolve(self, *, config: dict, where: str) -> str:
        """The UUID (text) of the judge version a judge grader's ``config`` names; raises
        ``DomainError`` under ``where`` when it names none or one that cannot grade single trials.
        """

    def version_start_check(self, *, version_uuid: str, field: str) -> None:
        """Raise ``DomainError`` naming ``field`` when the version could not grade (a stored
        template the rung would refuse), so a run does not start only to error its grades."""

    def versions_untrusted(self, *, version_uuids: Sequence[str]) -> set[str]:
        """The untrusted ones of ``version_uuids``, as lower-case UUID text."""

    def claims_sweep(self, *, now: datetime) -> tuple[int, int]:
        """Resend judge calls a dead worker claimed: (expired claims, task messages sent)."""

    def trust_fingerprint(self) -> str:
        """Text that moves with every grant and revocation of trust (one query)."""

    def versions_trust(self, *, version_ids: set[int]) -> dict[int, VersionTrust]:
        """Judge version id -> ``VersionTrust`` for each of ``version_ids`` (one query)."""

    def corrected_pass_rate(
        self,
        *,
        judge_version_id: int,
        approval_id: int | None,
        approval_figures: dict | None,
        passed: Sequence[int] | np.ndarray,
        graded: Sequence[int] | np.ndarray,
    ) -> CorrectedPassRate:
        """The corrected pass rate of a judge's verdicts on a run from its approval's figures
        (``passed[i]`` of ``graded[i]`` ok verdicts on case i; None figures: untrusted)."""

    def run_spend(self, *, run_id: int) -> Spend | None:
        """Every judge call made for the run's trials (None when none was recorded)."""

    def pairwise_judging(self, *, base: Any, head: Any) -> Any:
        """The object the comparison page's pairwise-judging fragment reads."""

    def run_calls_reprice(self, *, run_id: int, prices: dict, write: bool) -> RepriceTally:
        """Re-price the run's judge calls priced by Assay at today's table
        (``providers.pricing.cost_reprice``, ``prices`` the lookups shared with the trials);
        writes the changed ones when ``write``; returns their ``RepriceTally``."""


_rungs: dict[str, JudgeRung] = {}


def rung_register(*, kind: str, rung: JudgeRung) -> None:
    """Register ``kind``'s rung (in ``RUNG_KINDS``), from an app's ``ready``; else ValueError."""
    if kind not in RUNG_KINDS:
        raise ValueError(f"{kind!r} has no rung (rung kinds: {list(RUNG_KINDS)})")
    _rungs[kind] = rung


def judge_rung() -> JudgeRung | None:
    """The registered ``judge`` rung, or None."""
    return _rungs.get(JUDGE_KIND)


def judge_rung_required() -> JudgeRung:
    """The registered ``judge`` rung, for a run whose grader set names a judge (it could
    start only with one registered); raises LookupError (``NO_JUDGE_RUNG``) without one."""
    rung = _rungs.get(JUDGE_KIND)
    if rung is None:
        raise LookupError(NO_JUDGE_RUNG)
    return rung


def rung_finished(*, run_id: int) -> None:
    """A chunk's rung is done: finalize the run once every judge grade is in. Idempotent."""
    run_finalize(run_id=run_id)
