"""Calibration on imported labeled records: faults D1 (a)(b)(c), A1 (import) and B2 (import)."""

from __future__ import annotations

import json
import math

import pytest

from judges.models import JudgeVersion
from labeling.selectors import calibration_compute, pairwise_calibration_compute
from tests.import_helpers import PAIR_TEMPLATE, import_bytes, jsonl, record

pytestmark = pytest.mark.django_db


def _records(humans: list[str], judges: list[str | None]) -> list[dict]:
    out = []
    for i, (h, j) in enumerate(zip(humans, judges, strict=True), start=1):
        rec = record(
            id=f"cal-a-{i:02d}",
            input=f"q{i:02d}",
            responses=[{"response_id": "R", "model": None, "text": f"r{i:02d}"}],
        )
        rec["human_label"]["value"] = h
        rec["judge_labels"][0]["value"] = j
        out.append(rec)
    return out


def _calibrate(humans, judges):
    import_bytes(jsonl(_records(humans, judges)))
    return calibration_compute(judge_version=JudgeVersion.objects.get())


def _strict_json(cal) -> str:
    text = json.dumps(cal.as_json(with_disagreements=True), allow_nan=False)
    assert "NaN" not in text and "Infinity" not in text
    return text


def test_it_leaves_kappa_undefined_when_every_label_is_pass_fault_d1a():
    cal = _calibrate(["pass"] * 30, ["pass"] * 30)
    assert (cal.n, cal.agreement_numerator, cal.agreement) == (30, 30, 1.0)
    assert cal.kappa.kappa is None
    assert (cal.kappa.ci_low, cal.kappa.ci_high) == (None, None)
    assert cal.kappa.reason == "undefined (only one class in the labels)"
    assert (cal.far.rate, cal.far.numerator, cal.far.denominator) == (None, 0, 0)
    assert cal.far.reason == "undefined (no human fails)"
    assert any("no human fails" in w for w in cal.warnings)
    assert not cal.trust_ok
    _strict_json(cal)


def test_it_keeps_a_defined_kappa_of_zero_fault_d1b():
    cal = _calibrate(["pass"] * 30, ["pass"] * 29 + ["fail"])
    assert (cal.n, cal.agreement_numerator) == (30, 29)
    assert cal.agreement == pytest.approx(29 / 30)
    assert cal.kappa.kappa == 0.0 and cal.kappa.reason == ""
    assert cal.kappa.expected == pytest.approx(29 / 30)
    assert cal.far.rate is None and cal.far.reason == "undefined (no human fails)"
    assert (cal.frr.numerator, cal.frr.denominator) == (1, 30)
    assert cal.frr.rate == pytest.approx(1 / 30)
    assert len(cal.disagreements) == 1
    assert cal.disagreements[0].judge_verdict == "fail"
    assert cal.disagreements[0].human_verdict == "pass"
    assert "0.0" in json.dumps(cal.as_json()["kappa"]["kappa"])
    _strict_json(cal)


def test_it_gives_kappa_one_on_perfect_agreement_with_both_classes_fault_d1c():
    cal = _calibrate(["pass", "pass", "fail", "fail"], ["pass", "pass", "fail", "fail"])
    assert (cal.n, cal.agreement) == (4, 1.0)
    assert cal.kappa.kappa == 1.0
    assert (cal.far.rate, cal.far.numerator, cal.far.denominator) == (0.0, 0, 2)
    assert (cal.frr.rate, cal.frr.numerator, cal.frr.denominator) == (0.0, 0, 2)
    assert any("below 30" in w for w in cal.warnings)
    assert any("fewer than 5" in w for w in cal.warnings)
    assert "n (compared trials): 4 is below 30" in cal.trust_reasons


def test_it_counts_a_null_judge_value_as_a_judge_error_not_a_verdict_fault_a1():
    cal = _calibrate(["pass", "fail", "fail", "pass"], ["pass", None, "fail", "fail"])
    assert cal.n == 3 and cal.n_judge_errors == 1
    assert (cal.far.numerator, cal.far.denominator) == (0, 1)  # the null is not a pass
    assert (cal.frr.numerator, cal.frr.denominator) == (1, 2)  # nor a fail
    assert cal.agreement == pytest.approx(2 / 3)
    assert cal.kappa.n == 3
    assert all(not math.isnan(x) for x in (cal.agreement, cal.kappa.kappa))


def test_it_counts_an_order_dependent_pairwise_record_as_inconsistent_fault_b2():
    import_bytes(jsonl([record(PAIR_TEMPLATE)]))
    cal = pairwise_calibration_compute(judge_version=JudgeVersion.objects.get())
    assert cal.n_pairs == 1
    assert (cal.position_consistency.numerator, cal.position_consistency.denominator) == (0, 1)
    assert cal.position_consistency.rate == 0.0
    assert cal.n_inconsistent == 1
    assert cal.n == 0 and cal.agreement is None  # not a vote for A
    assert cal.kappa.kappa is None
    assert (cal.first_slot_preference.numerator, cal.first_slot_preference.denominator) == (2, 2)
    json.dumps(cal.as_json(), allow_nan=False)


def test_it_counts_a_consistent_pairwise_verdict_as_a_vote():
    rec = record(PAIR_TEMPLATE)
    rec["judge_labels"][1]["value"] = "A"
    import_bytes(jsonl([rec]))
    cal = pairwise_calibration_compute(judge_version=JudgeVersion.objects.get())
    assert (cal.n, cal.agreement, cal.n_inconsistent) == (1, 1.0, 0)
    assert cal.position_consistency.rate == 1.0
    assert (cal.first_slot_preference.numerator, cal.first_slot_preference.denominator) == (1, 2)
