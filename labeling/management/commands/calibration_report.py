"""``manage.py calibration_report [--suite NAME] [--json]``: each judge version's calibration
figures and trust state, then each pairwise judge version's (position consistency,
first-slot preference, agreement per order; JSON key ``pairwise_judge_versions``).
"""

from __future__ import annotations

import json

from django.core.management.base import CommandError

from core.commands import DomainCommand
from evals.models import Suite
from judges.trust import active_approval_get
from labeling.figures import Calibration, PairwiseCalibration
from labeling.selectors import (
    calibration_compute,
    calibration_judge_versions,
    pairwise_calibration_compute,
    pairwise_calibration_judge_versions,
)
from stats.intervals import wilson_interval


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
    lines += _rule_lines(cal.trust_ok, cal.trust_checks)
    lines += [f"  warning: {w}" for w in cal.warnings]
    return "\n".join(lines)


def _rule_lines(ok: bool, checks) -> list[str]:
    lines = [f"  trust rule: {'met' if ok else 'not met'}"]
    for c in checks:
        value = "undefined" if c.value is None else f"{c.value:.4f}"
        if c.key in ("n", "human_fails") and c.value is not None:
            value = f"{int(c.value)}"
        lines.append(f"    {'ok ' if c.ok else 'NO '} {c.label}: {value} {c.op} {c.threshold:g}")
    return lines


def render_pairwise_text(cal: PairwiseCalibration, trust: str) -> str:
    """One pairwise judge version's figures as plain text lines."""
    k = cal.kappa
    lines = [
        f"{cal.judge_version_label} (pairwise): {trust}",
        f"  pairs: {cal.n_pairs} (order-consistent with a human preference {cal.n}, "
        f"position-inconsistent ties {cal.n_inconsistent}, judge errors {cal.n_judge_errors}, "
        f"unresolved human disagreements {cal.n_unresolved})",
        _rate_text("position consistency", cal.position_consistency),
        _rate_text("first-slot preference", cal.first_slot_preference),
        *(
            [_rate_text("reviewers' first-slot preference", cal.human_first_slot)]
            if cal.human_first_slot is not None
            else []
        ),
        _rate_text("agreement (order-consistent)", cal.agreement_rate)
        if cal.agreement_rate is not None
        else f"  agreement (order-consistent): {_num(cal.agreement)}",
        f"  kappa (order-consistent): {_num(k.kappa, k.reason)}{_ci(k.ci_low, k.ci_high)}",
    ]
    for p in cal.by_position:
        hits = round(p.agreement * p.n) if p.agreement is not None else 0
        low, high = wilson_interval(hits, p.n) if p.n else (None, None)
        lines.append(
            f"  {p.position} order alone: n {p.n} (errors {p.n_errors}), agreement "
            f"{_num(p.agreement)}{_ci(low, high)}, kappa {_num(p.kappa.kappa, p.kappa.reason)}"
            f"{_ci(p.kappa.ci_low, p.kappa.ci_high)}"
        )
    lines += _rule_lines(cal.trust_ok, cal.trust_checks)
    return "\n".join(lines)


def _trust(version) -> dict:
    approval = active_approval_get(judge_version=version)
    return {
        "trusted": approval is not None,
        "trusted_at": approval.approved_at.isoformat() if approval else None,
        "approved_by": approval.approved_by.get_username() if approval else None,
    }


def _state(trust: dict) -> str:
    if trust["trusted"]:
        return f"trusted (by {trust['approved_by']}, {trust['trusted_at']})"
    return "untrusted"


class Command(DomainCommand):
    help = (
        "Calibration figures (n, agreement, kappa, false-accept and false-reject rates) "
        "and trust state of every judge version with grades on labeled trials; then every "
        "pairwise judge version with verdicts on preference-labeled pairs (position "
        "consistency, first-slot preference, agreement and kappa over order-consistent "
        "verdicts)."
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
            rows.append((cal, _trust(version)))
        pairwise = [
            (pairwise_calibration_compute(judge_version=version, suite=suite), _trust(version))
            for version in pairwise_calibration_judge_versions(suite=suite)
        ]
        if options["json"]:
            payload = {
                "suite": suite.name if suite else None,
                "judge_versions": [{**cal.as_json(), "trust": trust} for cal, trust in rows],
                "pairwise_judge_versions": [
                    {**cal.as_json(), "trust": trust} for cal, trust in pairwise
                ],
            }
            self.stdout.write(json.dumps(payload, allow_nan=False, indent=2))
            return
        if not rows and not pairwise:
            self.stdout.write("no judge version has grades on labeled trials")
        for cal, trust in rows:
            self.stdout.write(render_text(cal, _state(trust)))
        for cal, trust in pairwise:
            self.stdout.write(render_pairwise_text(cal, _state(trust)))
