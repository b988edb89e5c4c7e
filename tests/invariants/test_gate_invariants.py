"""The gate's decision against its own evidence, on generated edge inputs: 1–5 cases × 1–3
trials, errored trials, cases missing on a side, a base that passes everything or nothing,
both suite kinds, alpha at its bounds; with and without top-up (rounds driven as
``bench/bench_gate.py`` drives them). Every property runs a bounded, derandomized number of
examples, so the file takes the same few seconds whatever the seed."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from evals.comparison.gate import gate_evaluate, gate_plan
from evals.comparison.pvalue import pvalue_format
from evals.comparison.run_data import CaseData, GraderInfo, RunData
from judges.models import JudgeVersion
from stats.gate import BLOCK, block_attainable, no_top_up, worst_head
from stats.gate import gate_decide as stats_gate_decide
from stats.sequential import CaseLooks
from tests.comparison_builders import db_run, judge_version
from tests.core.test_api_core import client_for

# docs/ci.md, "Exit codes", written once as data: the decision's verdict -> exit code.
EXIT_CODES = {"pass": 0, "undecided": 0, "block": 1, "cannot decide": 2, "cannot decide yet": 2}

BOUNDED = settings(max_examples=200, deadline=None, derandomize=True, database=None)
ALPHAS = st.sampled_from([1e-6, 0.01, 0.05, 0.2, 0.5])
KINDS = st.sampled_from(["regression", "capability"])
GRADERS = (GraderInfo("check", True),)
SUITE_NUMBERS = itertools.count()

P_VALUE = re.compile(r"\bp (?:= |< )(\d\.\d+)")
QUOTED_P = re.compile(
    r"(?P<side>one-sided|two-sided)(?:, Holm-adjusted)? p (?:= |< )[\d.]+ at "
    r"(?P<look>the first look|top-up round \d+)"
)
DROP = re.compile(r"case (\S+) dropped from (\d+)/(\d+) to (\d+)/(\d+)")
SUITE_PHRASE = re.compile(
    r"(?P<what>moved within noise|dropped|within noise|a drop) \(one-sided p (?:= |< )"
    r"(?P<p>[\d.]+) at (?P<look>the first look|top-up round \d+)\)\.?$"
)


def run_from_looks(name: str, kind: str, n: int, looks: dict[str, list[tuple[int, int]]]):
    """A ``RunData`` whose cases have ``(passed, graded)`` per look (as the bench builds)."""
    cases = []
    for key, case_looks in looks.items():
        verdicts: list[bool] = []
        for passed, graded in case_looks:
            verdicts += [True] * passed + [False] * (graded - passed)
        cases.append(
            CaseData(
                key=key,
                content_hash=f"h-{key}",
                tags=(),
                verdicts=tuple(verdicts),
                trials=len(verdicts),
                finished=len(verdicts),
                looks=tuple(case_looks),
            )
        )
    return RunData(
        label=f"S / {name}",
        uuid="",
        name=name,
        suite_name="S",
        suite_kind=kind,
        status="succeeded",
        trials_per_case=n,
        graders=GRADERS,
        cases=tuple(cases),
    )


def run_from_verdicts(name: str, kind: str, n: int, cases: dict[str, str]) -> RunData:
    """A ``RunData`` from verdict strings: P pass, F fail, E errored grade, X pipeline error."""
    rows = tuple(
        CaseData(
            key=key,
            content_hash=f"h-{key}",
            tags=(),
            verdicts=tuple(c == "P" for c in v if c in "PF"),
            trials=len(v),
            finished=len(v),
            pipeline_errored=v.count("X"),
            grade_errored=v.count("E"),
        )
        for key, v in cases.items()
    )
    return RunData(
        label=f"S / {name}",
        uuid="",
        name=name,
        suite_name="S",
        suite_kind=kind,
        status="succeeded",
        trials_per_case=n,
        graders=GRADERS,
        cases=rows,
    )


@st.composite
def edge_comparisons(draw):
    """(base, head, kind, alpha, max_errored_fraction): 1–5 cases × 1–3 trials a side; a
    case may be missing on a side; trials may be errored; the base may pass all or none."""
    n = draw(st.sampled_from([1, 2, 3, 3, 3]))
    n_cases = draw(st.sampled_from([1, 2, 3, 4, 5, 5, 5]))
    base_shape = draw(st.sampled_from(["any", "all pass", "all fail"]))
    head_shape = draw(st.sampled_from(["any", "any", "all fail"]))
    base_letters = {"any": "PPPPFFEX", "all pass": "P", "all fail": "F"}[base_shape]
    head_letters = {"any": "PPPFFFFEX", "all fail": "F"}[head_shape]
    verdict = st.text(alphabet=head_letters, min_size=n, max_size=n)
    base_verdict = st.text(alphabet=base_letters, min_size=n, max_size=n)
    base, head = {}, {}
    for i in range(n_cases):
        side = draw(st.sampled_from(["both"] * 6 + ["base only", "head only"]))
        if side != "head only":
            base[f"c{i}"] = draw(base_verdict)
        if side != "base only":
            head[f"c{i}"] = draw(verdict)
    kind = draw(KINDS)
    return (
        run_from_verdicts("B", kind, n, base),
        run_from_verdicts("H", kind, n, head),
        kind,
        draw(ALPHAS),
        draw(st.sampled_from([0.0, 1.0, 1.0])),
    )


def case_looks(comparison) -> list[CaseLooks]:
    """The gate's input: per case graded on both sides, its counts per look."""
    out = []
    for row in comparison.cases:
        if not (row.base_graded and row.head_graded):
            continue
        n = max(len(row.base_looks), len(row.head_looks))
        base = list(row.base_looks) + [(0, 0)] * (n - len(row.base_looks))
        head = list(row.head_looks) + [(0, 0)] * (n - len(row.head_looks))
        out.append(
            CaseLooks(
                base_passed=tuple(p for p, _ in base),
                base_graded=tuple(g for _, g in base),
                head_passed=tuple(p for p, _ in head),
                head_graded=tuple(g for _, g in head),
            )
        )
    return out


def check_decision(comparison, decision, plan, alpha: float) -> None:
    """Every invariant of one decision (the exit-code table, the sentence against its
    figures, pass only when a block was attainable)."""
    assert decision.exit_code == EXIT_CODES[decision.verdict]
    sentence = decision.sentence
    assert sentence
    # Every quoted p-value names its sidedness and its look.
    assert len(P_VALUE.findall(sentence)) == len(QUOTED_P.findall(sentence)), sentence
    if decision.verdict == "pass":
        assert "would settle" not in sentence and "more trials" not in sentence, sentence
    if decision.verdict == "cannot decide":
        return
    cases = case_looks(comparison)
    decided = stats_gate_decide(cases=cases, plan=plan)
    if decision.verdict == "cannot decide yet":  # undecided, and the first look could not
        assert decided.verdict == "undecided" and len(decided.looks) == 1  # have blocked
        worst = stats_gate_decide(cases=worst_head(cases=cases), plan=plan)
        assert worst.verdict != "block" and decision.next_round
    else:
        assert decided.verdict == decision.verdict
    if decision.verdict == "undecided" and len(decided.looks) == 1:
        # An exit-0 "undecided" first look could itself have blocked the worst head.
        assert stats_gate_decide(cases=worst_head(cases=cases), plan=plan).verdict == "block"
    if decision.verdict == "pass":
        assert block_attainable(cases=cases, plan=plan)
    # A named drop has the counts the comparison holds for that case, and did drop.
    rows = {r.key: r for r in comparison.cases}
    for key, bp, bg, hp, hg in DROP.findall(sentence):
        row = rows[key]
        assert (int(bp), int(bg), int(hp), int(hg)) == (
            row.base_passed,
            row.base_graded,
            row.head_passed,
            row.head_graded,
        ), sentence
        assert int(hp) * int(bg) < int(bp) * int(hg), sentence
    # The suite phrase quotes the last look's suite test, and "within noise" is never
    # beside a p at or below the level it was tested at.
    last = decided.looks[-1]
    match = SUITE_PHRASE.search(sentence)
    if match is None:  # "Blocked: the suite as a whole dropped beyond ... (one-sided p ...)"
        assert decision.verdict == "block" and not decision.drops, sentence
        assert last.suite_rejected
        return
    look = "the first look" if last.look == 0 else f"top-up round {last.look}"
    assert match["look"] == look, sentence
    assert match["p"] in pvalue_format(last.suite.p_value, alpha), sentence
    if "within noise" in match["what"]:
        assert last.suite.p_value > last.suite_level, sentence
    else:
        assert last.suite.p_value <= last.suite_level * (1 + 1e-12), sentence


@BOUNDED
@given(edge_comparisons())
def test_the_gate_without_top_up_never_contradicts_its_figures(comparison_input):
    base, head, kind, alpha, max_errored = comparison_input
    comparison, decision = gate_evaluate(
        head=head, base=base, alpha=alpha, max_errored_fraction=max_errored
    )
    check_decision(comparison, decision, no_top_up(alpha=alpha, suite_kind=kind), alpha)
    wanted = TRIALS_WANTED.search(decision.sentence)
    if wanted:
        check_trials_wanted(comparison, kind, alpha, int(wanted[1]))


TRIALS_WANTED = re.compile(r"about (\d+) trials per case a side would make a block possible")


def check_trials_wanted(comparison, kind: str, alpha: float, trials: int) -> None:
    """ "About N trials per case a side would make a block possible" holds: the same cases
    at N trials, each base at its observed rate and every head trial failing, are blocked
    by the gate itself; at N − 1 (when more than the trials run) they are not."""
    rows = [r for r in comparison.cases if r.base_graded and r.head_graded]
    shown = max(max(r.base_graded, r.head_graded) for r in rows)

    def worst(m: int):
        base = {r.key: [(round(r.base_passed / r.base_graded * m), m)] for r in rows}
        head = {r.key: [(0, m)] for r in rows}
        return gate_evaluate(
            head=run_from_looks("H", kind, m, head),
            base=run_from_looks("B", kind, m, base),
            alpha=alpha,
        )[1]

    assert worst(trials).exit_code == 1
    if trials - 1 > shown:
        assert worst(trials - 1).exit_code == 2


@st.composite
def tiny_designs(draw):
    """Per case (base passed, base graded, head graded): 1–3 cases × 1–3 trials, small
    enough to enumerate every head outcome."""
    n_cases = draw(st.integers(1, 3))
    cases = []
    for _ in range(n_cases):
        nb = draw(st.integers(1, 3))
        cases.append((draw(st.integers(0, nb)), nb, draw(st.integers(1, 3))))
    return cases, draw(KINDS), draw(ALPHAS)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(tiny_designs())
def test_a_block_is_attainable_exactly_when_some_head_outcome_blocks(design):
    cases, kind, alpha = design
    plan = no_top_up(alpha=alpha, suite_kind=kind)
    some_head_blocks = any(
        stats_gate_decide(
            cases=[
                CaseLooks((b,), (nb,), (h,), (nh,))
                for (b, nb, nh), h in zip(cases, heads, strict=True)
            ],
            plan=plan,
        ).verdict
        == BLOCK
        for heads in itertools.product(*(range(nh + 1) for _, _, nh in cases))
    )
    looks = [CaseLooks((b,), (nb,), (0,), (nh,)) for b, nb, nh in cases]
    assert block_attainable(cases=looks, plan=plan) == some_head_blocks


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    n=st.integers(1, 3),
    n_cases=st.integers(1, 5),
    kind=KINDS,
    alpha=ALPHAS,
    data=st.data(),
)
def test_the_gate_with_top_up_never_contradicts_its_figures(n, n_cases, kind, alpha, data):
    plan = gate_plan(alpha=alpha, trials_per_case=n, suite_kind=kind, top_up=True)
    counts = st.integers(0, n)
    base = {f"c{i}": [(data.draw(counts), n)] for i in range(n_cases)}
    head = {f"c{i}": [(data.draw(counts), n)] for i in range(n_cases)}
    for _ in range(len(plan.sizes) + 1):
        comparison, decision = gate_evaluate(
            head=run_from_looks("H", kind, n, head),
            base=run_from_looks("B", kind, n, base),
            alpha=alpha,
            plan=plan,
        )
        check_decision(comparison, decision, plan, alpha)
        if decision.verdict not in ("undecided", "cannot decide yet"):
            break
        assert decision.next_round
        for key, (mb, mh) in decision.next_round.items():
            if mb:
                base[key].append((data.draw(st.integers(0, mb)), mb))
            head[key].append((data.draw(st.integers(0, mh)), mh))
    else:
        pytest.fail("the design asked for more rounds than it has")


@pytest.mark.parametrize("alpha", [1e-6, 0.05, 0.5])
def test_a_collapse_on_three_cases_of_one_trial_is_never_a_pass(alpha):
    base = run_from_verdicts("B", "regression", 1, {"a": "P", "b": "P", "c": "P"})
    head = run_from_verdicts("H", "regression", 1, {"a": "F", "b": "F", "c": "F"})
    _, decision = gate_evaluate(head=head, base=base, alpha=alpha)
    assert decision.verdict != "pass"
    if alpha <= 0.05:
        assert decision.exit_code == 2
        assert "would make a block possible" in decision.sentence


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(comparison_input=edge_comparisons())
@pytest.mark.django_db
def test_the_command_and_the_api_exit_as_the_decision_says(comparison_input, carol, capsys):
    base_data, head_data, kind, alpha, max_errored = comparison_input
    assume(base_data.cases and head_data.cases)  # a stored run has cases
    version = JudgeVersion.objects.filter(number=1).first() or judge_version(1)
    suite = f"S{next(SUITE_NUMBERS)}"  # examples share one transaction: a suite each
    runs = []
    for data, name in ((base_data, "B"), (head_data, "H")):
        cases = {c.key: _verdicts(c) for c in data.cases}
        runs.append(db_run(cases, name=name, suite=suite, kind=kind, version=version))
    base, head = runs
    _, decision = gate_evaluate(head=head, base=base, alpha=alpha, max_errored_fraction=max_errored)
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "gate",
            "--base",
            str(base.uuid),
            "--head",
            str(head.uuid),
            "--json",
            "--alpha",
            repr(alpha),
            "--max-errored-fraction",
            repr(max_errored),
        )
    printed = json.loads(capsys.readouterr().out)
    response = client_for(carol).post(
        "/api/gate",
        {
            "base": str(base.uuid),
            "head": str(head.uuid),
            "alpha": alpha,
            "max_errored_fraction": max_errored,
        },
        format="json",
    )
    assert response.status_code == 200
    answered = response.json()["decision"]
    assert (
        exit_info.value.code
        == printed["decision"]["exit_code"]
        == answered["exit_code"]
        == decision.exit_code
        == EXIT_CODES[decision.verdict]
    )
    assert printed["decision"]["verdict"] == answered["verdict"] == decision.verdict


def _verdicts(case: CaseData) -> str:
    """The verdict string ``db_run`` takes, back from a generated case."""
    graded = "".join("P" if v else "F" for v in case.verdicts)
    return graded + "E" * case.grade_errored + "X" * case.pipeline_errored


def some_head_sequence_blocks(looks: list[tuple[list, list]], plan) -> bool:
    """Brute force over every head outcome at every look a top-up design can take (the
    base's rounds at its look-0 rate, as ``block_attainable`` assumes): whether any
    sequence of head outcomes blocks. ``looks``: per case ([(passed, graded), ...] base,
    [...] head)."""
    decided = stats_gate_decide(
        cases=[
            CaseLooks(
                tuple(p for p, _ in b),
                tuple(g for _, g in b),
                tuple(p for p, _ in h),
                tuple(g for _, g in h),
            )
            for b, h in looks
        ],
        plan=plan,
    )
    if decided.verdict == BLOCK:
        return True
    if decided.verdict != "undecided":
        return False
    due = sorted(decided.next_round.items())
    for outcome in itertools.product(*(range(mh + 1) for _, (_, mh) in due)):
        grown = [(list(b), list(h)) for b, h in looks]
        for (i, (mb, mh)), h in zip(due, outcome, strict=True):
            b0, nb0 = grown[i][0][0]
            grown[i][0].append((round(b0 / nb0 * mb), mb))
            grown[i][1].append((h, mh))
        if some_head_sequence_blocks(grown, plan):
            return True
    return False


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    shape=st.sampled_from([(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1)]),
    kind=KINDS,
    alpha=ALPHAS,
    data=st.data(),
)
def test_a_block_is_attainable_with_top_up_exactly_when_some_head_sequence_blocks(
    shape, kind, alpha, data
):
    n_cases, n = shape
    plan = gate_plan(alpha=alpha, trials_per_case=n, suite_kind=kind, top_up=True)
    base = [data.draw(st.integers(0, n)) for _ in range(n_cases)]
    looks = [([(b, n)], [(0, n)]) for b in base]
    cases = [CaseLooks((b,), (n,), (0,), (n,)) for b in base]
    assert block_attainable(cases=cases, plan=plan) == some_head_sequence_blocks(looks, plan)
