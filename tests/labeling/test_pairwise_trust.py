"""Pairwise trust approval (issue 12, point 5): a pairwise judge is trusted on the 95% bounds
of kappa over its order-consistent verdicts and of its position consistency, through the
same service, page and report as pointwise judges.

Expected bounds are computed here independently (statsmodels' kappa standard error and
Wilson interval), straight from the shared data's JSONL where the data is real."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa
from statsmodels.stats.proportion import proportion_confint

from core.errors import DomainError
from evals.models import Case, Run, Suite, Trial, TrialPair
from judges.models import JudgeApproval, JudgeVersion, PairwiseVerdict
from judges.versions import judge_version_create
from labeling.approval import judge_trust_approve
from labeling.figures import Thresholds
from labeling.models import PreferenceLabel
from labeling.pairwise import pairwise_calibration_compute
from labeling.trust_rule import pairwise_trust_checks
from stats.agreement import RateResult, cohens_kappa
from tests.conftest import PASSWORD
from tests.labeling.test_calibration_shared_data import _import, _records, _version

pytestmark = pytest.mark.django_db

Z95 = 1.959963984540054


def pairwise_judge(rows: list[tuple[str | None, str | None, str | None]], *, suite_name="S"):
    """A pairwise judge version with one pair per row: (original-order verdict, swapped-order
    verdict, human preference), verdicts in the original A/B naming, None = errored verdict
    (or, for the human, no label)."""
    suite, _ = Suite.objects.get_or_create(name=suite_name)
    runs = [
        Run.objects.create(suite=suite, name=f"{suite_name}-{side}", target_kind="callable")
        for side in ("base", "head")
    ]
    version, _ = judge_version_create(
        judge_name=f"pw-{suite_name}",
        kind="pairwise",
        model="judge-model",
        base_url="http://127.0.0.1:9",
        prompt_template="",
        params={},
        output_schema={},
    )
    for i, (orig, swap, human) in enumerate(rows):
        case = Case.objects.create(suite=suite, key=f"c{i}", input="q")
        a, b = (
            Trial.objects.create(run=run, case=case, attempt=1, status="ok", output=f"o{i}")
            for run in runs
        )
        pair = TrialPair.objects.create(case=case, trial_a=a, trial_b=b)
        for position, preferred in (("original", orig), ("swapped", swap)):
            PairwiseVerdict.objects.create(
                pair=pair,
                judge_version=version,
                position=position,
                status="ok" if preferred else "error",
                preferred=preferred or "",
            )
        if human is not None:
            PreferenceLabel.objects.create(pair=pair, reviewer_name="r1", preferred=human)
    return version, suite


def agreeing_rows(n: int) -> list[tuple[str, str, str]]:
    """n order-consistent pairs where the judge agrees with the human (half A, half B)."""
    return [("A", "A", "A") if i % 2 else ("B", "B", "B") for i in range(n)]


def test_a_judge_that_flips_with_the_order_is_not_trusted_on_the_pairs_it_kept():
    """Perfect agreement (kappa 1) on the 40 pairs it answered consistently, but it flipped on
    40 more: position consistency 50%, so no trust, and the reason names the bound."""
    version, _ = pairwise_judge(agreeing_rows(40) + [("A", "B", "A")] * 40)
    cal = pairwise_calibration_compute(judge_version=version)
    assert cal.n == 40 and cal.kappa.kappa == 1.0 and cal.n_inconsistent == 40
    checks = {c.key: c for c in cal.trust_checks}
    assert checks["n"].ok and checks["kappa_lower"].ok
    low, high = proportion_confint(40, 80, alpha=0.05, method="wilson")
    assert checks["position_consistency_lower"].value == pytest.approx(low, abs=1e-12)
    assert not checks["position_consistency_lower"].ok and not cal.trust_ok
    assert cal.trust_reasons == [
        f"lower 95% bound of position consistency (Wilson): {100 * low:.1f}% is below 80.0%"
    ]


def test_a_judge_that_always_picks_one_side_of_a_lopsided_set_is_not_trusted():
    """Always "A" where the humans chose A on 45 of 50: agreement 90%, kappa 0. Raw agreement
    would pass; the kappa bound does not."""
    rows = [("A", "A", "A")] * 45 + [("A", "A", "B")] * 5
    version, _ = pairwise_judge(rows)
    cal = pairwise_calibration_compute(judge_version=version)
    assert cal.agreement == pytest.approx(0.9)
    assert not cal.trust_ok
    assert [c.key for c in cal.trust_checks if not c.ok] == ["kappa_lower"]


def test_the_rule_needs_n_and_holds_with_enough_consistent_agreeing_pairs(alice):
    """29 consistent agreeing pairs: one short of MIN_N 30 however good. 60 of them: trusted,
    and the approval records the pairwise figures."""
    short, _ = pairwise_judge(agreeing_rows(29), suite_name="short")
    cal = pairwise_calibration_compute(judge_version=short)
    assert [c.key for c in cal.trust_checks if not c.ok] == ["n"]
    with pytest.raises(DomainError, match="n \\(order-consistent pairs with a human preference\\)"):
        judge_trust_approve(judge_version=short, by=alice)

    good, suite = pairwise_judge(agreeing_rows(60), suite_name="good")
    approval = judge_trust_approve(judge_version=good, by=alice, suite=suite)
    assert approval.figures["kind"] == "pairwise"
    assert approval.figures["n"] == 60 and approval.figures["trust_ok"] is True
    assert approval.figures["suite_name"] == "good"
    good.refresh_from_db()
    assert good.is_trusted
    with pytest.raises(DomainError, match="already trusted"):
        judge_trust_approve(judge_version=good, by=alice, suite=suite)


def test_figures_that_changed_since_the_page_was_loaded_are_refused(alice):
    version, _ = pairwise_judge(agreeing_rows(60))
    shown = pairwise_calibration_compute(judge_version=version)
    pair = TrialPair.objects.first()
    PreferenceLabel.objects.create(pair=pair, reviewer_name="r2", preferred="tie")
    with pytest.raises(DomainError, match="changed since the page was loaded"):
        judge_trust_approve(judge_version=version, by=alice, figures=shown)
    assert not JudgeApproval.objects.exists()


def test_suite_thresholds_apply_to_pairwise_judges_and_are_validated(alice):
    version, suite = pairwise_judge(agreeing_rows(40) + [("A", "B", "A")] * 8)
    assert pairwise_calibration_compute(judge_version=version, suite=suite).trust_ok is False
    suite.trust_thresholds = {"MIN_POSITION_CONSISTENCY": 0.6}
    suite.save()
    assert pairwise_calibration_compute(judge_version=version, suite=suite).trust_ok is True
    suite.trust_thresholds = {"MIN_POSITION_CONSISTENCY": 1.5}
    suite.save()
    with pytest.raises(DomainError, match="MIN_POSITION_CONSISTENCY"):
        pairwise_calibration_compute(judge_version=version, suite=suite)


def test_an_undefined_figure_never_holds():
    th = Thresholds(min_n=0, min_kappa=-1.0, max_far=1.0, min_position_consistency=0.0)
    empty = RateResult(None, 0, 0, None, None, "undefined")
    checks = pairwise_trust_checks(
        n=0, kappa=cohens_kappa([], []), position_consistency=empty, th=th
    )
    assert [c.ok for c in checks] == [True, False, False]


def _expected_decision(found: list[tuple[str, str]], consistent: int, answered_both: int, th):
    table = np.array([[sum(1 for j, h in found if (j, h) == (a, b)) for b in "AB"] for a in "AB"])
    ref = sm_kappa(table)
    kappa_low = ref.kappa - Z95 * ref.std_kappa
    pc_low, _ = proportion_confint(consistent, answered_both, alpha=0.05, method="wilson")
    ok = len(found) >= th["MIN_N"] and kappa_low >= th["MIN_KAPPA"]
    return float(kappa_low), float(pc_low), bool(ok and pc_low >= th["MIN_POSITION_CONSISTENCY"])


@pytest.mark.parametrize("folder", ["llmbar", "humanpref_pairs"])
def test_the_recorded_pairwise_judges_get_the_decision_their_bounds_give(folder, alice):
    """Each recorded pairwise judge's bounds, recomputed from the JSONL with statsmodels, and
    the decision they give at the default thresholds. On llmbar only LLMBar's best protocol
    (gpt-4, Metrics_Reference: kappa 0.805, position consistency 92%) is trustworthy."""
    records = _records(folder)
    _import(folder)
    by_judge: dict[tuple[str, str], dict[str, dict]] = defaultdict(lambda: defaultdict(dict))
    for rec in records:
        for jl in rec["judge_labels"]:
            by_judge[(jl["judge_model"], jl["protocol"])][rec["id"]][jl["position"]] = jl["value"]
    human = {rec["id"]: rec["human_label"]["value"] for rec in records}
    th = {"MIN_N": 30, "MIN_KAPPA": 0.6, "MIN_POSITION_CONSISTENCY": 0.8}
    trusted = []
    for key, seen in by_judge.items():
        found, consistent, answered_both = [], 0, 0
        for rid, pos in seen.items():
            o, s = pos.get("original"), pos.get("swapped")
            if o is None or s is None:
                continue
            answered_both += 1
            if o == s:
                consistent += 1
                if human[rid] in ("A", "B"):
                    found.append((o, human[rid]))
        kappa_low, pc_low, ok = _expected_decision(found, consistent, answered_both, th)
        version = _version(*key)
        cal = pairwise_calibration_compute(judge_version=version)
        checks = {c.key: c for c in cal.trust_checks}
        assert checks["kappa_lower"].value == pytest.approx(kappa_low, abs=1e-9)
        assert checks["position_consistency_lower"].value == pytest.approx(pc_low, abs=1e-12)
        assert cal.trust_ok is ok
        if ok:
            trusted.append(key)
            judge_trust_approve(judge_version=version, by=alice)
        else:
            with pytest.raises(DomainError, match="thresholds not met"):
                judge_trust_approve(judge_version=version, by=alice)
    if folder == "llmbar":
        assert trusted == [("gpt-4", "LLMBar/Metrics_Reference")]
    else:
        assert trusted == []
    assert JudgeApproval.objects.filter(revoked_at__isnull=True).count() == len(trusted)


def test_the_lead_marks_a_pairwise_judge_trusted_on_the_page_and_others_cannot(
    client, alice, bob, carol
):
    version, _ = pairwise_judge(agreeing_rows(60))
    url = reverse("labeling:calibration", args=[version.uuid])
    approve = reverse("labeling:trust-approve", args=[version.uuid])
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.get(url).content.decode()
    assert 'id="check-position_consistency_lower"' in page and 'id="mark-trusted"' not in page
    form = {
        "n": 60,
        "agreement_numerator": 60,
        "n_inconsistent": 0,
        "n_judge_errors": 0,
        "n_unresolved": 0,
    }
    assert client.post(approve, form).status_code == 403
    client.logout()
    assert client.login(username=alice.username, password=PASSWORD)
    page = client.get(url).content.decode()
    assert 'id="mark-trusted" >' in page or 'id="mark-trusted">' in page  # enabled
    assert "not offered yet" not in page
    stale = client.post(approve, {**form, "n": 59}, follow=True).content.decode()
    assert "changed since the page was loaded" in stale and not JudgeApproval.objects.exists()
    done = client.post(approve, form, follow=True).content.decode()
    assert "is trusted" in done and 'id="approval-pairwise"' in done
    assert JudgeApproval.objects.get().figures["kind"] == "pairwise"


def test_calibration_report_json_carries_the_pairwise_rule(capsys):
    version, _ = pairwise_judge(agreeing_rows(40) + [("A", "B", "A")] * 40)
    call_command("calibration_report", "--json")
    payload = json.loads(capsys.readouterr().out)
    (row,) = payload["pairwise_judge_versions"]
    assert row["judge_version_id"] == version.id and row["kind"] == "pairwise"
    assert row["trust_ok"] is False
    assert {c["key"]: c["ok"] for c in row["trust_checks"]} == {
        "n": True,
        "kappa_lower": True,
        "position_consistency_lower": False,
    }
    assert row["thresholds"]["min_position_consistency"] == 0.8
    call_command("calibration_report")
    text = capsys.readouterr().out
    assert "trust rule: not met" in text and "NO  lower 95% bound of position consistency" in text


def test_a_version_is_refused_when_it_has_no_pairwise_verdicts_at_all(alice):
    """A pairwise judge with no verdicts: n 0, kappa and consistency undefined, refused."""
    version, _ = judge_version_create(
        judge_name="empty-pw",
        kind="pairwise",
        model="m",
        base_url="http://127.0.0.1:9",
        prompt_template="",
        params={},
        output_schema={},
    )
    assert isinstance(version, JudgeVersion)
    with pytest.raises(DomainError, match="kappa is"):
        judge_trust_approve(judge_version=version, by=alice)
