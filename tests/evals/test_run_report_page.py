"""The run page renders the report: errors at the top, figures, escaped untrusted text."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from core.templatetags.dashboard import key_ks, number_interval, percent_interval
from evals.report.figures import PassK
from stats.intervals import clopper_pearson_interval
from tests.report_builders import ERR, add_trial, make_run, mixed_run

pytestmark = pytest.mark.django_db


def _page(client, user, run) -> str:
    client.force_login(user)
    response = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid}))
    assert response.status_code == 200
    return response.content.decode()


def test_it_shows_errors_at_the_top_and_the_figures(client, carol):
    run = mixed_run()
    html = _page(client, carol, run)
    assert html.index("1 of 6 trials errored") < html.index("Pass rate")
    assert "incomplete: 2 grade errors" in html
    assert "50.0%" in html
    assert "1 of 1 failures" in html and "missing keys: [&#x27;policy_id&#x27;]" in html
    assert "≥ $0.10" in html and "cost unknown for 2 of 6 trials" in html
    assert "p50" in html and "300 ms / 480 ms" in html
    case = run.suite.cases.get(key="c1")
    assert reverse("evals:run-case", kwargs={"run_id": run.uuid, "case_id": case.uuid}) in html
    assert "simulated</span>" not in html


def test_it_badges_a_simulated_run(client, bob):
    run = make_run(
        cases=[("c1", [])], graders=[{"key": "a", "kind": "exact"}], target_kind="simulated"
    )
    add_trial(run, "c1", 1, grades={"a": ERR})
    html = _page(client, bob, run)
    assert "simulated</span>" in html
    assert "undefined (nothing graded)" in html


def test_it_escapes_untrusted_text(client, carol):
    run = make_run(
        cases=[("<img src=x onerror=alert(1)>", ['"><svg onload=alert(3)>'])],
        graders=[{"key": "a", "kind": "exact"}],
        name="<b onclick=alert(4)>R4</b>",
    )
    add_trial(
        run,
        "<img src=x onerror=alert(1)>",
        1,
        grades={"a": (False, 0.0, "<script>alert(2)</script>")},
    )
    html = _page(client, carol, run)
    for raw in ("<img src=x", "<svg", "<script>alert", "<b onclick"):
        assert raw not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_it_refuses_an_outsider(client, mallory):
    run = mixed_run()
    client.force_login(mallory)
    response = client.get(reverse("evals:run-detail", kwargs={"run_id": run.uuid}))
    assert response.status_code == 403


def test_it_says_unknown_tokens_rather_than_zero(client, bob):
    run = make_run(cases=[("c1", []), ("c2", [])], graders=[{"key": "a", "kind": "exact"}])
    add_trial(run, "c1", 1, grades={"a": True})
    add_trial(run, "c2", 1, grades={"a": True})
    html = _page(client, bob, run)
    assert "<dt>Input tokens</dt><dd>unknown</dd>" in html
    assert "<dt>Output tokens</dt><dd>unknown</dd>" in html
    run2 = make_run(
        cases=[("c1", []), ("c2", [])],
        graders=[{"key": "a", "kind": "exact"}],
        name="r2",
        suite="S2",
    )
    add_trial(run2, "c1", 1, grades={"a": True}, tokens=(120, 30))
    add_trial(run2, "c2", 1, grades={"a": True})
    html = _page(client, bob, run2)
    assert '≥ 120 <span class="muted">(unknown for 1 of 2 trials)</span>' in html


def test_a_long_pass_k_table_shows_the_key_ks_only():

    rows = [PassK(k, 0.5, 0.5, 3, 0) for k in range(1, 51)]
    assert [r.k for r in key_ks(rows)] == [1, 2, 3, 5, 10, 20, 30, 40, 50]
    assert [r["k"] for r in key_ks([{"k": k} for k in range(1, 24)])] == [1, 2, 3, 5, 10, 20, 23]
    assert [r.k for r in key_ks(rows[:10])] == list(range(1, 11))


@pytest.mark.parametrize(
    "low, high, text",
    [
        (0.043312, 0.480891, "[4.3%, 48.1%]"),
        (0.99963, 1.0, "[99.96%, 100.00%]"),  # 10,000 of 10,000 trials passed
        (0.0, 0.0000184, "[0.000%, 0.002%]"),
        (None, 0.5, "undefined"),
    ],
)
def test_an_interval_never_prints_two_equal_bounds(low, high, text):
    assert percent_interval(low, high) == text


def test_every_shown_pass_k_has_its_interval(client, carol):
    """The pass@k / pass^k table: each cell a rate and its 95% interval, including the cells
    where every case passed all k (never a zero-width interval)."""
    run = make_run(
        cases=[(f"c{i}", []) for i in range(4)], graders=[{"key": "a", "kind": "exact"}], n=3
    )
    outcomes = {"c0": (1, 1, 1), "c1": (1, 0, 1), "c2": (0, 0, 1), "c3": (1, 1, 1)}
    for key, verdicts in outcomes.items():
        for attempt, verdict in enumerate(verdicts, start=1):
            add_trial(run, key, attempt, grades={"a": bool(verdict)})
    html = _page(client, carol, run)
    table = html[html.index("<h2>pass@k and pass^k</h2>") :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr><td class=\"num\">(\d+)</td>(.*?)</tr>", table, re.S)
    assert [int(k) for k, _ in rows] == [1, 2, 3]
    for _, row in rows:
        cells = re.findall(r'<td class="num">(.*?)</td>', row, re.S)
        for cell in cells[:2]:  # pass@k, pass^k
            match = re.fullmatch(
                r'(\d+\.\d)% <span class="muted">\[(\d+\.\d+)%, (\d+\.\d+)%\]</span>',
                cell.strip(),
            )
            assert match, cell
            point, low, high = (float(g) for g in match.groups())
            assert low <= point <= high and low < high
    # pass^3: 2 of 4 cases passed all 3 trials: one block each, Clopper–Pearson of 2 of 4.
    low, high = clopper_pearson_interval(2, 4)
    assert f'50.0% <span class="muted">{percent_interval(low, high)}</span>' in table


def test_the_mean_score_shows_its_interval_or_says_no_spread_was_seen(client, carol):
    run = make_run(
        cases=[(f"c{i}", []) for i in range(3)],
        graders=[{"key": "s", "kind": "numeric"}, {"key": "flat", "kind": "numeric"}],
    )
    for key, score in [("c0", 0.5), ("c1", 0.75), ("c2", 1.0)]:
        add_trial(run, key, 1, grades={"s": (True, score, "ok"), "flat": (True, 0.5, "ok")})
    html = _page(client, carol, run)
    # 0.75 ± t(2) · 0.25 / sqrt(3) = 0.75 ± 0.621
    assert '0.750 <span class="muted">[0.129, 1.371]</span>' in html
    assert '0.500 <span class="muted">(no spread seen in 3 cases)</span>' in html


def test_a_score_interval_never_prints_two_equal_bounds():
    assert number_interval(0.12901, 1.37099) == "[0.129, 1.371]"
    assert number_interval(0.7499999, 0.7500001) == "[0.7499999, 0.7500001]"
    assert number_interval(None, 1.0) == "undefined"
