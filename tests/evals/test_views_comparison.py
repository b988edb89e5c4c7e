"""The comparison page and the case diff page: permissions per the cast, escaping of hostile
outputs, filtering and sorting the per-case table, the comparability banner (fault K1),
p-values never "0.000" (fault D2), and agreement with ``gate_decide`` and ``manage.py gate``
on the same two runs."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils.html import escape

from core.templatetags.dashboard import percent_interval
from evals.comparison.gate import gate_decide
from evals.comparison.selectors import comparison_get
from evals.comparison.textdiff import word_diff
from evals.models import Case, Grade, Trial
from evals.templatetags.comparison import points, points_interval
from stats.intervals import clopper_pearson_interval
from stats.passk import difference_interval
from tests.comparison_builders import db_run, judge_version

HOSTILE_OUTPUT = "<img src=x onerror=alert(1)>"
HOSTILE_TAG = '"><svg onload=alert(3)>'
HOSTILE_RUN_NAME = "<b onclick=alert(4)>R4</b>"


@pytest.fixture
def two_runs(db):
    """Regression suite, N = 3: c1 broken (PPP -> FFP), c2 fixed (FFF -> PPP), c3 worse
    (PPF -> PFF), c4 unchanged (PPP -> PPP); c1 tagged "hot"."""
    base = db_run({"c1": "PPP", "c2": "FFF", "c3": "PPF", "c4": "PPP"}, name="base")
    head = db_run({"c1": "FFP", "c2": "PPP", "c3": "PFF", "c4": "PPP"}, name="head")
    Case.objects.filter(key="c1").update(tags=["hot"])
    return base, head


def url(base, head, **params) -> str:
    path = reverse("evals:comparison", args=[head.uuid, base.uuid])
    return path + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def case_url(base, head, key: str) -> str:
    case = Case.objects.get(key=key)
    return reverse("evals:comparison-case", args=[head.uuid, base.uuid, case.uuid])


# Permissions -------------------------------------------------------------------------------


def test_it_shows_both_pages_to_every_role_and_refuses_an_outsider(
    client, alice, bob, carol, mallory, two_runs
):
    base, head = two_runs
    pages = [url(base, head), case_url(base, head, "c1")]
    for user, status in ((alice, 200), (bob, 200), (carol, 200), (mallory, 403)):
        client.force_login(user)
        for page in pages:
            assert client.get(page).status_code == status, (user.username, page)


def test_it_sends_anonymous_visitors_to_login(client, two_runs):
    base, head = two_runs
    assert client.get(url(base, head)).status_code == 302


def test_it_refuses_to_compare_runs_of_different_suites(client, bob, two_runs):
    base, _ = two_runs
    other = db_run({"c1": "P"}, name="elsewhere", suite="other")
    client.force_login(bob)
    assert client.get(url(base, other)).status_code == 404


def test_the_picker_redirects_to_the_comparison(client, bob, two_runs):
    base, head = two_runs
    client.force_login(bob)
    pick = reverse("evals:comparison-pick", args=[head.uuid]) + f"?base={base.uuid}"
    response = client.get(pick)
    assert response.status_code == 302 and response["Location"] == url(base, head)


# The page ----------------------------------------------------------------------------------


def test_it_shows_the_counts_headline_and_the_broken_case(client, carol, two_runs):
    base, head = two_runs
    client.force_login(carol)
    response = client.get(url(base, head))
    comp = response.context["comparison"]
    assert comp.class_counts["broken"] == 1 and comp.class_counts["fixed"] == 1
    assert comp.class_counts["worse"] == 1 and comp.class_counts["unchanged"] == 1
    html = response.content.decode()
    sentence = comp.headline.sentence
    assert escape(sentence[0].upper() + sentence[1:]) in html
    # c1 went 3/3 -> 1/3: "broken" as a description; within noise, so it does not block.
    assert "1 broken case" in html
    assert 'data-exit-code="0"' in html


def test_it_filters_by_change_class_and_tag_and_sorts_by_effect(client, bob, two_runs):
    base, head = two_runs
    client.force_login(bob)

    def keys(response) -> list[str]:
        return [r.key for r in response.context["rows_page"].object_list]

    assert keys(client.get(url(base, head, change="broken"))) == ["c1"]
    assert keys(client.get(url(base, head, tag="hot"))) == ["c1"]
    assert keys(client.get(url(base, head, change="fixed", tag="hot"))) == []
    # effect = head − base: c1 −2/3, c3 −1/3, c4 0, c2 +1
    assert keys(client.get(url(base, head, sort="effect"))) == ["c1", "c3", "c4", "c2"]
    assert keys(client.get(url(base, head, sort="-effect"))) == ["c2", "c4", "c3", "c1"]
    # a malformed parameter is a 400 naming it, never a silent fallback
    for params in ({"sort": "bogus"}, {"change": "exploded"}, {"page": "two"}):
        response = client.get(url(base, head, **params))
        assert response.status_code == 400
        assert f"{next(iter(params))}: expected" in response.content.decode()


def test_htmx_gets_only_the_case_table_and_every_filter_link_has_a_real_href(client, bob, two_runs):
    base, head = two_runs
    client.force_login(bob)
    full = client.get(url(base, head)).content.decode()
    link = re.search(r'<a href="([^"]+)" data-change="broken"[^>]*hx-get="([^"]+)"', full)
    assert (
        link
        and link.group(1) == link.group(2).replace("&amp;", "&").replace("&", "&amp;")
        and "change=broken" in link.group(1)
    )
    partial = client.get(
        url(base, head, change="broken"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="case-table"
    ).content.decode()
    assert partial.lstrip().startswith('<div id="case-table" data-change="broken"')
    assert "<html" not in partial and "c1" in partial and ">c2<" not in partial


def test_it_bans_the_judge_change_and_lists_added_cases_apart(client, bob, db):
    """Fault K1: base c1–c4 under judge-v1 (P P P F); head c1–c5 under judge-v2."""
    v1, v2 = judge_version(1), judge_version(2)
    base = db_run(
        {"c1": "P", "c2": "P", "c3": "P", "c4": "F"},
        name="B",
        version=v1,
        graders=[{"key": "judge", "kind": "judge"}],
    )
    head = db_run(
        {"c1": "P", "c2": "P", "c3": "P", "c4": "F", "c5": "F"},
        name="C",
        version=v2,
        graders=[{"key": "judge", "kind": "judge"}],
    )
    client.force_login(bob)
    response = client.get(url(base, head))
    html = response.content.decode()
    assert "Judge version changed (judge-v1 → judge-v2): the runs are not comparable" in html
    comp = response.context["comparison"]
    assert comp.headline.n_cases == 4 and comp.headline.delta == 0
    assert [c.key for c in comp.added] == ["c5"]
    assert re.search(r'class="only-in-head"><li><a [^>]+>c5</a>', html)
    assert 'data-exit-code="2"' in html


def test_a_tiny_p_value_is_never_shown_as_zero(client, bob, db):
    """Fault D2: 10 cases, N = 1, all FAIL -> all PASS: exact p = 2/1024 shows as 0.002."""
    base = db_run({f"c{i}": "F" for i in range(10)}, name="all-fail")
    head = db_run({f"c{i}": "P" for i in range(10)}, name="all-pass")
    client.force_login(bob)
    html = client.get(url(base, head)).content.decode()
    p_cell = re.search(r'<dd id="headline-p">([^<]+)', html).group(1).strip()
    assert p_cell == "0.002"
    assert "p = 0.002" in html
    assert not re.search(r"p = 0\.?0*(?![\d.])", html)  # never "p = 0" or "p = 0.000"


# Agreement with the gate -------------------------------------------------------------------


def test_the_page_and_gate_decide_agree_on_the_same_two_runs(client, bob, two_runs):
    base, head = two_runs
    client.force_login(bob)
    response = client.get(url(base, head))
    decision = gate_decide(comparison_get(base=base, head=head))
    page = response.context["decision"]
    assert (page.exit_code, page.title, page.reasons) == (
        decision.exit_code,
        decision.title,
        decision.reasons,
    )
    assert f'data-exit-code="{decision.exit_code}"' in response.content.decode()


def test_the_page_and_the_gate_command_agree_on_the_same_two_runs(client, bob, two_runs):
    base, head = two_runs
    client.force_login(bob)
    response = client.get(url(base, head))
    html = response.content.decode()
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "gate", "--base", str(base.uuid), "--head", str(head.uuid), "--json", stdout=out
        )
    data = json.loads(out.getvalue())
    headline = response.context["comparison"].headline
    page = response.context["decision"]
    assert exit_info.value.code == data["decision"]["exit_code"] == page.exit_code == 0
    assert (data["decision"]["title"], data["decision"]["reasons"]) == (page.title, page.reasons)
    assert data["comparison"]["headline"]["delta"] == pytest.approx(headline.delta)
    assert data["comparison"]["headline"]["p_text"] == headline.p_text
    assert re.search(r'<dd id="headline-p">([^<]+)', html).group(1).strip() == headline.p_text


# The case diff page ------------------------------------------------------------------------


def test_the_case_page_diffs_outputs_word_by_word_and_escapes_hostile_text(client, bob, two_runs):
    base, head = two_runs
    Trial.objects.filter(run=base, case__key="c1", attempt=1).update(output="the answer is 4")
    Trial.objects.filter(run=head, case__key="c1", attempt=1).update(
        output=f"the answer is {HOSTILE_OUTPUT}"
    )
    head.name = HOSTILE_RUN_NAME
    head.save()
    Case.objects.filter(key="c1").update(tags=[HOSTILE_TAG])
    client.force_login(bob)
    for page in (case_url(base, head, "c1"), url(base, head)):
        html = client.get(page).content.decode()
        assert "<img" not in html and "<svg onload" not in html and "<b onclick" not in html, page
        # the only svg elements are the page's own charts
        assert html.count("<svg") == html.count('<svg xmlns="http://www.w3.org/2000/svg"'), page
        assert "&lt;b onclick=alert(4)&gt;R4&lt;/b&gt;" in html, page
    html = client.get(case_url(base, head, "c1")).content.decode()
    assert '<span class="diff-ins">&lt;img src=x onerror=alert(1)&gt;</span>' in html
    assert '<span class="diff-del">4</span>' in html
    assert '<span class="diff-eq">the answer is </span>' in html
    assert html.count('class="card trial-pair"') == 3


def test_word_diff_keeps_every_character_and_marks_changed_words():
    diff = word_diff("a b  c\nd", "a x  c\nd e")
    assert "".join(t for _, t in diff.base) == "a b  c\nd"
    assert "".join(t for _, t in diff.head) == "a x  c\nd e"
    assert ("delete", "b") in diff.base and ("insert", "x") in diff.head
    assert not diff.truncated


def test_word_diff_cuts_huge_outputs_and_says_so():
    diff = word_diff("word " * 10_000, "word " * 10_001, max_chars=1000)
    assert diff.truncated
    assert len("".join(t for _, t in diff.head)) == 1000


def test_a_regraded_trial_is_seen_at_once_despite_the_comparison_cache(client, bob, two_runs):

    base, head = two_runs
    client.force_login(bob)
    assert client.get(url(base, head)).context["comparison"].class_counts["broken"] == 1
    Grade.objects.filter(trial__run=head, trial__case__key="c4", trial__attempt=1).update(
        passed=False
    )
    assert client.get(url(base, head)).context["comparison"].class_counts["broken"] == 2


def test_the_pass_k_table_shows_each_sides_interval(client, bob, two_runs):
    """pass@k and pass^k on both sides, each with its 95% interval clustered by case."""
    base, head = two_runs
    client.force_login(bob)
    html = client.get(url(base, head)).content.decode()
    table = html[html.index('<table class="table passk">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(r"<tr><td>(\d+)</td>(.*?)</tr>", table, re.S)
    assert [int(k) for k, _ in rows] == [1, 2, 3]
    interval = r'\d+\.\d% <span class="muted">\[\d+\.\d+%, \d+\.\d+%\]</span>'
    delta = (
        r'[+−]?\d+\.\d pts <span class="muted">\[[+−]?\d+\.\d+, [+−]?\d+\.\d+\] pts'
        r"(, paired)?</span>"
    )
    for _, row in rows:
        cells = re.findall(r'<td class="num">(.*?)</td>', row, re.S)
        assert len(cells) == 4
        for cell in cells:
            assert re.fullmatch(interval, cell.strip()), cell
        deltas = re.findall(r'<td class="num passk-delta" data-method="\w+">(.*?)</td>', row, re.S)
        assert len(deltas) == 2
        for cell in deltas:
            assert re.fullmatch(delta, cell.strip()), cell
    # pass^3: 2 of 4 cases passed all three trials on each side (one block of 3 per case).
    low, high = clopper_pearson_interval(2, 4)
    shown = f'50.0% <span class="muted">{percent_interval(low, high)}</span>'
    assert rows[2][1].count(shown) == 2
    # Its head − base: 0 with the MOVER interval of the two equal sides, never [0, 0].
    d_low, d_high = difference_interval(0.5, low, high, 0.5, low, high)
    assert d_low < 0 < d_high
    assert f'0.0 pts <span class="muted">{points_interval(d_low, d_high)}</span>' in rows[2][1]


def test_the_pass_1_difference_shows_the_headlines_paired_interval_and_says_so(
    client, bob, two_runs
):
    """One quantity, one interval: pass@1 (= pass^1) head − base is the headline's delta with
    its paired "in general" interval, marked paired; the help text names the method."""
    base, head = two_runs
    client.force_login(bob)
    response = client.get(url(base, head))
    c = response.context["comparison"]
    h = c.headline
    html = response.content.decode()
    general = f"{points(h.clustered.low)} to {points(h.clustered.high)}"
    assert f"<dd>{general} <span" in html  # the headline's interval "in general"
    table = html[html.index('<table class="table passk">') :]
    first = re.search(r"<tr><td>1</td>(.*?)</tr>", table, re.S).group(1)
    cell = (
        f'<td class="num passk-delta" data-method="paired">{points(h.delta)} '
        f'<span class="muted">{points_interval(h.clustered.low, h.clustered.high)}, '
        "paired</span></td>"
    )
    assert first.count(cell) == 2  # pass@1 and pass^1
    help_text = re.search(r'<p class="muted" id="passk-method">(.*?)</p>', html, re.S).group(1)
    assert help_text.startswith("At k = 1, pass@1 = pass^1 is the headline's quantity")
    assert "clustered by case, t on cases − 1 df; Miller 2024" in help_text
    assert "At k ≥ 2, each difference's interval: MOVER" in help_text
