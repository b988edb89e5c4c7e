"""What changed in the target and the graders from one run to another (``target_diff``).

A pure function of two target snapshots (``Run.target``) and, optionally, two grader lists
(``Run.graders``): no query, so the comparison page and an experiment's variants read it
alike. Values are compared as stored and shown as ``evals.target_shown`` shows them (a key is
never shown, even in a diff); templates get a word diff (``evals.comparison.textdiff``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evals.comparison.textdiff import WordDiff, word_diff
from evals.target_shown import target_rows

ABSENT = "—"


@dataclass(frozen=True)
class TemplateChange:
    """A template (``prompt_template``, ``system_prompt``) that differs: its ``key``, ``label``
    and the word ``diff`` of base against head (absent: the empty text)."""

    key: str
    label: str
    diff: WordDiff


@dataclass(frozen=True)
class SettingChange:
    """A setting that differs: ``key`` (dotted: ``settings.temperature``), ``label``, and the
    ``base``/``head`` values as shown (``ABSENT`` when a side lacks it, keys masked)."""

    key: str
    label: str
    base: str
    head: str


@dataclass(frozen=True)
class GraderChange:
    """A grader that differs by ``key``: ``change`` "added" (head only), "removed" (base only) or
    "changed" (kind, config or gating differ), with each side's spec as compact JSON text
    (``ABSENT`` when a side lacks it)."""

    key: str
    change: str
    base: str
    head: str


@dataclass(frozen=True)
class TargetDiff:
    """``templates``, ``settings`` (each in the order ``target_rows`` shows keys) and ``graders``
    (by key) that differ from base to head; ``same`` when nothing of the target differs and
    ``graders_same`` when nothing of the graders does."""

    templates: list[TemplateChange] = field(default_factory=list)
    settings: list[SettingChange] = field(default_factory=list)
    graders: list[GraderChange] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return not self.templates and not self.settings

    @property
    def graders_same(self) -> bool:
        return not self.graders


def _spec_text(spec: dict) -> str:
    return json.dumps(
        {k: spec.get(k) for k in ("kind", "config", "gating") if k in spec},
        ensure_ascii=False,
        sort_keys=True,
        default=str,
    )


def graders_diff(base: list[dict], head: list[dict]) -> list[GraderChange]:
    """Graders added, removed or changed from ``base`` to ``head`` (``[{"key", "kind", "config",
    "gating"}]``), by key, sorted by key. A spec without a ``key`` is keyed by its position."""
    a = {str(g.get("key", i)): g for i, g in enumerate(base or []) if isinstance(g, dict)}
    b = {str(g.get("key", i)): g for i, g in enumerate(head or []) if isinstance(g, dict)}
    out = []
    for key in sorted(a.keys() | b.keys()):
        if key not in b:
            out.append(GraderChange(key, "removed", _spec_text(a[key]), ABSENT))
        elif key not in a:
            out.append(GraderChange(key, "added", ABSENT, _spec_text(b[key])))
        elif _spec_text(a[key]) != _spec_text(b[key]):
            out.append(GraderChange(key, "changed", _spec_text(a[key]), _spec_text(b[key])))
    return out


def _equal(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def target_diff(
    base: dict,
    head: dict,
    *,
    base_graders: list[dict] | None = None,
    head_graders: list[dict] | None = None,
) -> TargetDiff:
    """What differs from the ``base`` target to the ``head`` target (``Run.target`` dicts), and
    from ``base_graders`` to ``head_graders`` when given. Defaults filled in by
    ``target_rows`` (``provider``, ``concurrency``) count as set, so an explicit default is no
    change. Pure: no query, no I/O."""
    rows_a, rows_b = target_rows(base), target_rows(head)
    templates: list[TemplateChange] = []
    settings: list[SettingChange] = []
    keys = list(rows_a) + [k for k in rows_b if k not in rows_a]
    for key in keys:
        ra, rb = rows_a.get(key), rows_b.get(key)
        shown = rb or ra
        assert shown is not None
        if ra is not None and rb is not None and _equal(ra.raw, rb.raw):
            continue
        if shown.long:
            text_a = ra.value if ra else ""
            text_b = rb.value if rb else ""
            templates.append(TemplateChange(key, shown.label, word_diff(text_a, text_b)))
        else:
            settings.append(
                SettingChange(
                    key, shown.label, ra.value if ra else ABSENT, rb.value if rb else ABSENT
                )
            )
    graders = (
        graders_diff(base_graders or [], head_graders or [])
        if base_graders is not None or head_graders is not None
        else []
    )
    return TargetDiff(templates=templates, settings=settings, graders=graders)
