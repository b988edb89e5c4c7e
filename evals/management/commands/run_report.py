"""``manage.py run_report RUN [--json]``: the run report in the terminal or as strict JSON.
RUN as ``evals.selectors.run_resolve`` reads it."""

from __future__ import annotations

import json

from core.commands import DomainCommand
from core.money import per_usd_text, usd_text
from core.templatetags.dashboard import percent_interval
from evals.report.agents import agent_lines
from evals.report.build import RunReport
from evals.report.figures import Figures
from evals.report.selectors import run_report
from evals.selectors import run_lookup


def _pct(value: float | None) -> str:
    return "undefined" if value is None else f"{value * 100:.1f}%"


def _rate(f: Figures) -> str:
    r = f.pass_rate
    if r.mean is None:
        return "undefined (nothing graded)"
    # clustered_rate_interval: an interval whenever the mean is defined, never of zero width
    # (and percent_interval never prints it as if it were)
    return f"{_pct(r.mean)} 95% CI {percent_interval(r.ci_low, r.ci_high)} over {_cases(r.n_cases)}"


def _status_text(report: RunReport) -> str:
    """The status the pages show: "succeeded", "imported · 3 of 60 trials errored"."""
    shown = report.status_shown
    if not shown:
        return report.status
    return " · ".join([shown["label"], *shown["problems"]])


def render_text(report: RunReport) -> str:
    """The report as plain text lines for the terminal."""
    t = report.trials
    lines = [
        f"{report.suite_name} / {report.run_name} ({_status_text(report)})"
        + (" [simulated]" if report.is_simulated else "")
    ]
    lines += [f"!! {b}" for b in (report.errored_banner, report.incomplete_banner) if b]
    lines.append(
        f"trials: {t.total} total, {t.ok} ok, {t.errored} errored (pipeline), "
        f"{t.pending} pending, {t.cancelled} cancelled; {t.grade_errors} grade errors"
    )
    for f in [report.overall, *report.graders]:
        extra = f", {f.grades_errored} errored dropped" if f.grades_errored else ""
        if f.cancelled:
            extra += f"; {f.cancelled} cancelled, not graded"
        lines.append(f"{f.key}: {_rate(f)}; {f.trials_passed}/{f.trials_graded} trials{extra}")
        c = f.corrected
        if c is not None and c.corrected is not None:
            ci = "" if c.ci_low is None else f" 95% CI {percent_interval(c.ci_low, c.ci_high)}"
            lines.append(
                f"  corrected for judge error (Rogan-Gladen, TPR {c.tpr:.3f}, TNR "
                f"{c.tnr:.3f}): {_pct(c.corrected)}{ci}"
            )
        elif c is not None:
            lines.append(f"  corrected for judge error: undefined ({c.reason})")
    pass_k = report.overall.pass_k
    # Every k is over the same cases (those with k_max graded trials): say which, so a
    # reader never compares it with the pass rate over every case unawares.
    over = ""
    if pass_k and pass_k[0].cases_left_out:
        over = (
            f" over {pass_k[0].n_cases} of {pass_k[0].n_cases + pass_k[0].cases_left_out} "
            f"cases ({pass_k[0].cases_left_out} left out: fewer than {len(pass_k)} graded)"
        )
    lines.append(
        f"pass@k / pass^k (95% CI){over}: "
        + ", ".join(
            f"k={p.k}: {_pct(p.pass_at_k)} {percent_interval(p.pass_at_k_low, p.pass_at_k_high)}"
            f" / {_pct(p.pass_hat_k)} {percent_interval(p.pass_hat_k_low, p.pass_hat_k_high)}"
            for p in pass_k
        )
    )
    for s in report.slices:
        lines.append(f"tag {s.tag} ({_cases(s.n_cases)}): {_rate(s.overall)}")
    lines += _decision_lines(report.decisions)
    lines += agent_lines(report.agents)
    for g in report.failure_reasons:
        lines.append(f"{g.grader}: {g.text}")
    spent = report.cost
    if spent.total_usd is not None:
        cost = usd_text(spent.total_usd)
    elif spent.unknown and spent.unknown < spent.finished:
        cost = (
            f">= {usd_text(spent.known_usd)} "
            f"(cost unknown for {spent.unknown} of {spent.finished} trials)"
        )
    else:
        cost = "unknown"
    lines.append(
        f"tokens: {_tokens(report.tokens.input, report.tokens.input_unknown, spent.finished)} in, "
        f"{_tokens(report.tokens.output, report.tokens.output_unknown, spent.finished)} out; "
        f"latency p50 "
        f"{_ms(report.latency.p50_ms)}, p95 {_ms(report.latency.p95_ms)}; cost {cost}"
    )
    if report.cost_classes is not None:
        priced = ", ".join(report.cost_classes.priced) or "none"
        lines.append(f"token classes priced: {priced}")
        lines += report.cost_classes.lines
    if report.cost_quality is not None:
        lines.append(quality_line(report.cost_quality))
    return "\n".join(lines)


def _tokens(known: int, unknown: int, finished: int) -> str:
    """A token sum as the run page shows it: "unknown" when every finished trial's count is
    unknown (never 0), ">= N (unknown for K of F trials)" when some are, else "N"."""
    if unknown and unknown >= finished:
        return "unknown"
    if unknown:
        return f">= {known} (unknown for {unknown} of {finished} trials)"
    return str(known)


def _decision_lines(d: dict | None) -> list[str]:
    """The contract decisions (``RunReport.decisions``) as terminal lines; none without."""
    if d is None:
        return []
    c = d["counts"]
    share = "undefined" if d["valid_share"] is None else f"{d['valid_share'] * 100:.1f}%"
    lines = [
        f"decisions: {c['rejected']} rejected, {c['review']} in review, {c['accepted']} "
        f"accepted, {c['errored']} errored, {c['not_graded']} not graded; "
        f"{d['infrastructure_errors']} infrastructure errors apart",
        f"valid responses: {d['valid']}/{d['attempted']} attempted ({share})",
    ]
    lines += [f"  {r['trials']} x {r['reason']}" for r in d["reasons"]]
    if d["missing_coverage"]:
        lines.append(
            "missing coverage: "
            + ", ".join(f"{k} in {n} trials" for k, n in d["missing_coverage"].items())
        )
    return lines


def quality_line(q) -> str:
    """Cost against quality in one line: cost per passing trial and pass rate per dollar with
    its 95% interval, or why they are undefined (``evals.report.cost_quality``)."""
    why = f" ({q.note})" if q.note else ""
    per_pass = usd_text(q.cost_per_passing_trial_usd)
    per_usd = per_usd_text(q.pass_rate_per_usd)
    if q.pass_rate_per_usd_low is not None:
        low, high = per_usd_text(q.pass_rate_per_usd_low), per_usd_text(q.pass_rate_per_usd_high)
        per_usd += f" [{low.removesuffix(' per $')}, {high}]"
    return f"cost per passing trial {per_pass}; pass rate per dollar {per_usd}{why}"


def _cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def _ms(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f} ms"


class Command(DomainCommand):
    help = "Print a run's report (pass rate with CI, pass@k, errors, cost); --json for strict JSON."

    def add_arguments(self, parser):
        parser.add_argument("run", help="run UUID, 'suite name/run name' or a unique run name")
        parser.add_argument("--json", action="store_true", help="strict JSON (no NaN/Infinity)")

    def handle(self, *args, **options):
        report = run_report(run=run_lookup(options["run"]))
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), allow_nan=False, ensure_ascii=False))
        else:
            self.stdout.write(render_text(report))
