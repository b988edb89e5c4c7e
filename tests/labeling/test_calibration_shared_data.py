"""Real data: calibration figures of the recorded judges reproduce the data folders' READMEs.

Expected values are computed here straight from the JSONL (plain Python, not
``stats.agreement``), and the pointwise ones are also checked against the README table.
"""

from __future__ import annotations

import json
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa
from statsmodels.stats.proportion import proportion_confint

from core.errors import DomainError
from interop.importers import results_import
from judges.models import JudgeApproval, JudgeVersion
from labeling.approval import judge_trust_approve
from labeling.selectors import calibration_compute, pairwise_calibration_compute
from tests.conftest import shared_data_file

pytestmark = pytest.mark.django_db

README_POINTWISE = {  # llmbar_pointwise/README.md: n, agreement, kappa, FAR, FRR
    ("gpt-4", "LLMBar/Rating_NoRules (0-9, pass>=5)"): (600, 0.66, 0.3211, 0.5847, 0.0936),
    ("gpt-4", "LLMBar/Rating (0-9, pass>=5)"): (600, 0.73, 0.4605, 0.4053, 0.1338),
    ("gpt-4", "LLMBar/Rating_Metrics_Reference (0-9, pass>=5)"): (
        602,
        0.7558,
        0.5116,
        0.3555,
        0.1329,
    ),
    ("gpt-3.5-turbo-0613", "LLMBar/Rating_NoRules (0-9, pass>=5)"): (
        602,
        0.5033,
        0.0066,
        0.9336,
        0.0598,
    ),
    ("gpt-3.5-turbo-0613", "LLMBar/Rating (0-9, pass>=5)"): (602, 0.5017, 0.0033, 0.9402, 0.0565),
}


def _kappa(pairs: list[tuple[str, str]]) -> float:
    n = len(pairs)
    p_o = Fraction(sum(1 for a, b in pairs if a == b), n)
    cats = {x for pair in pairs for x in pair}
    p_e = sum(
        Fraction(sum(1 for a, _ in pairs if a == c), n)
        * Fraction(sum(1 for _, b in pairs if b == c), n)
        for c in cats
    )
    return float((p_o - p_e) / (1 - p_e))


def _records(folder: str) -> list[dict]:
    with shared_data_file(folder).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _import(folder: str):
    path = shared_data_file(folder)
    with path.open("rb") as fh:
        results_import(stream=fh, filename=path.name, suite_name=folder, run_name="shared")


def _version(model: str, protocol: str) -> JudgeVersion:
    return JudgeVersion.objects.get(model=model, protocol=protocol)


def test_it_reproduces_the_llmbar_pointwise_readme_for_each_recorded_judge():
    records = _records("llmbar_pointwise")
    _import("llmbar_pointwise")
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    nulls: dict[tuple[str, str], int] = defaultdict(int)
    for rec in records:
        for jl in rec["judge_labels"]:
            key = (jl["judge_model"], jl["protocol"])
            if jl["value"] is None:
                nulls[key] += 1
            else:
                pairs[key].append((jl["value"], rec["human_label"]["value"]))
    assert set(pairs) == set(README_POINTWISE)
    for key, found in pairs.items():
        cal = calibration_compute(judge_version=_version(*key))
        fails = [j for j, h in found if h == "fail"]
        passes = [j for j, h in found if h == "pass"]
        agreement = sum(1 for j, h in found if j == h) / len(found)
        assert cal.n == len(found)
        assert cal.n_judge_errors == nulls[key]
        assert cal.agreement == pytest.approx(agreement, abs=1e-12)
        assert cal.kappa.kappa == pytest.approx(_kappa(found), abs=1e-12)
        assert (cal.far.numerator, cal.far.denominator) == (fails.count("pass"), len(fails))
        assert (cal.frr.numerator, cal.frr.denominator) == (passes.count("fail"), len(passes))
        n, agr, kappa, far, frr = README_POINTWISE[key]
        assert cal.n == n
        assert round(cal.agreement, 4) == agr
        assert round(cal.kappa.kappa, 4) == kappa
        assert round(cal.far.rate, 4) == far
        assert round(cal.frr.rate, 4) == frr
        assert cal.far.ci_low < cal.far.rate < cal.far.ci_high


def test_none_of_the_five_recorded_llmbar_judges_is_trusted_under_the_interval_rule(alice):
    """The trust rule on the bounds, checked against figures computed here from the JSONL
    with statsmodels (Wilson for the FAR, the asymptotic kappa SE for kappa): every
    recorded judge fails the FAR bound (its point is already 36% to 94%) and its kappa
    bound, none can be approved at the default thresholds."""
    records = _records("llmbar_pointwise")
    _import("llmbar_pointwise")
    pairs: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for rec in records:
        for jl in rec["judge_labels"]:
            if jl["value"] is not None:
                pairs[(jl["judge_model"], jl["protocol"])].append(
                    (jl["value"], rec["human_label"]["value"])
                )
    assert len(pairs) == 5
    for key, found in pairs.items():
        version = _version(*key)
        cal = calibration_compute(judge_version=version)
        fails = [j for j, h in found if h == "fail"]
        accepts = fails.count("pass")
        far_low, far_high = proportion_confint(accepts, len(fails), alpha=0.05, method="wilson")
        table = np.array(
            [
                [sum(1 for j, h in found if (j, h) == (a, b)) for b in ("pass", "fail")]
                for a in ("pass", "fail")
            ]
        )
        ref = sm_kappa(table)
        kappa_low = ref.kappa - 1.959963984540054 * ref.std_kappa
        checks = {c.key: c for c in cal.trust_checks}
        assert checks["far_upper"].value == pytest.approx(far_high, abs=1e-9)
        assert cal.far.ci_low == pytest.approx(far_low, abs=1e-9)
        assert checks["kappa_lower"].value == pytest.approx(kappa_low, abs=1e-9)
        assert checks["human_fails"].value == len(fails) >= 35 and checks["human_fails"].ok
        assert checks["n"].ok
        assert not checks["far_upper"].ok and far_high > 0.1
        assert not checks["kappa_lower"].ok and kappa_low < 0.6
        assert "far_weighted_upper" not in checks  # imported labels: no sampling weights
        assert not cal.trust_ok
        with pytest.raises(DomainError, match="upper 95% bound of the false-accept rate"):
            judge_trust_approve(judge_version=version, by=alice)
    assert not JudgeApproval.objects.exists()


@pytest.mark.parametrize("folder", ["llmbar", "humanpref_pairs"])
def test_it_reproduces_pairwise_agreement_and_position_consistency_from_the_file(folder):
    records = _records(folder)
    _import(folder)
    seen: dict[tuple[str, str], dict[str, dict]] = defaultdict(lambda: defaultdict(dict))
    for rec in records:
        for jl in rec["judge_labels"]:
            seen[(jl["judge_model"], jl["protocol"])][rec["id"]][jl["position"]] = jl["value"]
    human = {rec["id"]: rec["human_label"]["value"] for rec in records}
    for key, by_record in seen.items():
        consistent, inconsistent, errors, hits = [], 0, 0, 0
        first = answered = 0
        for rid, pos in by_record.items():
            o, s = pos.get("original"), pos.get("swapped")
            first += (o == "A") + (s == "B")
            answered += (o is not None) + (s is not None)
            if o is None or s is None:
                errors += 1
            elif o != s:
                inconsistent += 1
            else:
                consistent.append((o, human[rid]))
                hits += o == human[rid]
        cal = pairwise_calibration_compute(judge_version=_version(*key))
        assert cal.n == len(consistent)
        assert cal.n_inconsistent == inconsistent
        assert cal.n_judge_errors == errors
        assert cal.agreement == pytest.approx(hits / len(consistent), abs=1e-12)
        assert cal.kappa.kappa == pytest.approx(_kappa(consistent), abs=1e-12)
        assert cal.position_consistency.numerator == len(consistent)
        assert cal.position_consistency.denominator == len(consistent) + inconsistent
        assert (cal.first_slot_preference.numerator, cal.first_slot_preference.denominator) == (
            first,
            answered,
        )


def test_it_reproduces_the_llmbar_readme_per_presentation_order():
    _import("llmbar")
    cal = pairwise_calibration_compute(judge_version=_version("gpt-4", "LLMBar/Vanilla_NoRules"))
    orders = {p.position: p for p in cal.by_position}
    assert orders["original"].n == 301 and round(orders["original"].agreement, 4) == 0.7575
    assert round(orders["original"].kappa.kappa, 4) == 0.5136
    assert orders["swapped"].n == 301 and round(orders["swapped"].agreement, 4) == 0.7608
    assert round(orders["swapped"].kappa.kappa, 4) == 0.5201
    bison = pairwise_calibration_compute(
        judge_version=_version("text-bison-001", "LLMBar/Vanilla_NoRules")
    )
    assert {p.position: p.n for p in bison.by_position} == {"original": 294, "swapped": 294}
    assert round({p.position: p for p in bison.by_position}["swapped"].kappa.kappa, 4) == 0.306
