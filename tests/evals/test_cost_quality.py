"""Cost against quality (evals.report.cost_quality): null-aware, on the run report, the run
list, the comparison and the run_report command."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command
from django.urls import reverse

from evals.comparison.selectors import comparison_get
from evals.report.cost_quality import cost_quality
from evals.report.costs import NO_BASIS
from evals.report.selectors import run_report
from evals.selectors import run_list_stats
from tests.comparison_builders import db_run
from tests.page_text import shows_word


def test_it_divides_the_pass_rate_and_its_interval_by_the_cost_per_trial():
    q = cost_quality(
        finished=10,
        cost_known_usd=Decimal("0.02"),
        cost_unknown=0,
        passed=8,
        pass_rate=0.8,
        pass_rate_low=0.5,
        pass_rate_high=0.95,
    )
    assert q.cost_per_trial_usd == Decimal("0.002")
    assert q.cost_per_passing_trial_usd == Decimal("0.0025")
    assert q.pass_rate_per_usd == pytest.approx(400.0)
    assert (q.pass_rate_per_usd_low, q.pass_rate_per_usd_high) == pytest.approx((250.0, 475.0))
    assert q.note == ""


def test_an_unknown_cost_is_null_not_zero_and_says_how_many():
    q = cost_quality(
        finished=10,
        cost_known_usd=Decimal("0.02"),
        cost_unknown=3,
        passed=8,
        pass_rate=0.8,
        pass_rate_low=0.5,
        pass_rate_high=0.95,
    )
    assert q.cost_usd is None and q.cost_per_trial_usd is None
    assert q.cost_per_passing_trial_usd is None and q.pass_rate_per_usd is None
    assert q.cost_known_usd == Decimal("0.02")
    assert q.note == "cost unknown for 3 of 10 trials"


def test_a_free_run_has_no_finite_rate_per_dollar():
    q = cost_quality(
        finished=4,
        cost_known_usd=Decimal(0),
        cost_unknown=0,
        passed=2,
        pass_rate=0.5,
        pass_rate_low=0.1,
        pass_rate_high=0.9,
    )
    assert q.cost_per_passing_trial_usd == Decimal(0)
    assert q.pass_rate_per_usd is None and "$0" in q.note


def test_a_tiny_cost_per_passing_trial_does_not_round_to_zero():
    q = cost_quality(
        finished=3,
        cost_known_usd=Decimal("0.00000003"),
        cost_unknown=0,
        passed=3,
        pass_rate=1.0,
        pass_rate_low=0.4,
        pass_rate_high=1.0,
    )
    assert q.cost_per_passing_trial_usd == Decimal("0.00000001")


@pytest.mark.django_db
def test_the_report_the_run_list_and_the_comparison_agree(client, carol):
    base = db_run({"a": "PPF", "b": "PPP"}, name="base", cost="0.0000017")
    head = db_run({"a": "PPP", "b": "PPP"}, name="head", cost=None)
    report = run_report(run=base)
    q = report.cost_quality
    assert q.cost_per_passing_trial_usd == Decimal("0.00000204")  # 6 x 1.7e-6 / 5
    listed = run_list_stats(runs=[base, head])
    assert listed[base.id].quality.pass_rate_per_usd == pytest.approx(q.pass_rate_per_usd)
    assert listed[head.id].quality.note == f"cost unknown for 6 of 6 trials: {NO_BASIS}"
    u = comparison_get(base=base, head=head).usage
    assert u.base.quality.cost_per_passing_trial_usd == q.cost_per_passing_trial_usd
    assert u.head.quality.pass_rate_per_usd is None

    client.force_login(carol)
    page = client.get(reverse("evals:run-detail", args=[base.uuid])).content.decode()
    assert "$0.0000020" in page and "$0.0000" + "<" not in page
    assert 'id="pass-rate-per-usd"' in page
    runs = client.get(reverse("evals:run-list")).content.decode()
    assert "$0.0000020 per passing trial" in runs
    assert "cost unknown for 6 of 6 trials" in runs
    cmp_page = client.get(
        reverse("evals:comparison", kwargs={"head_id": head.uuid, "base_id": base.uuid})
    ).content.decode()
    assert "pass rate per dollar" in cmp_page and "$0.0000020" in cmp_page


@pytest.mark.django_db
def test_the_run_report_command_prints_cost_against_quality(capsys):
    run = db_run({"a": "PPF"}, name="r", cost="0.0000017")
    call_command("run_report", str(run.uuid))
    out = capsys.readouterr().out
    assert "cost $0.0000051" in out
    assert "cost per passing trial $0.0000026" in out
    assert "pass rate per dollar" in out and "$0.0000 " not in out


@pytest.mark.django_db
def test_an_unknown_cost_reads_unknown_on_every_surface_never_undefined(client, carol, capsys):
    """A run whose costs are unknown: its pass rate per $ is null, shown as "unknown" with
    why (run page, run list, comparison, run_report), never "undefined", NaN or 0."""
    base = db_run({"a": "PPF", "b": "PPP"}, name="base", cost="0.0000017")
    head = db_run({"a": "PPP", "b": "PPP"}, name="head", cost=None)
    why = "cost unknown for 6 of 6 trials"
    # The run's own figures say why too (evals.report.costs): these trials carry no basis.
    why_run = f"{why}: {NO_BASIS}"
    client.force_login(carol)
    page = client.get(reverse("evals:run-detail", args=[head.uuid])).content.decode()
    assert f'id="pass-rate-per-usd">unknown <span class="muted">({why_run})</span></dd>' in page
    runs = client.get(reverse("evals:run-list")).content.decode()
    assert "pass rate per $: unknown</div>" in runs
    cmp_page = client.get(
        reverse("evals:comparison", kwargs={"head_id": head.uuid, "base_id": base.uuid})
    ).content.decode()
    assert f'<td class="num">unknown <span class="muted">({why})</span></td>' in cmp_page
    for html in (page, runs, cmp_page):
        assert "undefined" not in html.lower().split("pass rate per")[1][:400]
        assert not shows_word(html, "NaN")
    call_command("run_report", str(head.uuid))
    out = capsys.readouterr().out
    assert f"pass rate per dollar unknown ({why_run})" in out
