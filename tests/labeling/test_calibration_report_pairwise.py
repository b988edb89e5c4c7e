"""``calibration_report`` includes pairwise judges (issue 12, point 5): on the imported
shared ``llmbar`` data, its figures equal the data README's.

The README's table ("Judge vs human on this split") gives, per recorded judge, protocol and
presentation order, n with a verdict, agreement and Cohen's kappa; it is read from the
README itself here. The README states no position-consistency figure, so position
consistency and the order-consistent agreement are recounted from the JSONL in plain
Python (as its "My re-count of per-item verdicts" does)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from fractions import Fraction
from io import StringIO

import pytest
from django.core.management import call_command

from interop.importers import results_import
from judges.models import JudgeVersion
from tests.conftest import shared_data_file

pytestmark = pytest.mark.django_db

ROW = re.compile(
    r"^\| (?P<judge>[^|]+) \| llm \| (?P<protocol>[^|]+) \| (?P<position>original|swapped) \| "
    r"(?P<n>\d+)/\d+ \| (?P<agreement>[-0-9.]+) \| (?P<kappa>[-0-9.]+) \|$"
)


def _readme_rows(path) -> dict[tuple[str, str, str], tuple[int, float, float]]:
    rows = {}
    for line in (path.parent / "README.md").read_text(encoding="utf-8").splitlines():
        m = ROW.match(line.strip())
        if m:
            key = (m["judge"].strip(), m["protocol"].strip(), m["position"])
            rows[key] = (int(m["n"]), float(m["agreement"]), float(m["kappa"]))
    return rows


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


def test_calibration_report_json_gives_the_llmbar_readme_figures_for_every_pairwise_judge():
    path = shared_data_file("llmbar")
    readme = _readme_rows(path)
    assert len(readme) == 16  # 8 judge/protocol rows, two orders each
    with path.open("rb") as fh:
        results_import(stream=fh, filename=path.name, suite_name="llmbar", run_name="shared")
    out = StringIO()
    call_command("calibration_report", "--json", stdout=out)
    payload = json.loads(out.getvalue())
    entries = payload["pairwise_judge_versions"]
    versions = {v.id: (v.model, v.protocol) for v in JudgeVersion.objects.all()}
    seen = {versions[e["judge_version_id"]]: e for e in entries}
    assert set(seen) == {(j, p) for j, p, _ in readme}

    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    human = {r["id"]: r["human_label"]["value"] for r in records}
    verdicts: dict[tuple[str, str], dict[str, dict]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        for jl in r["judge_labels"]:
            verdicts[(jl["judge_model"], jl["protocol"])][r["id"]][jl["position"]] = jl["value"]

    for key, entry in seen.items():
        for order in entry["by_position"]:
            n, agreement, kappa = readme[(*key, order["position"])]
            assert order["n"] == n
            assert round(order["agreement"], 4) == agreement
            assert round(order["kappa"]["kappa"], 4) == kappa
        consistent, inconsistent = [], 0
        for rid, pos in verdicts[key].items():
            o, s = pos.get("original"), pos.get("swapped")
            if o is None or s is None:
                continue
            if o == s:
                consistent.append((o, human[rid]))
            else:
                inconsistent += 1
        pc = entry["position_consistency"]
        assert (pc["numerator"], pc["denominator"]) == (
            len(consistent),
            len(consistent) + inconsistent,
        )
        assert pc["ci_low"] < pc["rate"] < pc["ci_high"]
        hits = sum(1 for j, h in consistent if j == h)
        assert (entry["n"], entry["agreement_numerator"]) == (len(consistent), hits)
        assert entry["agreement_rate"]["rate"] == pytest.approx(hits / len(consistent), abs=1e-12)
        assert entry["kappa"]["kappa"] == pytest.approx(_kappa(consistent), abs=1e-12)
        assert entry["trust"]["trusted"] is False

    text = StringIO()
    call_command("calibration_report", stdout=text)
    gpt4 = JudgeVersion.objects.get(model="gpt-4", protocol="LLMBar/Vanilla_NoRules")
    assert f"{gpt4} (pairwise): untrusted" in text.getvalue()
    assert "original order alone: n 301 (errors 0), agreement 0.7575" in text.getvalue()
