"""Shared chart geometry: linear scales, "nice" ticks, an approximate text width and labels
that fit inside the drawing (truncated, or flipped to the left of their mark).

Pixels are SVG user units, rounded to 0.1. Text widths are estimates for a sans-serif face
(per-character advance in ems, close to Arial/Helvetica/DejaVu Sans): good to about ±15% on
Latin text, which the label margins absorb."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ELLIPSIS = "…"
# Advance widths in ems of a sans-serif face (Helvetica's metrics, rounded).
_NARROW = frozenset("iIjlft.,:;'|!()[] ")
_WIDE = frozenset("mwMW@%")
_DEFAULT_EM = 0.56
_NARROW_EM = 0.3
_WIDE_EM = 0.86
_UPPER_EM = 0.68
_WIDE_CHAR_EM = 1.0  # CJK and other wide characters


@dataclass(frozen=True)
class Scale:
    """A linear map from ``domain`` (data units) to ``pixels`` (SVG units); either may run
    backwards (a y axis grows down). ``clamp`` keeps a value outside the domain on its edge."""

    domain: tuple[float, float]
    pixels: tuple[float, float]

    def __call__(self, value: float, *, clamp: bool = True) -> float:
        d0, d1 = self.domain
        p0, p1 = self.pixels
        t = 0.5 if d1 == d0 else (value - d0) / (d1 - d0)
        if clamp:
            t = min(1.0, max(0.0, t))
        return round(p0 + t * (p1 - p0), 1)


def nice_step(span: float, count: int) -> float:
    """The tick step for ``span`` data units cut in about ``count`` parts: 1, 2 or 5 × 10^k.
    Raises ``ValueError`` for a span <= 0 or count < 1."""
    if span <= 0 or count < 1:
        raise ValueError("need span > 0 and count >= 1")
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power * (1 + 1e-9):
            return m * power
    return 10 * power  # pragma: no cover - the loop ends at 10


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Tick values at a nice step (``nice_step``) from the first multiple at or above ``low`` to
    the last at or below ``high``; ``[low]`` when ``low == high``. Values rounded to 12 digits
    (no 0.30000000000000004)."""
    if high < low:
        low, high = high, low
    if high == low:
        return [low]
    step = nice_step(high - low, count)
    first = math.ceil(low / step - 1e-9)
    last = math.floor(high / step + 1e-9)
    return [round(i * step, 12) + 0.0 for i in range(first, last + 1)]


def text_width(text: str, font_size: float = 11) -> float:
    """The approximate rendered width of ``text`` in SVG units at ``font_size``."""
    ems = 0.0
    for ch in text:
        if ch in _NARROW:
            ems += _NARROW_EM
        elif ch in _WIDE:
            ems += _WIDE_EM
        elif ord(ch) >= 0x1100:
            ems += _WIDE_CHAR_EM
        elif ch.isupper():
            ems += _UPPER_EM
        else:
            ems += _DEFAULT_EM
    return round(ems * font_size, 1)


def text_fit(text: str, max_width: float, font_size: float = 11) -> str:
    """``text`` cut to the longest prefix that, with "…", fits ``max_width``; whole when it fits;
    "" when not even "…" fits."""
    if text_width(text, font_size) <= max_width:
        return text
    if text_width(ELLIPSIS, font_size) > max_width:
        return ""
    lo, hi = 0, len(text)
    while lo < hi:  # longest prefix whose width with the ellipsis fits
        mid = (lo + hi + 1) // 2
        if text_width(text[:mid].rstrip() + ELLIPSIS, font_size) <= max_width:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + ELLIPSIS


@dataclass(frozen=True)
class Label:
    """A text placed in the drawing: ``x``, ``y`` (baseline), ``anchor`` ("start" or "end", the
    SVG ``text-anchor``), ``text`` (fitted), ``width`` (estimated); ``left``/``right``: its
    horizontal extent."""

    x: float
    y: float
    anchor: str
    text: str
    width: float

    @property
    def left(self) -> float:
        return self.x if self.anchor == "start" else round(self.x - self.width, 1)

    @property
    def right(self) -> float:
        return round(self.x + self.width, 1) if self.anchor == "start" else self.x

    def hits(self, box: tuple[float, float, float, float], font_size: float = 11) -> bool:
        """Whether the text (its ascent above the baseline ``y``, a little descent below)
        intersects ``box`` = ``(left, top, right, bottom)``."""
        left, top, right, bottom = box
        return (
            self.left < right
            and left < self.right
            and self.y - 0.8 * font_size < bottom
            and top < self.y + 0.25 * font_size
        )

    def overlaps(self, other: Label, line_height: float) -> bool:
        """Whether the two labels' boxes (``line_height`` tall) intersect."""
        return (
            self.left < other.right
            and other.left < self.right
            and abs(self.y - other.y) < line_height
        )


def label_beside(
    *,
    x: float,
    y: float,
    text: str,
    bounds: tuple[float, float],
    gap: float = 8,
    font_size: float = 11,
    max_width: float = 200,
) -> Label:
    """A label for a mark at ``x``: to its right (``gap`` away) when it fits before
    ``bounds[1]``, else to its left when that fits after ``bounds[0]``, else on the side with
    more room, cut to fit (``text_fit``). Never wider than ``max_width``."""
    lo, hi = bounds
    fitted = text_fit(text, max_width, font_size)
    width = text_width(fitted, font_size)
    room_right = hi - (x + gap)
    room_left = (x - gap) - lo
    if width <= room_right:
        return Label(round(x + gap, 1), y, "start", fitted, width)
    if width <= room_left:
        return Label(round(x - gap, 1), y, "end", fitted, width)
    if room_right >= room_left:
        fitted = text_fit(fitted, max(room_right, 0), font_size)
        return Label(round(x + gap, 1), y, "start", fitted, text_width(fitted, font_size))
    fitted = text_fit(fitted, max(room_left, 0), font_size)
    return Label(round(x - gap, 1), y, "end", fitted, text_width(fitted, font_size))


def percent_text(value: float | None, digits: int = 1) -> str:
    """A rate in [0, 1] as "83.3%"; "none" for None."""
    return "none" if value is None else f"{value * 100:.{digits}f}%"


def labels_place(
    marks: list[tuple[float, float, str]],
    *,
    bounds: tuple[float, float, float, float],
    gap: float = 8,
    font_size: float = 11,
    max_width: float = 160,
    line_height: float = 13,
    avoid: Sequence[tuple[float, float, float, float]] = (),
) -> list[Label | None]:
    """Labels for ``marks`` (``(x, y, text)``, y the text's baseline) that stay inside
    ``bounds`` (``left, top, right, bottom``), do not overlap each other and cross none of the
    ``avoid`` boxes (the marks themselves, as ``(left, top, right, bottom)``): for each mark
    in order, the first free spot of right, left, then a line below and above on either side;
    a text cut to fit (``text_fit``) where neither side has room. None where no spot is free
    (the mark keeps its title). Quadratic in the marks: meant for tens, not thousands."""
    left, top, right, bottom = bounds
    placed: list[Label] = []
    out: list[Label | None] = []
    for x, y, text in marks:
        chosen = None
        for dy in (0.0, line_height, -line_height):
            yy = round(y + dy, 1)
            if not top + line_height * 0.7 <= yy <= bottom:
                continue
            first = label_beside(
                x=x,
                y=yy,
                text=text,
                bounds=(left, right),
                gap=gap,
                font_size=font_size,
                max_width=max_width,
            )
            candidates = [first, _flipped(first, x=x, gap=gap, bounds=(left, right))]
            for c in candidates:
                if (
                    c is not None
                    and c.text
                    and not any(c.overlaps(p, line_height) for p in placed)
                    and not any(c.hits(box, font_size) for box in avoid)
                ):
                    chosen = c
                    break
            if chosen is not None:
                break
        if chosen is not None:
            placed.append(chosen)
        out.append(chosen)
    return out


def _flipped(label: Label, *, x: float, gap: float, bounds: tuple[float, float]) -> Label | None:
    """``label`` on the other side of its mark at ``x``, None when it does not fit there."""
    if label.anchor == "start":
        flipped = Label(round(x - gap, 1), label.y, "end", label.text, label.width)
    else:
        flipped = Label(round(x + gap, 1), label.y, "start", label.text, label.width)
    return flipped if bounds[0] <= flipped.left and flipped.right <= bounds[1] else None
