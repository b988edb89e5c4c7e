"""This app's ``evals.grading.rungs.JudgeRung``, registered in ``judges.apps.JudgesConfig.ready``.

Registered in every process, so its methods import their services when called (the trust
rule needs numpy, the ledger the judge client): a process reading no judge data pays none.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import models

from core.errors import DomainError
from core.outbox import outbox_enqueue
from evals.grading.grader_set import JUDGE_KIND, RECORDED_JUDGE_KIND, recorded_kind_reason
from evals.grading.rungs import CorrectedPassRate, Spend, VersionTrust
from judges.models import Judge, JudgeApproval, JudgeVersion
from judges.tasks import run_chunk_judge

if TYPE_CHECKING:
    import numpy as np

    from providers.pricing import RepriceTally


def judge_config_version(config: dict, where: str) -> JudgeVersion:
    """The judge version a judge grader's config names: ``judge_version`` (as
    ``judge_version_resolve`` reads it), else ``judge`` with ``judge_number`` (none: the newest).
    Given both, a UUID this database knows wins, else the name and number: a run file names
    judges both ways, and an import may have given the version another UUID. Raises
    DomainError naming the field."""

    name, number = config.get("judge"), config.get("judge_number")
    if number is not None and (isinstance(number, bool) or number < 1):
        raise DomainError("expected a whole number >= 1", field=f"{where}.judge_number")
    if number is not None and name is None:
        raise DomainError("judge_number needs judge (the judge's name)", field=f"{where}.judge")
    by_name = None if name is None else (name if number is None else f"{name}:v{number}")
    ref = config.get("judge_version")
    if ref is None:
        if by_name is None:
            raise DomainError(f"required for {JUDGE_KIND}", field=f"{where}.judge_version")
        return _check_judge_version(by_name, f"{where}.judge")
    try:
        return _check_judge_version(ref, f"{where}.judge_version")
    except DomainError as exc:
        if by_name is None or exc.code != "not_found":
            raise
    return _check_judge_version(by_name, f"{where}.judge")


def _check_judge_version(value: str, where: str) -> JudgeVersion:
    """The judge version ``value`` names, which must grade single trials (not pairwise, not
    recorded). Raises DomainError naming ``where``."""
    from judges.selectors import judge_version_resolve  # noqa: PLC0415 - see module doc

    version = judge_version_resolve(ref=value, field=where)
    if version.judge.kind == Judge.Kind.RECORDED:
        raise DomainError(f"{version} is {recorded_kind_reason(RECORDED_JUDGE_KIND)}", field=where)
    if version.judge.kind == Judge.Kind.PAIRWISE:
        raise DomainError(
            f"{version} is a {version.judge.kind} judge; it does not grade single trials",
            field=f"{where}",
        )
    return version


class JudgesRung:
    """``evals.grading.rungs.JudgeRung``, implemented by this app's services."""

    def chunk_enqueue(self, *, run_id: int, trial_ids: list[int], subject: str) -> None:
        """One ``tasks.run_chunk_judge`` message through the outbox (``core.outbox``)."""
        outbox_enqueue(run_chunk_judge, run_id, trial_ids, subject=subject)

    def version_resolve(self, *, config: dict, where: str) -> str:
        """The UUID of the version ``config`` names (``judge_config_version``)."""
        return str(judge_config_version(config, where).uuid)

    def version_start_check(self, *, version_uuid: str, field: str) -> None:
        """Refuse a version whose stored template would be refused when grading
        (``kinds.template_check``), rather than start a run that errors every judge grade."""
        from judges import kinds  # noqa: PLC0415 - see module doc

        version = JudgeVersion.objects.select_related("judge").get(uuid=version_uuid)
        try:
            kinds.template_check(version.judge.kind, version.prompt_template)
        except DomainError as exc:
            raise DomainError(
                f"{version} cannot grade: its {exc}; make a new version with the template fixed",
                field=field,
            ) from exc

    def versions_untrusted(self, *, version_uuids: Sequence[str]) -> set[str]:
        """The untrusted (provisional) ones of ``version_uuids``: one query."""
        return {
            str(u)
            for u in JudgeVersion.objects.untrusted()
            .filter(uuid__in=list(version_uuids))
            .values_list("uuid", flat=True)
        }

    def claims_sweep(self, *, now: datetime) -> tuple[int, int]:
        """``judges.claims.judge_claims_sweep``: (expired claims, tasks enqueued)."""
        from judges.claims import judge_claims_sweep  # noqa: PLC0415 - see module doc

        swept = judge_claims_sweep(now=now)
        return swept.claims, swept.tasks

    def trust_fingerprint(self) -> str:
        """Text that moves with every grant and revocation of judge trust (approvals' count, newest
        id, revocations); one query."""
        trust = JudgeApproval.objects.aggregate(
            n=models.Count("id"), top=models.Max("id"), revoked=models.Count("revoked_at")
        )
        return f"j{trust['n']}.{trust['top']}.{trust['revoked']}"

    def versions_trust(self, *, version_ids: set[int]) -> dict[int, VersionTrust]:
        """The versions with their active approval (one query)."""
        active = JudgeApproval.objects.active().filter(judge_version=models.OuterRef("pk"))
        versions = (
            JudgeVersion.objects.filter(id__in=version_ids)
            .select_related("judge")
            .annotate(
                approval_id=models.Subquery(active.values("id")[:1]),
                approval_figures=models.Subquery(
                    active.values("figures")[:1], output_field=models.JSONField()
                ),
            )
        )
        return {
            jv.id: VersionTrust(
                name=jv.judge.name,
                number=jv.number,
                approval_id=jv.approval_id,
                approval_figures=jv.approval_figures,
            )
            for jv in versions
        }

    def corrected_pass_rate(
        self,
        *,
        judge_version_id: int,
        approval_id: int | None,
        approval_figures: dict | None,
        passed: Sequence[int] | np.ndarray,
        graded: Sequence[int] | np.ndarray,
    ) -> CorrectedPassRate:
        """``judges.trust.corrected_pass_rate_from_approval``."""
        from judges.trust import corrected_pass_rate_from_approval  # noqa: PLC0415

        return corrected_pass_rate_from_approval(
            judge_version_id=judge_version_id,
            approval_id=approval_id,
            approval_figures=approval_figures,
            passed=passed,
            graded=graded,
        )

    def run_spend(self, *, run_id: int) -> Spend | None:
        """``judges.ledger.run_judge_spend``: one query."""
        from judges.ledger import run_judge_spend  # noqa: PLC0415 - see module doc

        return run_judge_spend(run_id=run_id)

    def run_calls_reprice(self, *, run_id: int, prices: dict, write: bool) -> RepriceTally:
        """``judges.ledger.run_calls_reprice``."""
        from judges.ledger import run_calls_reprice  # noqa: PLC0415 - see module doc

        return run_calls_reprice(run_id=run_id, prices=prices, write=write)

    def pairwise_judging(self, *, base: Any, head: Any) -> Any:
        """``judges.selectors.pairwise_judging_get``."""
        from judges.selectors import pairwise_judging_get  # noqa: PLC0415 - see module doc

        return pairwise_judging_get(base=base, head=head)


JUDGES_RUNG = JudgesRung()
