"""Browser test of the SVG charts (evals.charts): the comparison page's forest plot and the
suite page's trend render under the CSP in real Chromium, Tab reaches their marks one by one,
each mark's accessible name is announced, and the text equivalent beside each chart holds the
same numbers. Same Chromium rule as tests/browser/test_browser.py."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.baselines import baseline_set
from evals.models import Run
from tests.browser.conftest import log_in
from tests.comparison_builders import db_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

FOCUSED = "document.activeElement.getAttribute('class') || ''"
FOCUSED_NAME = "document.activeElement.getAttribute('aria-label')"


def _runs():
    base = db_run(
        {"keep": "PPPP", "drop": "PPPP", "dip": "PPPF", "gain": "FFFP", "same": "PFPF"},
        name="base",
    )
    imported = db_run({"keep": "PPPP", "drop": "PPPF", "dip": "PPPP"}, name="imported one")
    Run.objects.filter(id=imported.id).update(source=Run.Source.IMPORTED)
    head = db_run(
        {"keep": "PPPP", "drop": "FFFF", "dip": "PPFF", "gain": "PPPP", "same": "FPFP"},
        name="<b>head</b>",
    )
    baseline_set(suite=base.suite, run=base)
    return base, head


def test_the_forest_plot_is_reached_by_tab_and_says_what_its_table_says(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    carol,
):
    page = browser_page
    base, head = _runs()
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}{reverse('evals:comparison', args=[head.uuid, base.uuid])}")
    svg = page.locator("#forest svg[role=img]")
    assert svg.is_visible() and svg.get_attribute("aria-labelledby") == "forest-title forest-desc"
    marks = page.locator("#forest g.forest-case")
    assert marks.count() == 3  # drop, dip, gain; keep and same are unchanged
    assert [m.get_attribute("data-key") for m in marks.all()] == ["drop", "dip", "gain"]

    page.click("#forest-desc")  # the sequential focus starting point: just before the chart
    names = []
    for _ in range(4):
        page.keyboard.press("Tab")
        assert "mark" in page.evaluate(FOCUSED)
        names.append(page.evaluate(FOCUSED_NAME))
    assert names[0].startswith("drop: base 4/4, head 0/4, effect −100.0 pts, interval")
    assert names[3].startswith("All 5 shared cases: effect")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate(FOCUSED_NAME) == names[2]
    # A focused mark shows a focus ring (CSS from static/, allowed by the CSP).
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "solid"

    page.click("#forest-numbers summary")
    rows = page.locator("#forest-numbers tbody tr")
    assert rows.count() == 4
    for i, name in enumerate(names):
        cells = rows.nth(i).locator("td").all_inner_texts()
        if i < 3:
            key, b, h, effect, interval = cells
            assert name == f"{key}: base {b}, head {h}, effect {effect}, interval {interval}"
        else:
            assert name == f"All 5 shared cases: effect {cells[3]}, interval {cells[4]}"
    # The accessible name reaches the accessibility tree (what a screen reader announces).
    assert page.get_by_role("img", name=names[0]).count() == 1
    assert page.console_errors == [] and page.dialogs == []


def test_the_trend_is_reached_by_tab_and_says_what_the_runs_table_says(
    browser_page,  # noqa: F811 - pytest fixture
    live_server,
    carol,
):
    page = browser_page
    base, head = _runs()
    log_in(page, live_server, "carol")
    page.goto(f"{live_server.url}{reverse('evals:suite-detail', args=[base.suite.uuid])}")
    assert page.locator("figure.trend-chart svg[role=img]").is_visible()
    assert page.locator("g.trend-run").count() == 3
    assert page.locator("g.trend-run.baseline").count() == 1
    assert page.locator("g.trend-run.imported").count() == 1
    assert page.locator("figure.trend-chart b").count() == 0  # the run name stays text

    page.click("#trend-desc")
    names = []
    for _ in range(3):
        page.keyboard.press("Tab")
        assert "trend-run" in page.evaluate(FOCUSED)
        names.append(page.evaluate(FOCUSED_NAME))
    assert names[0].startswith("base (") and "the baseline" in names[0]
    assert names[1].startswith("imported one (") and ", imported" in names[1]
    assert names[2].startswith("<b>head</b> (")
    table = {}
    for row in page.locator("table.runs-history tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        table[row.locator("td a").first.inner_text()] = cells[3]
    for name, run in zip(names, ("base", "imported one", "<b>head</b>"), strict=True):
        assert name.endswith(f": pass rate {table[run]}"), (name, table[run])
    assert page.get_by_role("img", name=names[2]).count() == 1
    assert page.console_errors == [] and page.dialogs == []
