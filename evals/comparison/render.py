"""A comparison and the gate's decision as terminal text, Markdown (a PR comment) and JSON.

p-values go through ``evals.comparison.pvalue.pvalue_format``. Case keys and run names are
untrusted: in Markdown they sit in code spans with backticks and pipes neutralised."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from core.money import per_usd_text, usd_text
from core.strict_json import json_safe
from core.templatetags.dashboard import percent_interval
from evals.comparison.compute import CHANGE_CLASSES, Comparison
from evals.comparison.gate import GateDecision
from evals.comparison.pvalue import pvalue_format, pvalue_phrase
from evals.templatetags.comparison import points_bounds

EXIT_WORDS = {0: "pass", 1: "regression", 2: "cannot decide"}
MARKDOWN_CASE_ROWS = 50


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


def _pct_ci(x: float | None, low: float | None, high: float | None) -> str:
    """A rate with its 95% interval ("50.0% [6.8%, 93.2%]"), "—" when undefined."""
    return "—" if x is None else f"{_pct(x)} {percent_interval(low, high)}"


def _pp(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.1f} pp"


def _pp_ci(x: float | None, low: float | None, high: float | None) -> str:
    """A difference with its 95% interval ("−10.0 pp [−25.1, +4.3]"), "—" when undefined."""
    bounds = points_bounds(low, high)
    bounds = "undefined" if bounds is None else bounds.replace("−", "-")  # as ``_pp`` signs
    return "—" if x is None else f"{_pp(x)} [{bounds}]"


def _md_text(text: str) -> str:
    """Plain text safe in Markdown: no markup, links or HTML get through."""
    return "".join("\\" + ch if ch in "\\`*_[]<>|#!" else ch for ch in str(text))


def _code(text: str) -> str:
    """Inline code span safe for a Markdown table cell."""
    clean = str(text).replace("`", "'").replace("|", "\\|").replace("\n", " ")
    return f"`{clean[:120]}`"


def _usd(x) -> str:
    return usd_text(x)


def _case_line(v) -> str:
    adj = "" if v.adjusted is None else f", Holm-adjusted p {pvalue_format(v.adjusted)}"
    return (
        f"{v.key}: {v.base_passed}/{v.base_graded} -> {v.head_passed}/{v.head_graded} "
        f"(one-sided p {pvalue_format(v.p_value)}{adj} at {v.look_name}{case_outlook(v)})"
    )


def case_outlook(v) -> str:
    """What a suspect's last look could miss and a new run would need; "" for other cases."""
    parts = []
    if v.missable is not None:
        parts.append(f"a drop under about {100 * v.missable:.0f} points could be missed")
    if v.settle_trials:
        parts.append(f"a new run of about {v.settle_trials} trials a side would settle it")
    return "".join(f"; {p}" for p in parts)


def _pass_k_line(c: Comparison) -> str:
    """pass@k next to pass^k at each k with each side's 95% interval, base -> head, and
    pass^k's head − base with its 95% interval ("—" where no case has k trials)."""
    parts = []
    for at, hat in zip(c.pass_at_k, c.pass_hat_k, strict=False):
        parts.append(
            f"k={at.k}: pass@k {_pct_ci(at.base, at.base_low, at.base_high)} -> "
            f"{_pct_ci(at.head, at.head_low, at.head_high)}, "
            f"pass^k {_pct_ci(hat.base, hat.base_low, hat.base_high)} -> "
            f"{_pct_ci(hat.head, hat.head_low, hat.head_high)} "
            f"({_pp_ci(hat.delta, hat.delta_low, hat.delta_high)})"
        )
    return "; ".join(parts)


def gate_text(comparison: Comparison, decision: GateDecision) -> str:
    """The decision first, in one sentence, then the figures behind it (plain lines)."""
    c, h = comparison, comparison.headline
    lines = [
        f"gate: {decision.title} (exit {decision.exit_code})",
        decision.sentence or "; ".join(decision.reasons),
        f"base: {c.base.label}{' (simulated)' if c.base.simulated else ''}   "
        f"head: {c.head.label}{' (simulated)' if c.head.simulated else ''}",
    ]
    lines += [f"  - {r}" for r in decision.reasons[1:]]
    lines += [f"  dropped: {_case_line(v)}" for v in decision.drops]
    lines += [f"  suspect: {_case_line(v)}" for v in decision.suspects[:20]]
    if len(decision.suspects) > 20:
        lines.append(f"  …and {len(decision.suspects) - 20} more suspects")
    if decision.next_round:
        lines.append(
            f"  settle with more trials: gate --top-up adds trials to "
            f"{len(decision.next_round)} case(s)"
        )
    if h is not None:
        lines.append(
            f"pass rate {_pct(h.base_rate)} → {_pct(h.head_rate)} ({_pp(h.delta)}) over "
            f"{h.n_cases} shared cases; two-sided permutation {pvalue_phrase(h.p_text)} "
            f"({'exact' if h.p_exact else f'Monte Carlo, {h.n_resamples} resamples'}); "
            f"{h.confidence:.0%} interval on this suite [{_pp(h.bootstrap_low)}, "
            f"{_pp(h.bootstrap_high)}]"
        )
        if h.disagreement:
            lines.append(f"note: {h.disagreement}")
    if c.pass_hat_k:
        lines.append(_pass_k_line(c))
    counts = ", ".join(f"{k} {v}" for k, v in c.class_counts.items() if v)
    lines.append(
        f"cases: {counts or 'none shared'}; added {len(c.added)}, removed "
        f"{len(c.removed)}, changed {len(c.changed)}"
    )
    lines += [f"note: {n}" for n in decision.notes]
    return "\n".join(lines)


def gate_markdown(comparison: Comparison, decision: GateDecision) -> str:
    """A Markdown summary for a pull-request comment: decision, reasons, headline, counts, errors,
    usage deltas, changed cases (first ``MARKDOWN_CASE_ROWS``, worst first) and cases left out.
    Long by design: the Markdown is written top to bottom, section by section."""
    c, h = comparison, comparison.headline
    icon = {0: "✅", 1: "❌", 2: "⚠️"}[decision.exit_code]
    out = [
        f"## {icon} Assay gate: {decision.title} (exit {decision.exit_code})",
        "",
        f"**{_md_text(decision.sentence or '; '.join(decision.reasons))}**",
        "",
        f"Base {_code(c.base.label)}{' (simulated)' if c.base.simulated else ''} → head "
        f"{_code(c.head.label)}{' (simulated)' if c.head.simulated else ''}, alpha = {c.alpha}",
        "",
    ]
    out += [f"- {_md_text(r)}" for r in decision.reasons[1:]]
    out += [f"- dropped: {_code(_case_line(v))}" for v in decision.drops]
    out += [f"- suspect: {_code(_case_line(v))}" for v in decision.suspects[:20]]
    out += [f"- note: {_md_text(n)}" for n in decision.notes]
    for problem in c.problems:
        if problem not in decision.reasons:
            out.append(f"- ⚠️ {problem}")
    out.append("")
    if h is not None:
        cl = h.clustered
        clustered = "undefined" if cl.low is None else f"[{_pp(cl.low)}, {_pp(cl.high)}]"
        out += [
            f"**{h.sentence[0].upper()}{h.sentence[1:]}.**",
            "",
            "| | base | head | Δ |",
            "|---|---|---|---|",
            f"| pass rate ({h.n_cases} shared cases) | {_pct(h.base_rate)} | "
            f"{_pct(h.head_rate)} | {_pp(h.delta)} |",
            "",
            f"- two-sided {pvalue_phrase(h.p_text)} (stratified permutation test, "
            f"{'exact' if h.p_exact else f'{h.n_resamples} resamples'}): is there any "
            "difference at all; the decision above uses one-sided tests (docs/statistics.md)",
            f"- {h.confidence:.0%} interval, this suite (cases fixed, trials random): "
            f"[{_pp(h.bootstrap_low)}, {_pp(h.bootstrap_high)}]",
            f"- {h.confidence:.0%} interval, in general (cases as a sample, clustered SE, t): "
            f"{clustered}",
        ]
        if h.disagreement:
            out.append(f"- note: {h.disagreement}")
    if c.detectable is not None:
        d = c.detectable
        out.append(
            "- smallest drop this suite detects with 80% power: "
            + (f"{d.drop * 100:.0f} points" if d.drop is not None else f"none ({d.reason})")
        )
    out += [
        "",
        "| " + " | ".join(CHANGE_CLASSES) + " | added | removed | changed |",
        "|" + "---|" * (len(CHANGE_CLASSES) + 3),
        "| "
        + " | ".join(str(c.class_counts[k]) for k in CHANGE_CLASSES)
        + f" | {len(c.added)} | {len(c.removed)} | {len(c.changed)} |",
        "",
    ]
    for side, n in (("base", c.base_counts), ("head", c.head_counts)):
        if n.errored or n.provisional:
            out.append(
                f"- {side}: {n.pipeline_errored} pipeline errors, {n.grade_errored} "
                f"trials with an errored grade, {n.provisional} provisional judge "
                f"grades (of {n.trials} trials)"
            )
    u = c.usage
    out.append(
        f"- per trial: cost {_usd(u.base.cost_per_trial_usd)} → "
        f"{_usd(u.head.cost_per_trial_usd)}; tokens "
        f"{_num(u.base.tokens_per_trial)} → {_num(u.head.tokens_per_trial)}; latency "
        f"{_num(u.base.latency_mean_ms)} ms → {_num(u.head.latency_mean_ms)} ms"
    )
    if u.base.quality is not None and u.head.quality is not None:
        out.append(
            f"- per passing trial: cost {_usd(u.base.quality.cost_per_passing_trial_usd)} → "
            f"{_usd(u.head.quality.cost_per_passing_trial_usd)}; pass rate per dollar "
            f"{per_usd_text(u.base.quality.pass_rate_per_usd)} → "
            f"{per_usd_text(u.head.quality.pass_rate_per_usd)}"
        )
    if c.pass_hat_k:
        out.append("- " + _pass_k_line(c))
    moved = sorted(
        (r for r in c.cases if r.change not in ("unchanged", "flaky")),
        key=lambda r: (r.change != "broken", r.delta if r.delta is not None else 0),
    )
    if moved:
        out += ["", "| case | base | head | change |", "|---|---|---|---|"]
        for r in moved[:MARKDOWN_CASE_ROWS]:
            out.append(
                f"| {_code(r.key)} | {r.base_passed}/{r.base_graded} | "
                f"{r.head_passed}/{r.head_graded} | {r.change} |"
            )
        if len(moved) > MARKDOWN_CASE_ROWS:
            out.append(f"\n…and {len(moved) - MARKDOWN_CASE_ROWS} more changed cases.")
    for title, refs in (
        ("Only in head", c.added),
        ("Only in base", c.removed),
        ("Changed content (left out)", c.changed),
    ):
        if refs:
            keys = ", ".join(_code(r.key) for r in refs[:MARKDOWN_CASE_ROWS])
            out += ["", f"{title} ({len(refs)}): {keys}"]
    return "\n".join(out) + "\n"


def _num(x: float | None) -> str:
    return "unknown" if x is None else f"{x:,.0f}"


def gate_json(
    comparison: Comparison, decision: GateDecision, *, agents: dict[str, Any] | None = None
) -> str:
    """Strict JSON ``{"decision", "comparison", "agents"}`` (agents: ``agent_moves_json``)."""
    data: dict[str, Any] = {
        "decision": json_safe(asdict(decision)),
        "comparison": comparison.to_dict(),
        "agents": agents,
    }
    return json.dumps(data, allow_nan=False, ensure_ascii=False)
