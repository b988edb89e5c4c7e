"""Model prices and the cost of a call, in exact Decimal USD, by token class.

A price gives USD per 1M tokens for each token class it has (``providers.usage``: input,
output, cache_write, cache_read, reasoning); a class it lacks is unpriced. A project override
(``ModelPrice``) that matches wins over every built-in match. Within a source: the exact name,
else the longest ``prefix*`` pattern (``gpt-4o-mini*`` beats ``gpt-4o*``), case-sensitive,
never fuzzy.

Cost = Σ over classes of tokens × USD per 1M tokens / 10^6 (the classes are disjoint, so none
is counted twice). It is unknown (None, never zero) when the model has no price, when a class
with a count > 0 has no price, or when a class the price has was not reported (its count
unknown); ``Costing.unknown`` says which (docs/costs.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, NamedTuple

from core.bounds import COST_USD_QUANTUM
from providers.models import ModelPrice
from providers.usage import TOKEN_CLASSES, TokenClass, Usage

PriceSource = Literal["project override", "built-in"]
SOURCE_OVERRIDE: PriceSource = "project override"
SOURCE_BUILTIN: PriceSource = "built-in"
TOKENS_PER_MTOK = Decimal(1_000_000)


class PriceEntry(NamedTuple):
    """A built-in price: USD per 1M tokens by class (None: the class is unpriced), the provider's
    pricing page it was read from and the date it was checked there (ISO)."""

    input: Decimal
    output: Decimal
    cache_write: Decimal | None = None
    cache_read: Decimal | None = None
    reasoning: Decimal | None = None
    source: str = ""
    checked: str = ""


ANTHROPIC_PAGE = "https://docs.anthropic.com/en/docs/about-claude/pricing"
OPENAI_PAGE = "https://platform.openai.com/docs/pricing"


def _anthropic(inp: str, out: str, write: str, read: str, checked: str) -> PriceEntry:
    """A Claude price: cache_write is the 5-minute write (1.25 x input), cache_read 0.1 x input,
    as the page's table gives them; Claude reports no reasoning class apart (in output)."""
    return PriceEntry(
        Decimal(inp), Decimal(out), Decimal(write), Decimal(read), None, ANTHROPIC_PAGE, checked
    )


def _openai(
    inp: str, out: str, cached: str | None, checked: str, *, o_series: bool = False
) -> PriceEntry:
    """An OpenAI price: cache_read is the page's "cached input"; an o-series model's reasoning
    tokens are billed at its output rate. OpenAI charges no cache write (no class)."""
    cache_read = None if cached is None else Decimal(cached)
    reasoning = Decimal(out) if o_series else None
    return PriceEntry(Decimal(inp), Decimal(out), None, cache_read, reasoning, OPENAI_PAGE, checked)


# USD per 1M tokens by class, list prices (no batch discount, no long-context tier). Each
# entry names its page and the date it was checked (2026-12-07: against stored copies of
# the pages, the build machine having no live access; a lead re-checks before trusting a
# figure to the cent). Anything not here needs a project override (admin: "model prices").
BUILTIN_PRICES: dict[str, PriceEntry] = {
    # OpenAI: input, output, cached input.
    "gpt-4o": _openai("2.50", "10.00", "1.25", "2026-12-07"),
    "gpt-4o-2024-08-06": _openai("2.50", "10.00", "1.25", "2026-12-07"),
    "gpt-4o-mini*": _openai("0.15", "0.60", "0.075", "2026-12-07"),
    "gpt-4.1": _openai("2.00", "8.00", "0.50", "2026-12-07"),
    "gpt-4.1-mini*": _openai("0.40", "1.60", "0.10", "2026-12-07"),
    "gpt-4.1-nano*": _openai("0.10", "0.40", "0.025", "2026-12-07"),
    "o3-mini*": _openai("1.10", "4.40", "0.55", "2026-12-07", o_series=True),
    # Anthropic: input, output, 5-minute cache write, cache read (hit).
    "claude-3-5-haiku*": _anthropic("0.80", "4.00", "1.00", "0.08", "2026-12-07"),
    "claude-haiku-4-5*": _anthropic("1.00", "5.00", "1.25", "0.10", "2026-12-07"),
    # Sonnet 4 (claude-sonnet-4-20250514, alias claude-sonnet-4-0) and 4.5; the >200K-token
    # long-context tier is not listed. Names are spelled out: an unknown later model gets no
    # price rather than an older model's.
    "claude-sonnet-4-0": _anthropic("3.00", "15.00", "3.75", "0.30", "2026-12-07"),
    "claude-sonnet-4-2025*": _anthropic("3.00", "15.00", "3.75", "0.30", "2026-12-07"),
    "claude-sonnet-4-5*": _anthropic("3.00", "15.00", "3.75", "0.30", "2026-12-07"),
    "claude-opus-4-0": _anthropic("15.00", "75.00", "18.75", "1.50", "2026-12-07"),
    "claude-opus-4-2025*": _anthropic("15.00", "75.00", "18.75", "1.50", "2026-12-07"),
    "claude-opus-4-1*": _anthropic("15.00", "75.00", "18.75", "1.50", "2026-12-07"),
    "claude-opus-4-5*": _anthropic("5.00", "25.00", "6.25", "0.50", "2026-12-07"),
    # A fixed fictional model for tests and the demo: input and output only.
    "example-model-1.5": PriceEntry(Decimal("0.35"), Decimal("1.05"), checked="fixed"),
}


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens for each class the price has (None: unpriced), ``source`` ("project
    override" | "built-in") and the matching ``pattern``."""

    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    source: PriceSource
    pattern: str
    cache_write_usd_per_mtok: Decimal | None = None
    cache_read_usd_per_mtok: Decimal | None = None
    reasoning_usd_per_mtok: Decimal | None = None

    def per_mtok(self, token_class: TokenClass) -> Decimal | None:
        """USD per 1M tokens of ``token_class``, None when unpriced."""
        value: Decimal | None = getattr(self, f"{token_class}_usd_per_mtok")
        return value

    def as_json(self) -> dict[str, Any]:
        """``{"pattern", "source", "usd_per_mtok": {class: "1.25" | None}}``: what a re-pricing
        records of the entries it used."""
        return {
            "pattern": self.pattern,
            "source": self.source,
            "usd_per_mtok": {
                name: None if (p := self.per_mtok(name)) is None else str(p)
                for name in TOKEN_CLASSES
            },
        }


@dataclass(frozen=True)
class Costing:
    """A call's (or a trial's) cost: ``total_usd`` exact, None when unknown; ``class_usd`` the
    USD of each class with a count > 0 (known cost only; they sum to the total); ``unknown``
    the reasons a cost is unknown ("cache_read has no price for claude-x"); ``price`` the
    price used (None when the model has none) for ``model``."""

    total_usd: Decimal | None
    price: Price | None
    model: str | None = None
    class_usd: Mapping[str, Decimal] = field(default_factory=dict)
    unknown: tuple[str, ...] = ()

    @property
    def source(self) -> PriceSource | None:
        return None if self.price is None else self.price.source

    def basis(self) -> dict[str, Any]:
        """What a stored cost rests on (a trial's ``cost_basis``, a judge call's):
        ``{"model", "price", "source", "classes"}`` when known (the classes priced, the price's
        pattern), ``{"model", "price", "source", "unknown": [reason, ...]}`` when not."""
        head: dict[str, Any] = {
            "model": self.model,
            "price": None if self.price is None else self.price.pattern,
            "source": self.source,
        }
        if self.total_usd is None:
            return {**head, "unknown": list(self.unknown)}
        return {**head, "classes": list(self.class_usd)}


def name_match(model: str, names: Iterable[str]) -> str | None:
    """The entry of ``names`` pricing ``model`` (exact, else longest ``prefix*``), or None."""
    candidates = list(names)
    if model in candidates:
        return model
    best: str | None = None
    for name in candidates:
        is_prefix = name.endswith("*") and model.startswith(name[:-1])
        if is_prefix and (best is None or len(name) > len(best)):
            best = name
    return best


_OVERRIDE_COLUMNS = tuple(f"{name}_usd_per_mtok" for name in TOKEN_CLASSES)


def _override_prices(model: str) -> Mapping[str, PriceEntry]:
    """Override rows that could match ``model`` (exact or any pattern), one query."""

    rows = ModelPrice.objects.filter(model__endswith="*") | ModelPrice.objects.filter(model=model)
    return {
        row.model: PriceEntry(*(getattr(row, column) for column in _OVERRIDE_COLUMNS))
        for row in rows.only("model", *_OVERRIDE_COLUMNS)
    }


def price_lookup(model: str | None) -> Price | None:
    """The price of ``model`` with its source, or None. One query of ``ModelPrice``."""
    if not model:
        return None
    sources: tuple[tuple[PriceSource, Mapping[str, PriceEntry]], ...] = (
        (SOURCE_OVERRIDE, _override_prices(model)),
        (SOURCE_BUILTIN, BUILTIN_PRICES),
    )
    for source, table in sources:
        name = name_match(model, table)
        if name is not None:
            entry = table[name]
            return Price(
                input_usd_per_mtok=Decimal(entry.input),
                output_usd_per_mtok=Decimal(entry.output),
                source=source,
                pattern=name,
                cache_write_usd_per_mtok=_decimal(entry.cache_write),
                cache_read_usd_per_mtok=_decimal(entry.cache_read),
                reasoning_usd_per_mtok=_decimal(entry.reasoning),
            )
    return None


def _decimal(value: Decimal | None) -> Decimal | None:
    return None if value is None else Decimal(value)


def _check_tokens(field_name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{field_name}: expected a non-negative integer or None, got {value!r}")


def usage_cost(price: Price | None, usage: Usage, *, model: str | None) -> Costing:
    """The cost of ``usage`` at ``price`` (looked up once per chunk; ``model`` names it in the
    reasons): Σ class tokens × USD per 1M tokens / 10^6, exact Decimal (module docstring).
    Raises ``ValueError`` naming the class for a negative or non-integer count."""
    for name in TOKEN_CLASSES:
        _check_tokens(f"{name}_tokens", usage.count(name))
    if price is None:
        why = f"no price for {model!r}" if model else "no model to price"
        return Costing(total_usd=None, price=None, model=model, unknown=(why,))
    unknown: list[str] = []
    class_usd: dict[str, Decimal] = {}
    for name in TOKEN_CLASSES:
        tokens, per_mtok = usage.count(name), price.per_mtok(name)
        if tokens is None and per_mtok is not None:
            unknown.append(f"{name} tokens not reported for {model}")
        elif tokens and per_mtok is None:
            unknown.append(f"{name} has no price for {model}")
        elif tokens:
            assert per_mtok is not None  # the branch above
            class_usd[name] = Decimal(tokens) * per_mtok / TOKENS_PER_MTOK
    if unknown:
        return Costing(total_usd=None, price=price, model=model, unknown=tuple(unknown))
    # At the cost column's 12 places: exact, as every price has at most 6 (``ModelPrice``), and
    # a zero reads "0.000000000000" as the column would give it back.
    total = sum(class_usd.values(), Decimal(0)).quantize(COST_USD_QUANTUM)
    return Costing(total_usd=total, price=price, model=model, class_usd=class_usd)


def trial_cost(model: str | None, usage: Usage) -> tuple[Decimal | None, PriceSource | None]:
    """``(cost USD, price source)`` of ``usage`` at ``model``'s price today, or ``(None, None)``
    when unknown (``usage_cost``). One query of ``ModelPrice``."""
    costing = usage_cost(price_lookup(model), usage, model=model)
    if costing.total_usd is None:
        return None, None
    return costing.total_usd, costing.source


def cost_reprice(
    basis: Any, usage: Usage, prices: dict[str | None, Price | None]
) -> Costing | None:
    """The cost of ``usage`` at today's price of the model a stored ``basis``
    (``Costing.basis``) names; ``prices`` caches lookups by model. None when the basis is not
    Assay's pricing (none recorded, or the target's own account): such a cost is never
    re-priced."""
    if not isinstance(basis, dict) or "model" not in basis or basis.get("source") == "target":
        return None
    model = basis["model"] if isinstance(basis["model"], str) else None
    if model not in prices:
        prices[model] = price_lookup(model)
    return usage_cost(prices[model], usage, model=model)


@dataclass
class RepriceTally:
    """The ``costs`` a re-pricing looked at: USD known and the count unknown, before
    (``old_*``) and after (``new_*``), and how many changed (their cost or their basis). The
    sums of the known ones are ``old_known_usd`` / ``new_known_usd``: None when none was."""

    old_usd: Decimal = Decimal(0)
    old_unknown: int = 0
    new_usd: Decimal = Decimal(0)
    new_unknown: int = 0
    changed: int = 0
    costs: int = 0

    @property
    def old_known_usd(self) -> Decimal | None:
        """USD of the costs known before; None when every one looked at was unknown."""
        return None if self.costs and self.old_unknown == self.costs else self.old_usd

    @property
    def new_known_usd(self) -> Decimal | None:
        """USD of the costs known after; None when every one looked at is unknown."""
        return None if self.costs and self.new_unknown == self.costs else self.new_usd

    def add(self, *, old_usd: Decimal | None, old_basis: Any, costing: Costing) -> bool:
        """Count one cost; True when it changes (the caller then writes ``costing``)."""
        self.costs += 1
        if old_usd is None:
            self.old_unknown += 1
        else:
            self.old_usd += old_usd
        if costing.total_usd is None:
            self.new_unknown += 1
        else:
            self.new_usd += costing.total_usd
        same_cost = (old_usd is None and costing.total_usd is None) or (
            old_usd is not None and costing.total_usd is not None and old_usd == costing.total_usd
        )
        changed = not same_cost or old_basis != costing.basis()
        self.changed += changed
        return changed

    def plus(self, other: RepriceTally) -> RepriceTally:
        """Both tallies summed."""
        return RepriceTally(
            old_usd=self.old_usd + other.old_usd,
            old_unknown=self.old_unknown + other.old_unknown,
            new_usd=self.new_usd + other.new_usd,
            new_unknown=self.new_unknown + other.new_unknown,
            changed=self.changed + other.changed,
            costs=self.costs + other.costs,
        )
