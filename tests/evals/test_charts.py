"""The charts package (evals.charts): shared geometry, the forest plot, the trend, the Pareto
chart, and the cost-quality chart's labels."""

from __future__ import annotations

import random
import re
from decimal import Decimal

import numpy as np
import pytest
from django.db import connection
from django.template import Context, Template
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evals.baselines import baseline_set
from evals.charts.forest import LABEL_W, forest_chart
from evals.charts.pareto import ParetoPoint, pareto_chart
from evals.charts.svg import (
    Scale,
    label_beside,
    labels_place,
    nice_step,
    nice_ticks,
    text_fit,
    text_width,
)
from evals.charts.trend import FAILED, IMPORTED, trend_chart
from evals.comparison.cache import comparison_cached_get
from evals.comparison.compute import comparison_compute
from evals.grid.chart import WIDTH as CQ_WIDTH
from evals.models import Run
from evals.suites import suite_page_get
from stats.compare import case_intervals_from_counts, within_case_interval_from_counts
from tests.comparison_builders import db_run, run_data

HOSTILE = '<img src=x onerror="alert(1)">'


# --- svg: scales, ticks, text width, labels ---------------------------------------------


def test_a_scale_maps_its_domain_onto_its_pixels_either_way_and_clamps():
    x = Scale((-1.0, 1.0), (100, 300))
    assert (x(-1), x(0), x(1)) == (100, 200, 300)
    assert x(5) == 300 and x(5, clamp=False) == 700
    y = Scale((0.0, 1.0), (260, 20))  # grows down
    assert (y(0), y(0.25), y(1)) == (260, 200, 20)
    assert Scale((2.0, 2.0), (0, 10))(2) == 5  # an empty domain sits in the middle


def test_ticks_fall_on_nice_steps_without_float_noise():
    assert nice_ticks(0, 1, 5) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0.013, 0.087, 4) == [0.02, 0.04, 0.06, 0.08]
    assert nice_ticks(0, 0.0033, 4) == [0, 0.001, 0.002, 0.003]
    assert nice_ticks(3, 3) == [3]
    assert nice_ticks(1, 0, 2) == [0, 0.5, 1.0]
    with pytest.raises(ValueError):
        nice_step(0, 3)


def test_text_width_grows_with_the_text_and_its_letters():
    assert text_width("") == 0
    assert text_width("iiii") < text_width("aaaa") < text_width("WWWW")
    assert text_width("abc", 22) == 2 * text_width("abc", 11)
    assert text_width("模型") > text_width("ab")


def test_a_label_is_cut_with_an_ellipsis_to_fit_and_kept_whole_when_it_fits():
    assert text_fit("short", 100) == "short"
    cut = text_fit("a much longer case key than the column holds", 80)
    assert cut.endswith("…") and text_width(cut) <= 80
    assert len(cut) > 5  # the longest prefix, not a stub
    assert text_fit("anything", 2) == ""


def test_a_label_near_the_right_edge_flips_to_the_left_of_its_mark():
    right = label_beside(x=100, y=50, text="baseline: r1", bounds=(0, 640))
    assert (right.anchor, right.x) == ("start", 108)
    flipped = label_beside(x=600, y=50, text="baseline: a long run name", bounds=(0, 640))
    assert flipped.anchor == "end" and flipped.x == 592 and flipped.left >= 0
    squeezed = label_beside(x=60, y=50, text="x" * 80, bounds=(0, 120))
    assert squeezed.left >= 0 and squeezed.right <= 120 and squeezed.text.endswith("…")


def test_placed_labels_stay_inside_and_never_overlap():
    rng = random.Random(7)
    for _ in range(60):
        marks = [
            (rng.uniform(40, 600), rng.uniform(20, 330), "run-" + "x" * rng.randrange(1, 30))
            for _ in range(rng.randrange(1, 25))
        ]
        labels = labels_place(marks, bounds=(30, 10, 640, 340))
        placed = [lab for lab in labels if lab is not None]
        assert len(labels) == len(marks) and placed  # the first always finds a spot
        for i, a in enumerate(placed):
            assert a.left >= 30 and a.right <= 640 and 10 <= a.y <= 340
            assert not any(a.overlaps(b, 13) for b in placed[i + 1 :])


# --- the forest plot ------------------------------------------------------------------


def _comparison(n_cases: int = 60, seed: int = 1, **cases):
    rng = random.Random(seed)
    base = {f"c{i:03d}": "".join(rng.choice("PPPF") for _ in range(4)) for i in range(n_cases)}
    head = {
        k: (v if i % 3 else v[::-1].replace("P", "F", i % 4))
        for i, (k, v) in enumerate(base.items())
    }
    for key, (b, h) in cases.items():
        base[key], head[key] = b, h
    return comparison_compute(base=run_data(base), head=run_data(head, name="H"))


def test_the_forest_draws_the_most_changed_cases_sorted_by_effect_and_counts_the_rest():
    comp = _comparison(60, NOVERDICT=("EE", "PP"))
    chart = forest_chart(comp, limit=10)
    graded = [c for c in comp.cases if c.delta is not None]
    changed = [c for c in graded if c.delta != 0]
    assert len(chart.rows) == 10 and len(changed) > 10
    deltas = [r.delta for r in chart.rows]
    assert deltas == sorted(deltas)
    smallest_drawn = min(abs(d) for d in deltas)
    hidden = [c for c in changed if c.key not in {r.key for r in chart.rows}]
    assert all(abs(c.delta) <= smallest_drawn for c in hidden)
    low, high = case_intervals_from_counts(
        *np.array([(c.base_graded, c.base_passed, c.head_graded, c.head_passed) for c in hidden]).T
    )
    beyond = int(((low > 0) | (high < 0)).sum())
    assert (chart.n_more_beyond, chart.n_more_within) == (beyond, len(hidden) - beyond)
    assert chart.n_more_within > 0
    assert chart.n_more_unchanged == len(graded) - len(changed)
    assert chart.n_more == len(hidden) + chart.n_more_unchanged
    assert chart.n_no_verdict == 1
    assert [r.y for r in chart.rows] == sorted(r.y for r in chart.rows)


def test_each_case_interval_is_the_within_case_interval_of_its_trials():
    comp = _comparison(8)
    chart = forest_chart(comp)
    by_key = {c.key: c for c in comp.cases}
    for r in chart.rows:
        c = by_key[r.key]
        low, high = within_case_interval_from_counts(
            np.array([c.base_graded]),
            np.array([c.base_passed]),
            np.array([c.head_graded]),
            np.array([c.head_passed]),
        )
        assert (r.low, r.high) == pytest.approx((low, high))
        assert r.low <= r.delta <= r.high
        assert r.x_low <= r.x <= r.x_high
        assert r.tone == ("worse" if r.high < 0 else "better" if r.low > 0 else "within")


def test_the_forest_summary_is_the_headline_and_the_axis_is_centred_on_zero():
    comp = _comparison(30, broken=("PPPP", "FFFF"))
    chart = forest_chart(comp)
    h = comp.headline
    s = chart.summary
    assert (s.delta, s.low, s.high, s.n_cases) == (
        h.delta,
        h.bootstrap_low,
        h.bootstrap_high,
        h.n_cases,
    )
    assert chart.zero_x == (chart.left + chart.right) / 2
    assert s.x_high - s.x_low >= 4  # a narrow interval still shows a diamond
    assert s.y > max(r.y for r in chart.rows) and chart.height > s.y
    assert [label for _, label in chart.ticks] == ["−100", "−50", "0", "+50", "+100"]
    worst = chart.rows[0]
    assert (worst.key, worst.delta, worst.tone, worst.x) == ("broken", -1.0, "worse", chart.left)


def test_a_long_case_key_is_cut_to_its_column_and_whole_in_its_name():
    key = "a-case-key-far-too-long-for-the-label-column-of-the-chart"
    chart = forest_chart(_comparison(4, **{key: ("PPPP", "FFFF")}))
    row = next(r for r in chart.rows if r.key == key)
    assert row.label.endswith("…") and text_width(row.label) <= LABEL_W - 4
    assert row.text.startswith(key + ": base 4/4, head 0/4, effect −100.0 pts")


def test_nothing_changed_draws_only_the_summary():
    comp = _comparison(0, a=("PF", "PF"), b=("PP", "PP"))
    chart = forest_chart(comp)
    assert chart.rows == [] and chart.summary is not None and chart.n_more_unchanged == 2


def test_the_comparison_page_shows_the_forest_escaped_and_the_forest_makes_no_query(client, carol):
    base = db_run({"c1": "PPP", HOSTILE: "PPP", "c3": "PFP"}, name="base")
    head = db_run({"c1": "PPF", HOSTILE: "FFF", "c3": "PFP"}, name="head")
    client.force_login(carol)
    html = client.get(reverse("evals:comparison", args=[head.uuid, base.uuid])).content.decode()
    assert 'id="forest"' in html and "<img src=x" not in html
    assert html.count('class="mark forest-case') == 2 and 'class="mark forest-summary"' in html
    forest = html.split('id="forest"')[1].split("</section>")[0]
    assert 'tabindex="0"' in forest and 'aria-labelledby="forest-title forest-desc"' in forest
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;: base 3/3, head 0/3" in forest
    assert "1 more case not drawn: 1 unchanged, 0 changed within noise" in forest

    comp = comparison_cached_get(base=base, head=head, alpha=0.05)
    with CaptureQueriesContext(connection) as queries:
        forest_chart(comp)
    assert len(queries) == 0


# --- the trend ------------------------------------------------------------------------


def test_the_trend_marks_baseline_imported_failed_and_breaks_at_an_ungraded_run(carol):
    runs = [db_run({"a": "PP", "b": "PF"}, name=f"r{i}") for i in range(5)]
    Run.objects.filter(id=runs[1].id).update(source=Run.Source.IMPORTED)
    Run.objects.filter(id=runs[2].id).update(status=Run.Status.FAILED)
    empty = db_run({"a": "XX"}, name="nothing graded")  # every trial errored
    db_run({"a": "PP", "b": "PP"}, name="last")
    baseline_set(suite=runs[0].suite, run=runs[3])
    page = suite_page_get(suite=runs[0].suite)
    chart = trend_chart(page.runs, baseline_run_id=page.baseline.run_id)
    names = [m.name for m in chart.marks]
    assert names == ["r0", "r1", "r2", "r3", "r4", "nothing graded", "last"]
    kinds = {m.name: m.kind for m in chart.marks}
    assert (kinds["r1"], kinds["r2"], kinds["r0"]) == (IMPORTED, FAILED, "executed")
    assert [m.name for m in chart.marks if m.is_baseline] == ["r3"]
    assert "the baseline" in chart.marks[3].text and chart.baseline_label.text == "baseline"
    gap = chart.marks[5]
    assert gap.rate is None and gap.y is None and gap.at == chart.bottom - 6
    assert "nothing graded" in gap.text and empty.name == gap.name
    # the line stops before the ungraded run and starts again after it
    assert len(chart.line) == 1 and chart.line[0].count(",") == 5
    xs = [m.x for m in chart.marks]
    assert xs == sorted(xs) and xs[0] >= chart.left and xs[-1] <= chart.right
    for m in chart.marks:
        if m.rate is not None:
            assert m.y_high <= m.y <= m.y_low  # the interval bar spans the rate (y grows down)


def test_the_suite_page_queries_do_not_grow_with_its_runs(client, carol):
    def count() -> int:
        suite = Run.objects.first().suite
        with CaptureQueriesContext(connection) as queries:
            client.get(reverse("evals:suite-detail", args=[suite.uuid]))
        return len(queries)

    client.force_login(carol)
    for i in range(2):
        db_run({"a": "PP", "b": "PF"}, name=f"r{i}")
    few = count()
    for i in range(2, 9):
        db_run({"a": "PP", "b": "FF"}, name=f"r{i}")
    assert count() == few


# --- the Pareto chart -----------------------------------------------------------------


def _points():
    return [
        ParetoPoint("cheap", 0.62, 0.55, 0.69, 0.001, 0.0008, 0.0012, True, False),
        ParetoPoint("balanced", 0.78, 0.72, 0.83, 0.004, 0.0035, 0.0046, True, True),
        ParetoPoint("dominated", 0.70, 0.62, 0.77, 0.006, 0.005, 0.007, False, False),
        ("premium model with a very long name", 0.84, 0.79, 0.88, 0.02, 0.018, 0.023, True, False),
    ]


def test_the_pareto_front_runs_by_cost_through_the_front_points_only():
    chart = pareto_chart(_points())
    assert chart.is_rate and len(chart.marks) == 4
    front = [tuple(map(float, p.split(","))) for p in chart.front.split()]
    assert [x for x, _ in front] == sorted(x for x, _ in front) and len(front) == 3
    by_label = {m.point.label: m for m in chart.marks}
    assert (by_label["dominated"].x, by_label["dominated"].y) not in front
    for m in chart.marks:
        assert m.x_low <= m.x <= m.x_high and m.y_high <= m.y <= m.y_low
        assert chart.left <= m.x_low and m.x_high <= chart.right
    assert by_label["premium model with a very long name"].x_high < chart.right
    assert "in the best set" in by_label["balanced"].text
    assert by_label["balanced"].cost_text == "$0.0040 [$0.0035, $0.0046]"
    assert by_label["balanced"].quality_text == "78.0% [72.0%, 83.0%]"


def test_pareto_labels_fit_the_drawing_and_do_not_overlap():
    crowd = [
        ParetoPoint(
            f"config {i} " + "x" * (i % 7),
            0.5 + i / 100,
            0.45 + i / 100,
            0.55 + i / 100,
            0.01 + i / 10_000,
            0.01 + i / 10_000,
            0.0102 + i / 10_000,
            i % 3 == 0,
            i == 3,
        )
        for i in range(15)
    ]
    chart = pareto_chart(crowd)
    placed = [m.label for m in chart.marks if m.label is not None]
    assert placed and chart.marks[3].label is not None  # the best set is placed first
    for i, a in enumerate(placed):
        assert chart.left <= a.left and a.right <= chart.width
        assert not any(a.overlaps(b, 13) for b in placed[i + 1 :])
        assert not any(a.hits((m.x - 6, m.y - 6, m.x + 6, m.y + 6)) for m in chart.marks)


def test_a_quality_score_beyond_one_gets_its_own_axis():
    chart = pareto_chart(
        [("a", 3.2, 2.9, 3.5, Decimal("0.01"), Decimal("0.01"), Decimal("0.02"), True, True)]
    )
    assert not chart.is_rate
    assert all(not label.endswith("%") for _, label in chart.y_ticks)
    m = chart.marks[0]
    assert chart.top <= m.y_high <= m.y <= m.y_low <= chart.bottom


@pytest.mark.parametrize(
    "bad",
    [
        ("a", 0.9, 0.5, 0.8, 0.1, 0.1, 0.1, True, True),  # quality above its interval
        ("a", 0.5, 0.4, 0.6, 0.1, 0.2, 0.3, True, True),  # cost below its interval
        ("a", float("nan"), 0.4, 0.6, 0.1, 0.1, 0.1, True, True),
        ("a", 0.5, 0.4, 0.6, -0.1, -0.2, 0.1, True, True),
    ],
)
def test_a_malformed_pareto_point_is_refused(bad):
    with pytest.raises(ValueError):
        pareto_chart([bad])


def test_the_pareto_tag_draws_escaped_focusable_points_and_their_numbers():
    points = [*_points(), ParetoPoint(HOSTILE, 0.5, 0.4, 0.6, 0.01, 0.01, 0.01, False, False)]
    html = Template("{% load charts %}{% pareto_chart points chart_id='exp-1' %}").render(
        Context({"points": points})
    )
    assert "<img src=x" not in html and "&lt;img src=x" in html
    assert html.count('class="mark pareto-point') == 5 and html.count('tabindex="0"') == 5
    assert 'aria-labelledby="exp-1-title exp-1-desc"' in html and 'id="exp-1-title"' in html
    assert 'class="front"' in html
    table = html.split('id="exp-1-numbers"')[1]
    assert "78.0% [72.0%, 83.0%]" in table and "$0.0040 [$0.0035, $0.0046]" in table
    empty = Template("{% load charts %}{% pareto_chart points %}").render(Context({"points": []}))
    assert "<svg" not in empty and "No point to draw." in empty


# --- the cost-quality chart's labels --------------------------------------------------

_TEXT = re.compile(r'<text x="([\d.]+)" y="[\d.-]+"(?: text-anchor="(\w+)")?[^>]*>([^<]*)</text>')


def test_cost_quality_labels_stay_inside_the_drawing_at_the_right_edge(client, carol):
    """The most expensive run sits near the right edge; its label used to run past it
    ("baseline: bas")."""
    cheap = db_run({"a": "PP"}, name="cheap run", cost="0.001")
    dear = db_run({"a": "PF"}, name="baseline run, long name", cost="0.004")
    db_run({"a": "PP"}, name="another long run name near the edge", cost="0.0039")
    baseline_set(suite=dear.suite, run=dear)
    client.force_login(carol)
    svg = client.get(reverse("evals:suite-cost-quality-chart", args=[cheap.suite.uuid]))
    text = svg.content.decode()
    runs = text.split('<g class="run')[1:]
    assert len(runs) == 3
    for g in runs:
        x, anchor, label = _TEXT.search(g).groups()
        label = label.replace("&amp;", "&")
        width = text_width(label, 11) * (1.1 if "baseline" in label else 1.0)
        left, right = (
            (float(x), float(x) + width)
            if anchor in (None, "start")
            else (
                float(x) - width,
                float(x),
            )
        )
        assert left >= 0 and right <= CQ_WIDTH, (label, left, right)
    assert "baseline: baseline run, long name" in text


def test_a_comparison_with_nothing_graded_on_both_sides_draws_no_svg():
    comp = comparison_compute(base=run_data({"a": "EE"}), head=run_data({"a": "PP"}, name="H"))
    chart = forest_chart(comp)
    assert (chart.rows, chart.summary, chart.n_no_verdict) == ([], None, 1)
    html = render_to_string("evals/fragments/forest_chart.html", {"chart": chart})
    assert "<svg" not in html and "1 case with nothing graded on a side" in html


def test_a_lone_run_sits_mid_axis_and_a_newest_baseline_keeps_its_label_inside(carol):
    run = db_run({"a": "PP", "b": "PF"}, name="only")
    baseline_set(suite=run.suite, run=run)
    page = suite_page_get(suite=run.suite)
    chart = trend_chart(page.runs, baseline_run_id=run.id)
    (mark,) = chart.marks
    assert mark.x == pytest.approx((chart.left + 8 + chart.right - 8) / 2, abs=0.1)
    assert chart.line == []  # one point: nothing to join
    for i in range(3):
        db_run({"a": "PP", "b": "PP"}, name=f"later {i}")
    newest = Run.objects.get(name="later 2")
    baseline_set(suite=run.suite, run=newest)
    page = suite_page_get(suite=run.suite)
    chart = trend_chart(page.runs, baseline_run_id=newest.id)
    label = chart.baseline_label
    assert chart.marks[-1].is_baseline and chart.left <= label.left and label.right <= chart.right
