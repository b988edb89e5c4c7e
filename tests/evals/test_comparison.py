"""Comparing a head run with a base run: matching, classes, headline, power, gate decision."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.comparison.compute import BROKEN, comparison_compute
from evals.comparison.gate import gate_decide
from evals.comparison.pvalue import pvalue_format
from evals.comparison.render import gate_text
from evals.comparison.run_data import run_data_from_dict, run_data_get, run_data_to_dict
from evals.comparison.selectors import comparison_get
from stats.passk import difference_interval
from tests.comparison_builders import db_run, judge_version, run_data

COLLAPSE_BASE = {
    **{f"c{i:02d}": "PPPPP" for i in range(3)},
    **{f"c{i:02d}": "PPPPF" for i in range(3, 10)},
    **{f"c{i:02d}": "PPPPP" for i in range(10, 12)},
}
COLLAPSE_HEAD = {
    **{f"c{i:02d}": "FFFFF" for i in range(3)},
    **{f"c{i:02d}": "PPPPF" for i in range(3, 8)},
    **{f"c{i:02d}": "PPPPP" for i in range(8, 12)},
}


def test_it_never_formats_a_p_value_as_zero_fault_d2():
    assert pvalue_format(2 / 1024) == "0.002"
    assert pvalue_format(0.0) == "< 0.001"
    assert pvalue_format(1e-9) == "< 0.001"
    assert pvalue_format(0.41) == "0.41"
    assert pvalue_format(0.0496) == "0.0496"  # "0.050" would read as not significant
    assert pvalue_format(1.0) == "1.00"
    with pytest.raises(ValueError):
        pvalue_format(float("nan"))


def d2_runs(reverse: bool = False):
    tags = {f"c{i}": ["t1" if i < 5 else "t2"] for i in range(10)}
    fail = run_data({f"c{i}": "F" for i in range(10)}, tags=tags, name="B")
    ok = run_data({f"c{i}": "P" for i in range(10)}, tags=tags, name="H")
    return (ok, fail) if reverse else (fail, ok)


def test_it_gives_the_exact_p_of_ten_flipped_cases_whatever_the_tags_fault_d2():
    base, head = d2_runs()
    h = comparison_compute(base=base, head=head).headline
    assert h.p_value == pytest.approx(2 / 1024, rel=1e-12)
    assert h.p_exact
    assert h.p_text == "0.002"
    assert h.n_cases == 10
    untagged = comparison_compute(
        base=run_data({f"c{i}": "F" for i in range(10)}),
        head=run_data({f"c{i}": "P" for i in range(10)}),
    ).headline
    assert untagged.p_value == h.p_value


def test_it_fails_the_gate_when_the_d2_runs_are_reversed():
    base, head = d2_runs(reverse=True)
    comparison = comparison_compute(base=base, head=head)
    assert comparison.headline.p_value == pytest.approx(2 / 1024, rel=1e-12)
    decision = gate_decide(comparison)
    assert decision.exit_code == 1
    assert "one-sided p < 0.001" in decision.sentence  # the suite test decides: 1/1024
    assert "p = 0.002" in comparison.headline.sentence  # two-sided, fault D2


def test_a_decision_s_exit_code_always_follows_its_verdict():
    base, head = d2_runs(reverse=True)
    decision = gate_decide(comparison_compute(base=base, head=head))
    codes = {
        verdict: dataclasses.replace(decision, verdict=verdict).exit_code
        for verdict in ("pass", "undecided", "block", "cannot decide")
    }
    assert codes == {"pass": 0, "undecided": 0, "block": 1, "cannot decide": 2}


def test_it_calls_the_collapse_of_three_cases_a_significant_regression():
    base = run_data(COLLAPSE_BASE, kind="capability")
    head = run_data(COLLAPSE_HEAD, kind="capability")
    c = comparison_compute(base=base, head=head)
    h = c.headline
    assert (h.base_rate, h.head_rate) == (pytest.approx(53 / 60), pytest.approx(40 / 60))
    assert h.delta == pytest.approx(-13 / 60)
    assert h.significant and h.p_value < 0.05
    assert h.bootstrap_high < 0
    assert h.sentence.startswith(
        "head is 21.7 points lower; this is larger than the pipeline's own randomness, p = "
    )
    assert c.class_counts["broken"] == 3 and c.class_counts["better"] == 2
    assert c.broken_regressions == []  # a capability suite has no broken regressions
    assert gate_decide(c).exit_code == 1


def test_a_block_with_an_in_general_interval_that_includes_0_says_why():
    """Issue 11 point 6: the seed collapse blocks, while the "in general" interval (cases
    as a sample) includes 0; the decision explains the two questions."""
    c = comparison_compute(base=run_data(COLLAPSE_BASE), head=run_data(COLLAPSE_HEAD))
    assert c.headline.clustered.low < 0 < c.headline.clustered.high
    decision = gate_decide(c)
    assert decision.exit_code == 1
    note = [n for n in decision.notes if "in general" in n]
    assert len(note) == 1 and "includes 0 although the gate blocks" in note[0]
    assert "whether these 12 cases got worse" in note[0]


def test_no_interval_note_when_interval_and_decision_agree():
    c = comparison_compute(
        base=run_data({f"c{i}": "PPPPP" for i in range(12)}),
        head=run_data({f"c{i}": "PPPPP" for i in range(12)}),
    )
    assert not [n for n in gate_decide(c).notes if "in general" in n]


def test_it_classifies_every_kind_of_change():
    base = run_data(
        {
            "fx": "FFF",
            "br": "PPP",
            "up": "PFF",
            "dn": "PPF",
            "fl": "PFP",
            "u1": "PPP",
            "u0": "FFF",
            "nv": "EEE",
        }
    )
    head = run_data(
        {
            "fx": "PPP",
            "br": "PPF",
            "up": "PPF",
            "dn": "PFF",
            "fl": "FPP",
            "u1": "PPP",
            "u0": "FFF",
            "nv": "PPP",
        }
    )
    c = comparison_compute(base=base, head=head)
    classes = {row.key: row.change for row in c.cases}
    assert classes == {
        "fx": "fixed",
        "br": "broken",
        "up": "better",
        "dn": "worse",
        "fl": "flaky",
        "u1": "unchanged",
        "u0": "unchanged",
        "nv": "no verdict",
    }
    assert [r.key for r in c.broken_regressions] == ["br"]
    assert c.headline.n_cases == 7
    assert c.class_counts[BROKEN] == 1


def test_it_lists_added_removed_and_changed_cases_and_leaves_them_out():
    base = run_data({"a": "PP", "b": "PP", "gone": "FF"})
    head = run_data({"a": "PF", "b": "PP", "new": "FF"})
    changed = (
        run_data({"b": "PP"})
        .cases[0]
        .__class__(key="a", content_hash="h-a2", tags=(), verdicts=(False, False), trials=2)
    )
    head = head.__class__(**{**head.__dict__, "cases": (changed, *head.cases[1:])})
    c = comparison_compute(base=base, head=head)
    assert [r.key for r in c.added] == ["new"]
    assert [r.key for r in c.removed] == ["gone"]
    assert [(r.key, r.content_hash, r.other_hash) for r in c.changed] == [("a", "h-a2", "h-a")]
    assert [r.key for r in c.cases] == ["b"]
    assert c.headline.n_cases == 1


def test_it_says_when_the_p_value_and_the_interval_disagree():
    # Three cases 0/2 each -> 2/2, 1/2, 1/2: two-sided p = 1/12 (the four passes all in
    # head), while the within-case interval [+2.8, +95.7] points excludes 0.
    c = comparison_compute(
        base=run_data({"a": "FF", "b": "FF", "c": "FF"}),
        head=run_data({"a": "PP", "b": "PF", "c": "PF"}),
    )
    h = c.headline
    assert h.p_value == pytest.approx(1 / 12)
    assert not h.significant and h.bootstrap_low > 0
    assert h.disagreement.endswith("the interval excludes 0")
    # The base passed nothing: no head can do worse, so the gate cannot see a regression.
    decision = gate_decide(c)
    assert decision.exit_code == 2
    assert "the base passed no trial" in decision.sentence


def test_it_compares_only_shared_cases_under_one_judge_version_fault_k1(db):
    v1, v2 = judge_version(1), judge_version(2)
    base = db_run({"c1": "P", "c2": "P", "c3": "P", "c4": "F"}, name="B", version=v1)
    head = db_run({"c1": "P", "c2": "P", "c3": "P", "c4": "F", "c5": "F"}, name="C", version=v2)
    c = comparison_get(base=base, head=head)
    h = c.headline
    assert (h.base_rate, h.head_rate, h.delta, h.n_cases) == (0.75, 0.75, 0.0, 4)
    assert [r.key for r in c.added] == ["c5"]
    assert c.problems == [
        "judge version changed (judge-v1 → judge-v2): the runs are not comparable"
    ]
    decision = gate_decide(c)
    assert decision.exit_code == 2
    assert decision.reasons == c.problems
    # Overridden, the four shared cases are tested, but at one trial a case no head could
    # be blocked: "cannot decide" for that reason, with what would settle it.
    overridden = gate_decide(c, allow_incomparable=True)
    assert overridden.exit_code == 2
    assert "no head could be blocked" in overridden.sentence
    assert "trials per case a side would make a block possible" in overridden.sentence


def test_it_cannot_decide_on_an_errored_judge_grade_fault_a1(db):
    v = judge_version(1)
    base = db_run({"c1": "PPFP"}, name="B", version=v)
    head = db_run({"c1": "PPEF"}, name="R1", version=v)
    c = comparison_get(base=base, head=head)
    assert c.head_counts.grade_errored == 1
    assert c.cases[0].head_passed == 2 and c.cases[0].head_graded == 3
    decision = gate_decide(c)
    assert decision.exit_code == 2
    assert (
        "head has 1 errored trial(s) of 4 (0 pipeline, 1 with an errored gating grade)"
        in decision.reasons[0]
    )
    # Allowed, the one case is tested; at 4 trials even 0/3 against 3/4 stays within noise
    # (one-sided Fisher p = 4/35): cannot decide, never a pass.
    allowed = gate_decide(c, max_errored_fraction=0.25)
    assert allowed.exit_code == 2
    assert "no head could be blocked" in allowed.sentence


def test_it_cannot_decide_on_provisional_judge_grades_unless_allowed(db):
    v = judge_version(1, trusted=False)
    base = db_run({"c1": "PP", "c2": "PP"}, name="B", version=v)
    head = db_run({"c1": "PP", "c2": "PP"}, name="H", version=v)
    c = comparison_get(base=base, head=head)
    assert (c.base_counts.provisional, c.head_counts.provisional) == (4, 4)
    assert gate_decide(c).exit_code == 2
    assert gate_decide(c, allow_untrusted=True).exit_code == 0


def test_it_cannot_decide_without_overlapping_cases():
    c = comparison_compute(base=run_data({"a": "P"}), head=run_data({"b": "P"}))
    assert c.headline is None
    decision = gate_decide(c)
    assert decision.exit_code == 2
    assert "no overlapping cases" in decision.reasons[0]


def test_it_keeps_unknown_cost_unknown(db):
    base = db_run({"c1": "PP"}, name="B", cost="0.002")
    head = db_run({"c1": "PP"}, name="H", cost=None)
    u = comparison_get(base=base, head=head).usage
    assert u.base.cost_usd == Decimal("0.00400000")
    assert u.base.cost_per_trial_usd == Decimal("0.00200000")
    assert u.head.cost_usd is None and u.head.cost_unknown == 2
    assert u.cost_per_trial_usd is None
    assert u.tokens_per_trial == 0.0 and u.latency_mean_ms == 0.0


def test_it_reports_pass_hat_k_deltas_for_every_k():
    c = comparison_compute(
        base=run_data({"a": "PPPP", "b": "PPFF"}), head=run_data({"a": "PPPF", "b": "PPFF"})
    )
    assert [p.k for p in c.pass_hat_k] == [1, 2, 3, 4]
    assert c.pass_hat_k[0].delta == pytest.approx(-0.125)
    assert c.pass_hat_k[3].base == pytest.approx(0.5) and c.pass_hat_k[3].head == 0.0


def test_every_pass_k_delta_has_its_interval_in_the_json_and_the_gate_text():
    c = comparison_compute(
        base=run_data({"a": "PPPP", "b": "PPFF"}), head=run_data({"a": "PPPF", "b": "PPFF"})
    )
    data = c.to_dict()
    h = c.headline
    for rows, key in ((c.pass_hat_k, "pass_hat_k"), (c.pass_at_k, "pass_at_k")):
        for row, out in zip(rows, data[key], strict=True):
            if row.k == 1:  # the headline's quantity: its delta and paired interval
                want = (h.clustered.low, h.clustered.high)
                assert (row.delta, row.delta_method, out["delta_method"]) == (
                    h.delta,
                    "paired",
                    "paired",
                )
            else:
                want = difference_interval(
                    row.base, row.base_low, row.base_high, row.head, row.head_low, row.head_high
                )
                assert (row.delta_method, out["delta_method"]) == ("mover", "mover")
            assert (row.delta_low, row.delta_high) == want
            assert row.delta_low < row.delta < row.delta_high  # never of zero width
            assert (out["delta_low"], out["delta_high"]) == want
    # pass^4: base 0.5 (case a passed all 4), head 0: the interval reaches far below 0.
    assert c.pass_hat_k[3].delta == pytest.approx(-0.5) and c.pass_hat_k[3].delta_low < -0.5
    text = gate_text(c, gate_decide(comparison=c))
    low, high = (f"{v * 100:+.1f}" for v in (c.pass_hat_k[0].delta_low, c.pass_hat_k[0].delta_high))
    assert f"(-12.5 pp [{low}, {high}])" in text


def test_pass_1_has_one_interval_the_headlines_paired_one_when_the_cases_are_shared():
    """pass@1 over the shared cases is the headline's quantity: the same delta and the same
    (paired, clustered) interval, never a second MOVER interval beside it."""
    base = run_data({"a": "PPPF", "b": "PPFF", "c": "PFFF", "d": "PPPP"})
    head = run_data({"a": "PFFF", "b": "PFFF", "c": "PFFF", "d": "PPPF"})
    c = comparison_compute(base=base, head=head)
    h = c.headline
    mover = difference_interval(
        c.pass_at_k[0].base,
        c.pass_at_k[0].base_low,
        c.pass_at_k[0].base_high,
        c.pass_at_k[0].head,
        c.pass_at_k[0].head_low,
        c.pass_at_k[0].head_high,
    )
    for row in (c.pass_at_k[0], c.pass_hat_k[0]):
        assert (row.k, row.delta, row.delta_low, row.delta_high, row.delta_method) == (
            1,
            h.delta,
            h.clustered.low,
            h.clustered.high,
            "paired",
        )
        assert (row.delta_low, row.delta_high) != mover
    assert h.delta == pytest.approx(-0.25)  # (−0.5 − 0.25 + 0 − 0.25) / 4
    assert [r.delta_method for r in c.pass_at_k[1:]] == ["mover"] * 3


def test_pass_1_keeps_the_mover_interval_when_a_case_has_a_verdict_on_one_side_only():
    base = run_data({"a": "PPF", "b": "PFF", "c": "PPP"})
    head = run_data({"a": "PFF", "b": "PFF", "c": "EEE"})  # c: no verdict in head
    c = comparison_compute(base=base, head=head)
    row = c.pass_at_k[0]
    assert row.delta_method == "mover"
    assert (row.delta_low, row.delta_high) == difference_interval(
        row.base, row.base_low, row.base_high, row.head, row.head_low, row.head_high
    )


def test_it_loads_a_run_in_a_constant_number_of_queries(db):
    v = judge_version(1)
    small = db_run({f"c{i}": "PF" for i in range(3)}, name="small", version=v)
    large = db_run({f"c{i}": "PF" for i in range(30)}, name="large", version=v)
    counts = []
    for run in (small, large):
        run.suite  # noqa: B018 - joined, as callers do
        with CaptureQueriesContext(connection) as ctx:
            run_data_get(run=run)
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1] <= 5


def test_it_reads_run_data_back_from_its_dict(db):
    data = run_data_get(run=db_run({"c1": "PFE", "c2": "XPP"}, name="B", version=judge_version(1)))
    assert run_data_from_dict(run_data_to_dict(data)) == data


def test_it_states_the_smallest_detectable_drop():
    c = comparison_compute(base=run_data(COLLAPSE_BASE), head=run_data(COLLAPSE_HEAD))
    d = c.detectable
    assert d.n_cases == 12 and d.trials_per_case == 5
    assert 0.05 < d.drop < 0.5 and d.power >= 0.8
    assert c.to_dict()["detectable"]["drop"] == d.drop


def test_pass_k_rows_name_their_cases_and_k1_is_the_headline_only_over_the_same_cases():
    # 4 cases x 3 attempts, two with an errored attempt: the table's cases are the two with
    # 3 graded trials, so its k = 1 row is not the headline (4 cases) and says so.
    base = run_data({"p1": "PPX", "p2": "PFX", "p3": "PPP", "p4": "FPP"})
    head = run_data({"p1": "PPX", "p2": "PFX", "p3": "PPP", "p4": "FPP"})
    c = comparison_compute(base=base, head=head)
    assert c.headline.n_cases == 4
    first = c.pass_hat_k[0]
    assert (first.base_cases, first.head_cases) == (2, 2)
    assert first.delta_method == "mover"  # not the headline's paired interval
    assert {(r.base_cases, r.head_cases) for r in c.pass_hat_k} == {(2, 2)}
    full = comparison_compute(
        base=run_data({"a": "PPF", "b": "PPP"}), head=run_data({"a": "PFF", "b": "PPP"})
    )
    assert full.pass_at_k[0].delta_method == "paired"
