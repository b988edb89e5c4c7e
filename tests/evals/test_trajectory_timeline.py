"""The trial page's trajectory: rows, folding, totals, escaping (the browser test shows the
same in Chromium: tests/browser/test_browser_trajectory.py)."""

from __future__ import annotations

import pytest
from django.test import Client

from evals.trajectory.timeline import FOLD_CHARS, SHOW_CHARS, size_text, trajectory_timeline
from tests.trajectory_builders import BIG_RESULT, agent_trial


def test_rows_fold_large_content_and_keep_unknown_figures_unknown():
    timeline = trajectory_timeline(
        [
            {"kind": "message", "role": "assistant", "content": "hi", "cost_usd": 0.5},
            {"kind": "tool_call", "name": "f", "arguments": {"a": 1}},
            {"kind": "tool_result", "content": "x" * (FOLD_CHARS + 1), "status": "error"},
            {"kind": "tool_result", "content": "\n".join(["l"] * 31), "status": "ok"},
            {"kind": "tool_result", "content": "y" * (SHOW_CHARS + 5), "latency_ms": 2.0},
        ]
    )
    rows = timeline.steps
    assert [r.folded for r in rows] == [False, False, True, True, True]
    assert rows[1].text == '{\n  "a": 1\n}' and rows[1].label == "f"
    assert rows[2].status == "error" and rows[2].size_bytes == FOLD_CHARS + 1
    assert rows[2].preview == "x" * 240
    assert rows[4].cut_chars == 5 and len(rows[4].text) == SHOW_CHARS
    assert rows[0].has_metrics and not rows[1].has_metrics
    assert timeline.totals.cost_usd == 0.5 and timeline.totals.cost_unknown == 0
    assert timeline.latency_ms == 2.0
    assert trajectory_timeline(None) is None
    assert (size_text(999), size_text(200_027), size_text(3_400_000)) == (
        "999 B",
        "200.0 KB",
        "3.4 MB",
    )


@pytest.mark.django_db
def test_the_trial_page_shows_the_trajectory_escaped_folded_with_figures_and_states(alice):
    trial = agent_trial()
    client = Client()
    client.force_login(alice)
    html = client.get(f"/trials/{trial.uuid}/").content.decode()
    # every step escaped: no markup from the trajectory or the states reaches the page
    for raw in ("<script>alert", "<img src=x", "<svg onload", "<b onclick", "<i>A1</i>"):
        assert raw not in html
    assert "&lt;script&gt;alert(&#x27;tool&#x27;)&lt;/script&gt;" in html
    assert "&lt;i&gt;A1&lt;/i&gt;" in html
    # the 200 KB result is folded with its size, and cut at SHOW_CHARS
    size = size_text(len(BIG_RESULT.encode()))
    assert f'<details class="step-fold"><summary>{size}:' in html
    assert html.count("z" * 1000) >= 1 and "z" * (SHOW_CHARS + 1) not in html
    assert "more characters not shown" in html
    # per-step and total figures; unknown cost stays unknown
    assert "120 in / 18 out · 410 ms · $0.000029" in html
    assert "5120 in / 22 out" in html  # totals
    assert "(+ 1 model call of unknown cost)" in html  # the last reply; tool steps are not calls
    assert "lookup_order</code> → <code>issue_refund</code> → <code>lookup_catalog" in html
    assert "1 failed" in html
    # final state beside the goal state, escaped
    assert 'id="final-state"' in html and 'id="goal-state"' in html
    assert "&lt;script&gt;alert(&#x27;state&#x27;)" in html


@pytest.mark.django_db
def test_a_trial_without_a_trajectory_shows_no_timeline(alice):
    trial = agent_trial()
    trial.trajectory, trial.final_state = None, None
    trial.save()
    trial.case.goal_state = None
    trial.case.save()
    client = Client()
    client.force_login(alice)
    html = client.get(f"/trials/{trial.uuid}/").content.decode()
    assert 'id="trajectory"' not in html and 'id="states"' not in html
