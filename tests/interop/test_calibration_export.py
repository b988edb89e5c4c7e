"""The calibration export (issue 6): one row per calibration item with the judge's verdict,
every human label, the adjudication, the reference and agreement; CSV, Parquet, the UI
download, the API and ``export_results --calibration-set``."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pandas as pd
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evals.models import Grade
from interop import exports
from interop.calibration_export import calibration_table
from labeling.adjudication import adjudication_record
from labeling.calibration_sets import calibration_set_build
from labeling.labels import label_submit
from labeling.models import Adjudication, CalibrationSet, Label
from labeling.selectors import calibration_compute
from tests.conftest import PASSWORD
from tests.core.test_api_core import client_for
from tests.labeling_builders import calibration_set, judged_run

SAVED_AT = datetime(2025, 2, 24, 15, 30, tzinfo=UTC)  # 23:30 in UTC+8 (fault M1)
LABEL_COLUMNS = [
    f"label.{who}.{f}"
    for who in ("alice", "bob", "dataset gold")
    for f in ("verdict", "critique", "labeled_at", "guidelines_version", "revised_after_reveal")
]


@pytest.fixture
def cset(db, alice, bob) -> CalibrationSet:
    """Six items c01..c06; the judge fails c01, c02 and passes the rest, c03's grade errored.

    c01 bob fail, alice fail          -> reference fail (agreement), judge fail: agree
    c02 bob pass, alice fail, a lead's adjudication fail -> reference fail, judge fail: agree
    c03 bob pass, alice pass          -> reference pass, judge errored: agree null
    c04 bob fail                      -> reference fail (single), judge pass: disagree
    c05 imported "dataset gold" pass  -> reference pass (single), judge pass: agree
    c06 no label                      -> unlabeled, agree null
    """
    run, version, trials = judged_run(6, judge_fails=2)
    Grade.objects.filter(trial=trials[2]).update(status="error", passed=None, reason="unparseable")
    the_set = calibration_set(run, version, trials)
    for i, verdict in enumerate(["fail", "pass", "pass", "fail"]):
        label_submit(
            trial=trials[i],
            reviewer=bob,
            verdict=verdict,
            critique='too vague, "quoted"\nsecond line' if i == 0 else "",
        )
    for i, verdict in enumerate(["fail", "fail", "pass"]):
        label_submit(trial=trials[i], reviewer=alice, verdict=verdict)
    Label.objects.create(
        trial=trials[4], reviewer_name="dataset gold", verdict="pass", source="import"
    )
    adjudication_record(trial=trials[1], lead=alice, verdict="fail", reason="misses step 2")
    Label.objects.update(updated_at=SAVED_AT)
    return the_set


def _rows(table) -> list[dict]:
    return list(csv.DictReader(io.StringIO(exports.table_csv(table).decode(), newline="")))


def test_it_exports_one_row_per_item_with_judge_labels_reference_and_agreement(cset):
    table = calibration_table(calibration_set=cset, zone=exports.zone_get(name="Asia/Shanghai"))
    names = [name for name, _ in table.columns]
    assert names == [
        "calibration_set",
        "calibration_set_name",
        "position",
        "trial",
        "case_id",
        "attempt",
        "judge_version",
        "judge_status",
        "judge_verdict",
        "judge_reason",
        *LABEL_COLUMNS,
        "adjudicated_verdict",
        "adjudication_reason",
        "reference_verdict",
        "reference_basis",
        "agree",
        "stratum",
        "inclusion_probability",
    ]
    rows = _rows(table)
    assert {(r["stratum"], r["inclusion_probability"]) for r in rows} == {("", "")}  # by hand
    assert [(r["position"], r["case_id"], r["attempt"]) for r in rows] == [
        (str(i), f"c0{i}", "1") for i in range(1, 7)
    ]
    assert {r["calibration_set"] for r in rows} == {str(cset.uuid)}
    assert [(r["judge_status"], r["judge_verdict"]) for r in rows] == [
        ("ok", "fail"),
        ("ok", "fail"),
        ("error", ""),
        ("ok", "pass"),
        ("ok", "pass"),
        ("ok", "pass"),
    ]
    assert rows[2]["judge_reason"] == "unparseable"
    assert rows[0]["judge_reason"].startswith("JUDGE-REASONING-01")
    assert [
        (r["label.bob.verdict"], r["label.alice.verdict"], r["label.dataset gold.verdict"])
        for r in rows
    ] == [
        ("fail", "fail", ""),
        ("pass", "fail", ""),
        ("pass", "pass", ""),
        ("fail", "", ""),
        ("", "", "pass"),
        ("", "", ""),
    ]
    assert rows[0]["label.bob.critique"] == 'too vague, "quoted"\nsecond line'
    assert rows[0]["label.bob.labeled_at"] == "2025-02-24T23:30:00+08:00"
    assert rows[3]["label.alice.labeled_at"] == ""
    assert [(r["adjudicated_verdict"], r["adjudication_reason"]) for r in rows][:3] == [
        ("", ""),
        ("fail", "misses step 2"),
        ("", ""),
    ]
    assert [(r["reference_verdict"], r["reference_basis"], r["agree"]) for r in rows] == [
        ("fail", "agreement", "true"),
        ("fail", "adjudication", "true"),
        ("pass", "agreement", ""),
        ("fail", "single", "false"),
        ("pass", "single", "true"),
        ("", "unlabeled", ""),
    ]


def test_its_agree_column_counts_what_calibration_compute_counts(cset):
    table = calibration_table(calibration_set=cset)
    at = [name for name, _ in table.columns].index("agree")
    agree = [row[at] for row in table.rows]
    cal = calibration_compute(judge_version=cset.judge_version, calibration_set=cset)
    assert (
        (sum(1 for a in agree if a is not None), agree.count(True))
        == (cal.n, cal.agreement_numerator)
        == (4, 3)
    )
    assert cal.n_judge_errors == 1


def test_it_marks_unresolved_items_and_leaves_judge_columns_null_without_a_judge(cset, carol):
    trial = cset.items.get(position=3).trial  # c04: bob fail; alice now says pass

    Adjudication.objects.all().delete()
    label_submit(trial=trial, reviewer=User.objects.get(username="alice"), verdict="pass")
    CalibrationSet.objects.filter(pk=cset.pk).update(judge_version=None)
    cset.refresh_from_db()
    rows = _rows(calibration_table(calibration_set=cset))
    assert [r["reference_basis"] for r in rows] == [
        "agreement",
        "unresolved",
        "agreement",
        "unresolved",
        "single",
        "unlabeled",
    ]
    assert {(r["judge_version"], r["judge_verdict"], r["agree"]) for r in rows} == {("", "", "")}


def test_it_tells_an_imported_name_from_a_reviewer_of_the_same_name(cset):
    gold = User.objects.create_user(username="dataset gold", password=PASSWORD)
    Label.objects.create(
        trial=cset.items.get(position=5).trial,
        reviewer=gold,
        reviewer_name="dataset gold",
        verdict="fail",
    )
    names = [name for name, _ in calibration_table(calibration_set=cset).columns]
    assert "label.dataset gold.verdict" in names
    assert "label.dataset gold (imported).verdict" in names


def test_it_builds_in_six_queries_whatever_the_size(cset):
    with CaptureQueriesContext(connection) as small:
        calibration_table(calibration_set=cset)
    run, version, trials = judged_run(30, suite_name="big", run_name="r2", judge_name="j2")
    big = calibration_set(run, version, trials, name="big")
    for trial in trials:
        Label.objects.create(trial=trial, reviewer_name="gold", verdict="pass")
    with CaptureQueriesContext(connection) as large:
        calibration_table(calibration_set=big)
    assert len(small) == len(large) == 6


def test_it_writes_parquet_with_typed_columns_and_nulls(cset):
    body = exports.table_write(
        table=calibration_table(calibration_set=cset, zone=exports.zone_get(name="Asia/Shanghai")),
        fmt="parquet",
    )
    frame = pd.read_parquet(io.BytesIO(body))
    assert list(frame["position"]) == [1, 2, 3, 4, 5, 6]
    assert [None if pd.isna(a) else bool(a) for a in frame["agree"]] == [
        True,
        True,
        None,
        False,
        True,
        None,
    ]
    stamp = frame["label.bob.labeled_at"][0]
    assert stamp.isoformat() == "2025-02-24T23:30:00+08:00"
    assert pd.isna(frame["judge_verdict"][2])


# --- the UI download --------------------------------------------------------------------------


def _export_url(cset, query: str = "") -> str:
    return reverse("interop:set-export", kwargs={"set_id": cset.uuid}) + query


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 403), ("carol", 200), ("mallory", 403)]
)
def test_leads_and_engineers_download_it_and_reviewers_do_not(
    client, cset, carol, mallory, who, status
):
    assert client.login(username=who, password=PASSWORD)
    response = client.get(_export_url(cset, "?format=csv&tz=Asia/Shanghai"))
    assert response.status_code == status
    if status == 200:
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        assert f'filename="calibration-{cset.uuid}.csv"' in response["Content-Disposition"]
        rows = list(csv.DictReader(io.StringIO(response.content.decode(), newline="")))
        assert rows[0]["label.bob.labeled_at"] == "2025-02-24T23:30:00+08:00"


def test_the_download_refuses_bad_options_with_400(client, cset, carol):
    assert client.login(username="carol", password=PASSWORD)
    for query, word in (
        ("?format=xlsx", "format"),
        ("?tz=Mars/Base", "tz"),
        ("?judge_version=nope", "judge_version"),
    ):
        response = client.get(_export_url(cset, query))
        assert response.status_code == 400 and word in response.content.decode()
    assert (
        client.get(
            _export_url(cset, "?judge_version=00000000-0000-0000-0000-000000000000")
        ).status_code
        == 404
    )


def test_the_set_page_links_the_download_for_engineers_only(client, cset, carol):
    page = reverse("labeling:set-detail", kwargs={"set_id": cset.uuid})
    assert client.login(username="carol", password=PASSWORD)
    assert _export_url(cset, "?format=parquet") in client.get(page).content.decode()
    assert client.login(username="bob", password=PASSWORD)
    assert 'id="calibration-export"' not in client.get(page).content.decode()


# --- the API ------------------------------------------------------------------------------------


def _api_url(cset, query: str = "") -> str:
    return f"/api/calibration-sets/{cset.uuid}/export{query}"


def test_the_api_serves_it_to_leads_and_engineers_only(cset, alice, bob, carol, mallory):
    for user in (alice, carol):
        response = client_for(user).get(_api_url(cset, "?format=parquet"))
        assert response.status_code == 200
        assert response["Content-Type"] == "application/vnd.apache.parquet"
        assert len(pd.read_parquet(io.BytesIO(response.content))) == 6
    for user, status in ((bob, 403), (mallory, 403), (None, 401)):
        assert client_for(user).get(_api_url(cset, "?format=csv")).status_code == status


def test_the_api_names_the_bad_option_and_404s_unknown_ids(cset, carol):
    client = client_for(carol)
    for query, field in (
        ("?format=xlsx", "format"),
        ("?format=json", "format"),
        ("?tz=Mars/Base", "tz"),
        ("?judge_version=1", "judge_version"),
    ):
        response = client.get(_api_url(cset, query))
        assert response.status_code == 400 and field in response.json()
    assert client.get(_api_url(cset)).status_code == 200  # csv by default
    unknown = "00000000-0000-0000-0000-000000000000"
    assert client.get(f"/api/calibration-sets/{unknown}/export").status_code == 404
    assert client.get(_api_url(cset, f"?judge_version={unknown}")).status_code == 404


# --- manage.py export_results --calibration-set ----------------------------------------------


def test_the_command_writes_the_calibration_export(cset, tmp_path):
    out = tmp_path / "cal.parquet"
    stdout = io.StringIO()
    call_command(
        "export_results",
        "--calibration-set",
        str(cset.uuid),
        "--format",
        "parquet",
        "--out",
        str(out),
        "--tz",
        "Asia/Shanghai",
        stdout=stdout,
    )
    assert "(6 rows)" in stdout.getvalue()
    frame = pd.read_parquet(out)
    assert list(frame["case_id"]) == ["c01", "c02", "c03", "c04", "c05", "c06"]


def test_the_command_takes_the_judge_version_by_name_and_refuses_an_unknown_one(cset, tmp_path):
    version = cset.judge_version
    out = tmp_path / "cal.csv"
    stdout = io.StringIO()
    name = f"{version.judge.name}:v{version.number}"
    call_command(
        "export_results", "--calibration-set", str(cset.uuid), "--judge-version", name,
        "--out", str(out), stdout=stdout,
    )  # fmt: skip
    assert "(6 rows)" in stdout.getvalue()
    with pytest.raises(CommandError, match=r"--judge-version: no judge version 'nope:v9'"):
        call_command(
            "export_results", "--calibration-set", str(cset.uuid), "--judge-version", "nope:v9",
            "--out", str(out),
        )  # fmt: skip


def test_the_command_refuses_a_bad_or_unknown_set(cset, tmp_path):
    out = str(tmp_path / "x.csv")
    with pytest.raises(CommandError, match="--calibration-set: expected a UUID"):
        call_command("export_results", "--calibration-set", "nope", "--out", out)
    with pytest.raises(CommandError, match="no calibration set"):
        call_command(
            "export_results",
            "--calibration-set",
            "00000000-0000-0000-0000-000000000000",
            "--out",
            out,
        )
    with pytest.raises(CommandError, match="not both"):
        call_command(
            "export_results", "run", "S/R1", "--calibration-set", str(cset.uuid), "--out", out
        )


def test_a_planned_sets_export_carries_each_items_stratum_and_inclusion_probability(carol):
    run, version, _ = judged_run(40, judge_fails=10)
    planned = calibration_set_build(run=run, judge_version=version, size=12, name="p", by=carol)
    rows = _rows(calibration_table(calibration_set=planned))
    expected = {
        str(i.trial.uuid): (i.stratum, i.inclusion_probability)
        for i in planned.items.select_related("trial")
    }
    assert len(rows) == 12
    for r in rows:
        stratum, prob = expected[r["trial"]]
        assert r["stratum"] == stratum and float(r["inclusion_probability"]) == pytest.approx(prob)
    assert {r["stratum"] for r in rows} == {"judge_fail/none", "judge_pass/none"}
