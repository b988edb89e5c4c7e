"""Filtering and sorting the comparison's per-case rows from a page's GET params (pure). The
view refuses an unknown class or sort (400); an unknown tag matches no row."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlencode

SORTS = {
    "effect": "largest drop first",
    "-effect": "largest gain first",
    "key": "case key",
}
DEFAULT_SORT = "effect"


@dataclass(frozen=True)
class TableQuery:
    """The table's filters: ``change`` (in ``CHANGE_CLASSES`` or ""), ``tag`` and ``sort``."""

    change: str = ""
    tag: str = ""
    sort: str = DEFAULT_SORT

    def url(self, **changes: str) -> str:
        """A query string ("?change=broken&sort=effect") for this query with ``changes``."""
        values = {"change": self.change, "tag": self.tag, "sort": self.sort, **changes}
        return "?" + urlencode({k: v for k, v in values.items() if v})


def _effect(row) -> float:
    delta = row.delta
    return 0.0 if delta is None else float(delta)


def case_rows_select(rows: Iterable, *, query: TableQuery) -> list:
    """Rows of ``query.change`` with ``query.tag`` (empty: any), sorted by ``query.sort``."""
    out = [
        r
        for r in rows
        if (not query.change or r.change == query.change) and (not query.tag or query.tag in r.tags)
    ]
    if query.sort == "key":
        return sorted(out, key=lambda r: r.key)
    sign = 1 if query.sort == "effect" else -1
    return sorted(out, key=lambda r: (r.delta is None, sign * _effect(r), r.key))
