"""How contract decisions moved from a base run to a head run (``decision_movement_get``): per
case and overall, rejects and wrong-outcome rejects (policy errors).

A new policy error is never offset by fewer malformed outputs: when the head rejects a
smaller share but a larger share for a wrong outcome, ``warning`` says so. Shares, so runs
of different sizes compare fairly."""

from __future__ import annotations

from dataclasses import dataclass

from evals.grading.contract.decisions import (
    DECISIONS,
    REJECTED,
    RunDecisions,
    run_decisions,
)
from evals.models import Case, Run


@dataclass(frozen=True)
class CaseMovement:
    """One case: trials by decision a side, wrong-outcome rejects, ``moved`` when counts differ."""

    key: str
    base: dict[str, int]
    head: dict[str, int]
    base_wrong_outcome: int
    head_wrong_outcome: int

    @property
    def moved(self) -> bool:
        return self.base != self.head or self.base_wrong_outcome != self.head_wrong_outcome


@dataclass(frozen=True)
class DecisionMovement:
    """Overall counts per side (decision -> trials), rejects and wrong-outcome rejects per
    side with the attempted trials they are shares of, per-case movements (cases in either
    run, by key), and the ``warning`` sentence or ""."""

    base_counts: dict[str, int]
    head_counts: dict[str, int]
    base_rejects: int
    head_rejects: int
    base_wrong_outcome: int
    head_wrong_outcome: int
    base_attempted: int
    head_attempted: int
    cases: list[CaseMovement]
    warning: str

    def as_json(self) -> dict:
        """Strict-JSON form."""
        return {
            "base_counts": self.base_counts,
            "head_counts": self.head_counts,
            "base_rejects": self.base_rejects,
            "head_rejects": self.head_rejects,
            "base_wrong_outcome_rejects": self.base_wrong_outcome,
            "head_wrong_outcome_rejects": self.head_wrong_outcome,
            "base_attempted": self.base_attempted,
            "head_attempted": self.head_attempted,
            "warning": self.warning,
            "cases": [
                {
                    "case": c.key,
                    "base": c.base,
                    "head": c.head,
                    "base_wrong_outcome_rejects": c.base_wrong_outcome,
                    "head_wrong_outcome_rejects": c.head_wrong_outcome,
                }
                for c in self.cases
            ],
        }


def _by_case(
    decisions: RunDecisions, keys: dict[int, str]
) -> dict[str, tuple[dict[str, int], int]]:
    out: dict[str, tuple[dict[str, int], int]] = {}
    for t in decisions.trials.values():
        counts, wrong = out.get(keys[t.case_id], ({}, 0))
        counts[t.decision] = counts.get(t.decision, 0) + 1
        if t.decision == REJECTED and t.wrong_outcome:
            wrong += 1
        out[keys[t.case_id]] = (counts, wrong)
    return out


def _share(n: int, of: int) -> float:
    return n / of if of else 0.0


def decision_movement_get(*, base: Run, head: Run) -> DecisionMovement | None:
    """Contract decisions' movement from ``base`` to ``head``; None without contract graders."""
    b, h = run_decisions(run=base), run_decisions(run=head)
    if not (b.graded and h.graded):
        return None
    case_ids = {t.case_id for t in [*b.trials.values(), *h.trials.values()]}
    keys = dict(Case.objects.filter(id__in=case_ids).values_list("id", "key"))
    base_cases, head_cases = _by_case(b, keys), _by_case(h, keys)
    cases = []
    for key in sorted(set(base_cases) | set(head_cases)):
        bc, bw = base_cases.get(key, ({}, 0))
        hc, hw = head_cases.get(key, ({}, 0))
        order = {d: i for i, d in enumerate(DECISIONS)}
        cases.append(
            CaseMovement(
                key=key,
                base=dict(sorted(bc.items(), key=lambda kv: order[kv[0]])),
                head=dict(sorted(hc.items(), key=lambda kv: order[kv[0]])),
                base_wrong_outcome=bw,
                head_wrong_outcome=hw,
            )
        )
    br, hr = b.counts[REJECTED], h.counts[REJECTED]
    bw, hw = b.wrong_outcome_rejects, h.wrong_outcome_rejects
    warning = ""
    if _share(hr, h.attempted) < _share(br, b.attempted) and _share(hw, h.attempted) > _share(
        bw, b.attempted
    ):
        warning = (
            f"The head has fewer rejects overall ({hr} of {h.attempted} against {br} of "
            f"{b.attempted}) but more wrong-outcome rejects ({hw} against {bw}): a new policy "
            "error is not offset by fewer malformed outputs."
        )
    return DecisionMovement(
        base_counts=b.counts,
        head_counts=h.counts,
        base_rejects=br,
        head_rejects=hr,
        base_wrong_outcome=bw,
        head_wrong_outcome=hw,
        base_attempted=b.attempted,
        head_attempted=h.attempted,
        cases=cases,
        warning=warning,
    )
