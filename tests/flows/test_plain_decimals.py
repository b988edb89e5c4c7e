"""Decimals print plainly on every surface (issue 13): a zero cost is never ``0E-8``.

A zero read back from a ``numeric(14, 8)`` column, or made by ``quantize``, is
``Decimal("0E-8")``, whose ``str()`` is ``0E-8``. Every page, CSV, JSON answer, file and
command output that shows a cost goes through ``core.decimals``."""

from __future__ import annotations

import io
import json
import re
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.urls import reverse

from core.decimals import decimal_plain
from core.money import usd_text
from core.strict_json import json_safe
from evals.models import Grade, Trial
from interop import exports
from judges.grading import _cost
from providers.pricing import Price
from tests.comparison_builders import judge_version
from tests.core.test_api_core import client_for
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db
# A number in scientific notation standing alone: not the "1E7" inside a random CSRF token or
# a hash (a letter, digit or dot on either side).
EXPONENT = re.compile(r"(?<![\w.])\d+(\.\d+)?E[-+]?\d+(?![\w.])")
GRADERS = [{"key": "exact", "kind": "exact_match", "config": {}, "gating": True}]


def _no_exponent(text: str, where: str) -> None:
    found = EXPONENT.search(text)
    context = "" if found is None else text[max(0, found.start() - 80) : found.end() + 40]
    assert found is None, f"{where}: {context!r}"


@pytest.fixture
def zero_cost_run():
    """Two trials that cost nothing (a free model) and a judge grade whose call cost
    nothing, as the judge rung wrote it before this fix (``"0E-8"``)."""
    run = make_run(cases=[("c1", []), ("c2", [])], graders=GRADERS, suite="Z", name="free")
    for key in ("c1", "c2"):
        add_trial(run, key, 1, grades={"exact": True}, cost="0E-8", tokens=(0, 0), latency=1.0)
    version = judge_version(1, trusted=False)
    trial = Trial.objects.get(run=run, case__key="c1")
    Grade.objects.create(
        trial=trial,
        grader="judge",
        judge_version=version,
        gating=False,
        status="ok",
        passed=True,
        score=1.0,
        reason="fine",
        details={"cost_usd": "0E-8", "input_tokens": 0, "output_tokens": 0},
    )
    return run, version, trial


@pytest.mark.parametrize(
    ("value", "plain", "usd"),
    [
        ("0E-8", "0.00000000", "$0"),
        ("-0E-8", "0.00000000", "$0"),
        ("1.2E+3", "1200", "$1,200.00"),
        ("0.00120000", "0.00120000", "$0.0012"),
        ("0.00001234", "0.00001234", "$0.000012"),
    ],
)
def test_a_decimal_prints_in_positional_notation_with_its_exact_digits(value, plain, usd):
    assert decimal_plain(Decimal(value)) == plain
    assert usd_text(Decimal(value)) == usd  # the one money formatter: core.money
    assert json_safe({"cost": Decimal(value)}) == {"cost": plain}


def test_no_page_shows_a_cost_with_an_exponent(client, zero_cost_run, carol):
    run, version, trial = zero_cost_run
    client.force_login(carol)
    case = trial.case
    pages = {
        "run list": reverse("evals:run-list"),
        "run page": reverse("evals:run-detail", kwargs={"run_id": run.uuid}),
        "run case": reverse("evals:run-case", kwargs={"run_id": run.uuid, "case_id": case.uuid}),
        "trial page": reverse("evals:trial-detail", kwargs={"trial_id": trial.uuid}),
        "judge list": reverse("judges:judge-list"),
        "judge version": reverse("judges:version-detail", kwargs={"version_id": version.uuid}),
    }
    for where, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, where
        _no_exponent(response.content.decode(), where)
    trial_page = client.get(pages["trial page"]).content.decode()
    assert "<dt>Cost</dt><dd>$0</dd>" in trial_page


def test_no_csv_json_file_or_command_output_shows_a_cost_with_an_exponent(
    zero_cost_run, carol, tmp_path
):
    run, _, trial = zero_cost_run
    body = exports.table_csv(exports.run_table(run=run)).decode()
    _no_exponent(body, "run CSV")
    assert ",0.000000000000," in body  # the column's 12 decimals (core.bounds)
    api = client_for(carol)
    for where, url in {
        "run API": f"/api/runs/{run.uuid}/",
        "trials API": f"/api/trials/?run={run.uuid}",
        "trial API": f"/api/trials/{trial.uuid}/",
        "run CSV download": f"/api/runs/{run.uuid}/export?format=csv",
    }.items():
        response = api.get(url)
        assert response.status_code == 200, (where, response.content[:300])
        _no_exponent(response.content.decode(), where)
    # A run file copies each grade's details verbatim; the judge rung now writes a zero
    # cost plainly (test below), so the file holds no exponent.
    Grade.objects.filter(grader="judge").update(
        details={"cost_usd": "0.00000000", "input_tokens": 0, "output_tokens": 0}
    )
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    _no_exponent(path.read_text(), "export_run file")
    data = json.loads(path.read_text())
    assert {t["cost_usd"] for c in data["cases"] for t in c["trials"]} == {"0.000000000000"}
    out = io.StringIO()
    call_command("run_report", str(run.uuid), stdout=out)
    _no_exponent(out.getvalue(), "run_report")
    assert "cost $0" in out.getvalue() and "$0.0" not in out.getvalue()
    out = io.StringIO()
    call_command("run_report", str(run.uuid), "--json", stdout=out)
    _no_exponent(out.getvalue(), "run_report --json")


def test_a_judge_call_that_cost_nothing_is_stored_plainly(zero_cost_run):
    _, version, _ = zero_cost_run
    price = Price(Decimal("0.150000"), Decimal("0.600000"), "built-in", "m1")
    for tokens, usd in (((0, 0), Decimal(0)), ((1000, 10), Decimal("0.000156"))):
        reply = SimpleNamespace(model="m1", input_tokens=tokens[0], output_tokens=tokens[1])
        cost, costing = _cost(reply, version, {"m1": price})
        assert (Decimal(cost), costing.source) == (usd, "built-in")
        assert EXPONENT.search(cost) is None and cost.startswith("0.0")
