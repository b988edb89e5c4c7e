"""Every shared data set imports; counts and per-category human pass rates are checked
against figures computed here directly from the file."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from fractions import Fraction

import pytest

from evals.models import Case, Grade, Trial, TrialPair
from evals.selectors import run_list_stats
from interop.importers import results_import
from judges.models import JudgeVersion, PairwiseVerdict
from labeling.models import Label, PreferenceLabel
from tests.conftest import shared_data_file

pytestmark = pytest.mark.django_db

POINTWISE_SETS = ["llmbar_pointwise", "halueval_general", "summedits"]
PAIRWISE_SETS = ["llmbar", "humanpref_pairs"]


def _expected(path):
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    judges = {(j["judge_model"], j["protocol"]) for r in records for j in r["judge_labels"]}
    per_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        per_cat[r["category"]][0] += r["human_label"]["value"] == "pass"
        per_cat[r["category"]][1] += 1
    return {
        "records": records,
        "n": len(records),
        "judge_labels": sum(len(r["judge_labels"]) for r in records),
        "null_judge": sum(j["value"] is None for r in records for j in r["judge_labels"]),
        "judges": len(judges),
        "human": Counter(r["human_label"]["value"] for r in records),
        "pass_rate": {c: Fraction(p, n) for c, (p, n) in per_cat.items()},
    }


def _import(path, name):
    with path.open("rb") as stream:
        return results_import(stream=stream, filename=path.name, suite_name=name, run_name="shared")


@pytest.mark.parametrize("name", POINTWISE_SETS)
def test_it_imports_a_pointwise_shared_set_with_the_files_counts_and_pass_rates(name):
    path = shared_data_file(name)
    want = _expected(path)
    summary = _import(path, name)
    run = summary.runs[0]
    assert (summary.cases, summary.trials, summary.labels) == (want["n"], want["n"], want["n"])
    assert Case.objects.filter(suite=run.suite).count() == want["n"]
    assert Trial.objects.filter(run=run).count() == want["n"]
    assert Grade.objects.filter(trial__run=run).count() == want["n"] + want["judge_labels"]
    assert summary.grades == want["n"] + want["judge_labels"]
    assert JudgeVersion.objects.count() == want["judges"] == summary.judge_versions
    errored = Grade.objects.filter(trial__run=run, judge_version__isnull=False, status="error")
    assert errored.count() == want["null_judge"]
    assert set(errored.values_list("reason", flat=True)) <= {"unparseable"}
    assert (
        Counter(Label.objects.filter(trial__run=run).values_list("verdict", flat=True))
        == want["human"]
    )

    # Per category: the imported labels, grouped by the case's category tag (tags[0]).
    per_cat: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for tags, verdict in Label.objects.filter(trial__run=run).values_list(
        "trial__case__tags", "verdict"
    ):
        per_cat[tags[0]][0] += verdict == "pass"
        per_cat[tags[0]][1] += 1
    assert {c: Fraction(p, n) for c, (p, n) in per_cat.items()} == want["pass_rate"]

    # The run's overall pass rate is the human verdict (recorded judges never gate).
    stats = run_list_stats(run_ids=[run.id])[run.id]
    assert (stats.passed, stats.graded) == (want["human"]["pass"], want["n"])


@pytest.mark.parametrize("name", PAIRWISE_SETS)
def test_it_imports_a_pairwise_shared_set_with_the_files_counts(name):
    path = shared_data_file(name)
    want = _expected(path)
    summary = _import(path, name)
    assert [r.name for r in summary.runs] == ["shared / A", "shared / B"]
    assert summary.cases == Case.objects.count() == want["n"]
    assert summary.trials == Trial.objects.count() == 2 * want["n"]
    assert TrialPair.objects.count() == want["n"]
    assert PairwiseVerdict.objects.count() == want["judge_labels"] == summary.pairwise_verdicts
    assert (
        PairwiseVerdict.objects.filter(status="error", preferred="").count() == want["null_judge"]
    )
    assert JudgeVersion.objects.count() == want["judges"]
    assert Counter(PreferenceLabel.objects.values_list("preferred", flat=True)) == want["human"]
    # Spot-check the original A/B naming: every recorded verdict is stored as written.
    first = want["records"][0]
    pair = TrialPair.objects.get(case__key=first["id"])
    stored = {
        (v.judge_version.model, v.judge_version.protocol, v.position): v.preferred or None
        for v in pair.verdicts.select_related("judge_version")
    }
    assert stored == {
        (j["judge_model"], j["protocol"], j["position"]): j["value"] for j in first["judge_labels"]
    }
    assert pair.trial_a.output == first["responses"][0]["text"]


def test_reimporting_a_shared_set_reuses_cases_and_judge_versions():
    path = shared_data_file("llmbar_pointwise")
    _import(path, "again")
    with path.open("rb") as stream:
        summary = results_import(
            stream=stream, filename=path.name, suite_name="again", run_name="second"
        )
    assert Case.objects.count() == summary.cases == 602
    assert JudgeVersion.objects.count() == 5
    assert Trial.objects.count() == 1204
