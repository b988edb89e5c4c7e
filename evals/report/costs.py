"""What a run's costs rest on: the token classes priced, and why the unknown ones are unknown
("cost unknown for 12 trials: cache_read has no price for claude-x"), from the trials'
``cost_basis`` (``providers.pricing.Costing.basis``), grouped in the database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import models

from evals.models import Run, Trial
from providers.usage import TOKEN_CLASSES

# The reason given for a finished trial whose null cost has no basis.
ERRORED = "the trial errored"
NO_BASIS = "no price recorded (imported, or priced before token classes)"


@dataclass(frozen=True)
class CostClasses:
    """``priced``: the token classes some known cost priced, in ``TOKEN_CLASSES`` order;
    ``own``: trials whose cost the target stated; ``unknown``: ``(reason, trials)`` for the
    trials of unknown cost, most first (a trial with two reasons counts under both, joined
    by "; ")."""

    priced: list[str] = field(default_factory=list)
    own: int = 0
    unknown: list[tuple[str, int]] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        """One sentence per reason: "cost unknown for 12 trials: cache_read has no price for
        claude-x"."""
        return [
            f"cost unknown for {n} trial{'s' if n != 1 else ''}: {why}" for why, n in self.unknown
        ]

    @property
    def reasons(self) -> str:
        """The reasons alone, "; " between them ("" when every cost is known)."""
        return "; ".join(why for why, _ in self.unknown)

    @property
    def why(self) -> str:
        """The reasons in one phrase ("; " between them, each with its trials when there are
        several), "" when every cost is known."""
        if len(self.unknown) == 1:
            return self.unknown[0][0]
        return "; ".join(f"{why} ({n})" for why, n in self.unknown)


def runs_cost_classes(*, runs: Sequence[Run]) -> dict[int, CostClasses]:
    """Run id -> ``CostClasses`` over its finished trials a reader counts (not a retried one's
    replaced attempt, every top-up's); one query grouping by status and basis."""
    ok, err = Trial.Status.OK, Trial.Status.ERROR
    rows = (
        Trial.objects.filter(
            run_id__in=[r.id for r in runs], replaced_by__isnull=True, status__in=[ok, err]
        )
        .order_by()
        .values_list("run_id", "status", "cost_basis")
        .annotate(
            n=models.Count("id"),
            unknown=models.Count("id", filter=models.Q(cost_usd__isnull=True)),
        )
    )
    priced: dict[int, set[str]] = {r.id: set() for r in runs}
    own: dict[int, int] = {r.id: 0 for r in runs}
    unknown: dict[int, dict[str, int]] = {r.id: {} for r in runs}
    for run_id, status, basis, n, n_unknown in rows:
        basis = basis if isinstance(basis, dict) else None
        if basis is not None and basis.get("source") == "target":
            own[run_id] += n
        if basis is not None and n > n_unknown:
            priced[run_id].update(str(c) for c in basis.get("classes") or [])
        if not n_unknown:
            continue
        if status == err:
            why = ERRORED
        elif basis is None:
            why = NO_BASIS
        else:
            why = "; ".join(str(r) for r in basis.get("unknown") or []) or NO_BASIS
        unknown[run_id][why] = unknown[run_id].get(why, 0) + n_unknown
    return {
        r.id: CostClasses(
            priced=[c for c in TOKEN_CLASSES if c in priced[r.id]],
            own=own[r.id],
            unknown=sorted(unknown[r.id].items(), key=lambda item: (-item[1], item[0])),
        )
        for r in runs
    }


def comparison_cost_classes(*, base: Run, head: Run) -> list[tuple[str, CostClasses]]:
    """``[("Base", CostClasses), ("Head", CostClasses)]``, each over its whole run (one query)."""
    found = runs_cost_classes(runs=[base, head])
    return [("Base", found[base.id]), ("Head", found[head.id])]
