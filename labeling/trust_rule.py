"""The trust rule: whether calibration figures allow a lead to mark a judge version trusted,
on 95% bounds, never on points. Thresholds: ``trust_thresholds``.
"""

from __future__ import annotations

from django.conf import settings

from core.errors import DomainError, value_shown
from labeling.figures import Thresholds, TrustCheck
from stats.agreement import KappaResult, RateResult
from stats.calibration_plan import far_fails_needed

DEFAULTS = {"MIN_N": 30, "MIN_KAPPA": 0.6, "MAX_FAR": 0.10, "MIN_POSITION_CONSISTENCY": 0.80}


def trust_thresholds(*, suite=None) -> Thresholds:
    """Settings ``ASSAY["TRUST"]`` (defaults MIN_N 30, MIN_KAPPA 0.6, MAX_FAR 0.10,
    MIN_POSITION_CONSISTENCY 0.80), overridden by ``suite.trust_thresholds``. Raises
    DomainError (field ``trust_thresholds``) for an unknown key or a value out of range.
    """
    conf = dict(DEFAULTS)
    conf.update(getattr(settings, "ASSAY", {}).get("TRUST", {}))
    override = getattr(suite, "trust_thresholds", None) or {}
    for key, value in override.items() if isinstance(override, dict) else ():
        if key not in conf:
            raise DomainError(
                f"unknown key {key!r} ({', '.join(DEFAULTS)})", field="trust_thresholds"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DomainError(
                f"{key} must be a number, got {value_shown(value)}", field="trust_thresholds"
            )
        conf[key] = value
    max_far = float(conf["MAX_FAR"])
    if not 0 < max_far <= 1 or not -1 <= float(conf["MIN_KAPPA"]) <= 1:
        raise DomainError(
            "MAX_FAR must be in (0, 1] and MIN_KAPPA in [-1, 1]", field="trust_thresholds"
        )
    if not 0 <= float(conf["MIN_POSITION_CONSISTENCY"]) <= 1:
        raise DomainError("MIN_POSITION_CONSISTENCY must be in [0, 1]", field="trust_thresholds")
    return Thresholds(
        min_n=int(conf["MIN_N"]),
        min_kappa=float(conf["MIN_KAPPA"]),
        max_far=max_far,
        min_human_fails=far_fails_needed(max_far),
        min_position_consistency=float(conf["MIN_POSITION_CONSISTENCY"]),
    )


def _kappa_check(kappa: KappaResult, th: Thresholds) -> TrustCheck:
    return TrustCheck(
        "kappa_lower",
        "lower 95% bound of Cohen's kappa",
        kappa.ci_low,
        ">=",
        th.min_kappa,
        kappa.ci_low is not None and kappa.ci_low >= th.min_kappa,
    )


def trust_checks(
    *, n: int, human_fails: int, kappa: KappaResult, far, far_weighted, th: Thresholds
) -> list[TrustCheck]:
    """The pointwise rule, one ``TrustCheck`` per condition: n >= min_n; human fails >=
    min_human_fails; the Wilson 95% upper bound of the FAR (and of the weighted FAR, when
    known) <= max_far; kappa's 95% lower bound (Fleiss-Cohen-Everitt SE) >= min_kappa. An
    undefined figure never holds.
    """
    checks = [
        TrustCheck("n", "n (compared trials)", float(n), ">=", float(th.min_n), n >= th.min_n),
        TrustCheck(
            "human_fails",
            "human fails (the FAR's denominator)",
            float(human_fails),
            ">=",
            float(th.min_human_fails or 0),
            th.min_human_fails is not None and human_fails >= th.min_human_fails,
        ),
        TrustCheck(
            "far_upper",
            "upper 95% bound of the false-accept rate (sample, Wilson)",
            far.ci_high if far.rate is not None else None,
            "<=",
            th.max_far,
            far.rate is not None and far.ci_high <= th.max_far,
        ),
    ]
    if far_weighted is not None:
        checks.append(
            TrustCheck(
                "far_weighted_upper",
                "upper 95% bound of the false-accept rate (population estimate, weighted)",
                far_weighted.ci_high,
                "<=",
                th.max_far,
                far_weighted.ci_high is not None and far_weighted.ci_high <= th.max_far,
            )
        )
    checks.append(_kappa_check(kappa, th))
    return checks


def pairwise_trust_checks(
    *, n: int, kappa: KappaResult, position_consistency: RateResult, th: Thresholds
) -> list[TrustCheck]:
    """The pairwise rule, one ``TrustCheck`` per condition: n order-consistent pairs with an A/B
    preference >= min_n; kappa's 95% lower bound >= min_kappa (kappa, not agreement, so
    always choosing one side cannot pass); position consistency's Wilson 95% lower bound >=
    min_position_consistency, since an order-flipping judge abstains on most pairs (Zheng et
    al. 2023, "Judging LLM-as-a-Judge", section 3.3). An undefined figure never holds.
    """
    consistency = position_consistency
    return [
        TrustCheck(
            "n",
            "n (order-consistent pairs with a human preference)",
            float(n),
            ">=",
            float(th.min_n),
            n >= th.min_n,
        ),
        _kappa_check(kappa, th),
        TrustCheck(
            "position_consistency_lower",
            "lower 95% bound of position consistency (Wilson)",
            consistency.ci_low if consistency.rate is not None else None,
            ">=",
            th.min_position_consistency,
            consistency.rate is not None
            and consistency.ci_low is not None
            and consistency.ci_low >= th.min_position_consistency,
        ),
    ]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def trust_reasons(
    checks: list[TrustCheck], *, kappa: KappaResult, far: RateResult | None = None
) -> list[str]:
    """One sentence per failed condition (empty when trust is allowed)."""
    reasons = []
    for c in checks:
        if c.ok:
            continue
        if c.key == "kappa_lower" and kappa.kappa is None:
            reasons.append(f"kappa is {kappa.reason or 'undefined'}")
        elif c.key == "far_upper" and far is not None and far.rate is None:
            reasons.append(f"false-accept rate is {far.reason or 'undefined'}")
        elif c.value is None:
            reasons.append(f"{c.label} is undefined")
        elif c.key in ("n", "human_fails"):
            reasons.append(f"{c.label}: {int(c.value)} is below {int(c.threshold)}")
        elif c.op == "<=":
            reasons.append(f"{c.label}: {_pct(c.value)} is above {_pct(c.threshold)}")
        elif c.key == "kappa_lower":
            reasons.append(f"{c.label}: {c.value:.3f} is below {c.threshold:g}")
        else:
            reasons.append(f"{c.label}: {_pct(c.value)} is below {_pct(c.threshold)}")
    return reasons
