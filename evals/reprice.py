"""Re-pricing a finished run at today's price table, on request only.

A trial keeps the cost it was given when written (``Trial.cost_basis`` names the price, or
why the cost is unknown): adding or changing a price never changes it. ``run_reprice``
(``manage.py reprice_run``) prices every trial Assay priced again, with the same token
classes (``providers.pricing.cost_reprice``), and the run's judge calls through the judge
rung, in one transaction, and records what it did (``RunReprice``). A cost the target
stated itself, an imported trial's and a trial written before token classes (no basis) are
left as they are. docs/costs.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.actors import Via
from core.errors import DomainError
from core.money import usd_known_text
from evals.grading.rungs import judge_rung
from evals.models import Run, RunReprice, Trial
from providers.pricing import Price, RepriceTally, cost_reprice
from providers.usage import TOKEN_CLASSES, usage_of

USAGE_FIELDS = tuple(f"{name}_tokens" for name in TOKEN_CLASSES)


@dataclass(frozen=True)
class Repricing:
    """What a re-pricing found: ``trials`` and ``judge_calls`` tallies (USD known and count
    unknown before and after, changed), the price entries used by model (``Price.as_json``,
    None for a model without a price), and the ``record`` written (None for a dry run or
    when nothing changed)."""

    trials: RepriceTally
    judge_calls: RepriceTally
    prices: dict[str, Any]
    record: RunReprice | None

    @property
    def total(self) -> RepriceTally:
        """Trials and judge calls together."""
        return self.trials.plus(self.judge_calls)


def run_reprice(*, run: Run, dry_run: bool = False, by=None, via: str = Via.COMMAND) -> Repricing:
    """Re-price ``run``'s trials and judge calls at today's table (module docstring), all or
    nothing. ``dry_run``: compute and write nothing. ``by``: the user (or None), ``via``
    where it came from (``core.actors.Via``), both recorded. Idempotent: a second call finds nothing
    changed and records nothing. Raises ``DomainError`` on ``run`` (``precondition_failed``)
    while the run is still queued or running."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(id=run.id)
        if not locked.is_terminal:
            raise DomainError(
                f"run {run.ref_text} is {locked.status}: re-price it once it has finished",
                field="run",
                code="precondition_failed",
            )
        prices: dict[str | None, Price | None] = {}
        trials = _trials_reprice(run_id=run.id, prices=prices, write=not dry_run)
        rung = judge_rung()
        judge_calls = (
            RepriceTally()
            if rung is None
            else rung.run_calls_reprice(run_id=run.id, prices=prices, write=not dry_run)
        )
        used = {
            str(model): None if price is None else price.as_json()
            for model, price in sorted(prices.items(), key=lambda item: str(item[0]))
        }
        record = None
        user = by if by is not None and by.is_authenticated else None
        if not dry_run and (trials.changed or judge_calls.changed):
            total = trials.plus(judge_calls)
            record = RunReprice.objects.create(
                run=run,
                by=user,
                via=via,
                old_usd=total.old_known_usd,
                old_unknown=total.old_unknown,
                new_usd=total.new_known_usd,
                new_unknown=total.new_unknown,
                trials_changed=trials.changed,
                judge_calls_changed=judge_calls.changed,
                prices=used,
            )
    return Repricing(trials=trials, judge_calls=judge_calls, prices=used, record=record)


def _trials_reprice(
    *, run_id: int, prices: dict[str | None, Price | None], write: bool
) -> RepriceTally:
    """The run's finished trials priced by Assay, re-priced; the changed ones written when
    ``write`` (cost and basis)."""
    tally = RepriceTally()
    changed: list[Trial] = []
    trials = Trial.objects.filter(
        run_id=run_id, status=Trial.Status.OK, cost_basis__isnull=False
    ).only("id", "cost_usd", "cost_basis", *USAGE_FIELDS)
    for trial in trials.order_by("id"):
        costing = cost_reprice(trial.cost_basis, usage_of(trial), prices)
        if costing is None:
            continue
        if tally.add(old_usd=trial.cost_usd, old_basis=trial.cost_basis, costing=costing):
            trial.cost_usd = costing.total_usd
            trial.cost_basis = costing.basis()
            changed.append(trial)
    if write and changed:
        Trial.objects.bulk_update(changed, ["cost_usd", "cost_basis"], batch_size=500)
    return tally


def reprice_text(repricing: Repricing) -> str:
    """One line for a person: what changed, the totals before and after (``usd_known_text``:
    a total of unknown costs reads "unknown", never $0)."""
    total = repricing.total
    return (
        f"{repricing.trials.changed} trials and {repricing.judge_calls.changed} judge calls "
        f"re-priced; total {usd_known_text(total.old_known_usd, total.old_unknown)} -> "
        f"{usd_known_text(total.new_known_usd, total.new_unknown)}"
    )


REPRICES_SHOWN = 20


def run_reprices(*, run: Run) -> list[RunReprice]:
    """The run's latest ``REPRICES_SHOWN`` re-pricings, newest first, with who made them."""
    return list(RunReprice.objects.filter(run=run).select_related("by")[:REPRICES_SHOWN])
