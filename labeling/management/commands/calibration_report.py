"""``manage.py calibration_report [--suite NAME] [--json]``: every judge version with grades
on labeled trials, its calibration figures and trust state, as text or strict JSON."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from evals.models import Suite
from judges.trust import active_approval_get
from labeling.figures import Calibration
from labeling.selectors import calibration_compute, calibration_judge_versions


def _num(value: float | None, reason: str = "") -> str:
    return (reason or "undefined") if value is None else f"{value:.4f}"


def _ci(low: float | None, high: float | None) -> str:
    return "" if low is None else f" [95% CI {low:.4f}, {high:.4f}]"


def _rate_text(name: str, r) -> str:
    counts = f"({r.numerator}/{r.denominator})"
    return f"  {name}: {_num(r.rate, r.reason)} {counts}{_ci(r.ci_low, r.ci_high)}"


def render_text(cal: Calibration, trust: str) -> str:
    """One judge version's figures as plain text lines."""
    k = cal.kappa
    lines = [
        f"{cal.judge_version_label}: {trust}",
        f"  n: {cal.n} (judge errors {cal.n_judge_errors}, missing {cal.n_judge_missing}, "
        f"not judged {cal.n_not_judged}, unresolved human disagreements {cal.n_unresolved})",
        f"  agreement: {_num(cal.agreement)} ({cal.agreement_numerator}/{cal.n})",
        f"  kappa: {_num(k.kappa, k.reason)}{_ci(k.ci_low, k.ci_high)}",
        _rate_text("false-accept rate", cal.far),
        _rate_text("false-reject rate", cal.frr),
    ]
    if cal.far_weighted is not None and cal.far_weighted.rate is not None:
        w = cal.far_weighted
        lines.append(
            f"  false-accept rate (population estimate, weighted): {w.rate:.4f}"
            f"{_ci(w.ci_low, w.ci_high)} (Kish effective n {w.n_eff:.1f})"
        )
    lines.append(f"  trust rule: {'met' if cal.trust_ok else 'not met'}")
    for c in cal.trust_checks:
        value = "undefined" if c.value is None else f"{c.value:.4f}"
        if c.key in ("n", "human_fails") and c.value is not None:
            value = f"{int(c.value)}"
        lines.append(f"    {'ok ' if c.ok else 'NO '} {c.label}: {value} {c.op} {c.threshold:g}")
    lines += [f"  warning: {w}" for w in cal.warnings]
    return "\n".join(lines)


class Command(BaseCommand):
    help = (
        "Calibration figures (n, agreement, kappa, false-accept and false-reject rates) "
        "and trust state of every judge version with grades on labeled trials."
    )

    def add_arguments(self, parser):
        parser.add_argument("--suite", help="only trials of this suite (by name)")
        parser.add_argument("--json", action="store_true", help="strict JSON on stdout")

    def handle(self, *args, **options):
        suite = None
        if options["suite"]:
            suite = Suite.objects.filter(name=options["suite"]).first()
            if suite is None:
                raise CommandError(f"--suite: no suite named {options['suite']!r}")
        rows = []
        for version in calibration_judge_versions(suite=suite):
            cal = calibration_compute(judge_version=version, suite=suite)
            approval = active_approval_get(judge_version=version)
            trust = {
                "trusted": approval is not None,
                "trusted_at": approval.approved_at.isoformat() if approval else None,
                "approved_by": approval.approved_by.get_username() if approval else None,
            }
            rows.append((cal, trust))
        if options["json"]:
            payload = {
                "suite": suite.name if suite else None,
                "judge_versions": [{**cal.as_json(), "trust": trust} for cal, trust in rows],
            }
            self.stdout.write(json.dumps(payload, allow_nan=False, indent=2))
            return
        if not rows:
            self.stdout.write("no judge version has grades on labeled trials")
        for cal, trust in rows:
            state = (
                f"trusted (by {trust['approved_by']}, {trust['trusted_at']})"
                if trust["trusted"]
                else "untrusted"
            )
            self.stdout.write(render_text(cal, state))
