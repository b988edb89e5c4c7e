"""The labeling API (issue 6): calibration sets with their figures, labels with the UI's
visibility rules, and submitting a label. Per role: alice lead, bob reviewer, carol engineer,
mallory outsider, no token."""

from __future__ import annotations

import json

import pytest
from statsmodels.stats.proportion import proportion_confint

from labeling.labels import label_submit
from labeling.models import CalibrationSet, Label, LabelRevision
from tests.core.test_api_core import client_for
from tests.labeling_builders import JUDGE_REASON, calibration_set, judged_run

UNKNOWN = "00000000-0000-0000-0000-000000000000"


def strict(response) -> dict:
    """The response body parsed as strict JSON (NaN or Infinity fail the test)."""
    return json.loads(response.content.decode(), parse_constant=pytest.fail)


@pytest.fixture
def calibrated(db, bob):
    """40 trials: the judge fails 1..20; bob fails 1..21 and passes 22..40 (critique
    'looked'). n = 40, confusion TP 19 / FP 1 / FN 0 / TN 20, agreement 39/40, FAR 1/21,
    FRR 0/19."""
    run, version, trials = judged_run(40, judge_fails=20)
    cset = calibration_set(run, version, trials)
    for i, trial in enumerate(trials):
        label_submit(
            trial=trial, reviewer=bob, verdict="fail" if i < 21 else "pass", critique="looked"
        )
    return cset, version, trials


@pytest.fixture
def small(db):
    """A set of 4 unlabeled trials of another suite (judge fails the first one)."""
    run, version, trials = judged_run(
        4, judge_fails=1, suite_name="small", run_name="r2", judge_name="other"
    )
    return calibration_set(run, version, trials, name="small"), version, trials


# --- calibration sets ---------------------------------------------------------------------------


def test_every_role_reads_calibration_sets_and_outsiders_do_not(
    calibrated, alice, bob, carol, mallory
):
    cset = calibrated[0]
    for path in ("/api/calibration-sets/", f"/api/calibration-sets/{cset.uuid}/"):
        for user, status in ((alice, 200), (bob, 200), (carol, 200), (mallory, 403), (None, 401)):
            assert client_for(user).get(path).status_code == status, (path, user)


def test_the_detail_holds_the_calibration_figures_for_engineers(calibrated, carol):
    cset, version, _ = calibrated
    body = strict(client_for(carol).get(f"/api/calibration-sets/{cset.uuid}/"))
    assert (body["name"], body["size"], body["frozen"], body["judge_version"]) == (
        "cal-1",
        40,
        True,
        str(version.uuid),
    )
    assert body["frozen_at"].endswith("Z") and body["calibration_reason"] == ""
    cal = body["calibration"]
    assert (cal["judge_version"], cal["judge_version_label"], cal["n"]) == (
        str(version.uuid),
        "strict v1",
        40,
    )
    assert cal["confusion"] == {
        "judge_pass_human_pass": 19,
        "judge_pass_human_fail": 1,
        "judge_fail_human_pass": 0,
        "judge_fail_human_fail": 20,
    }
    assert (cal["agreement"], cal["agreement_numerator"], cal["agreement_reason"]) == (
        39 / 40,
        39,
        "",
    )
    kappa = cal["kappa"]
    assert kappa["kappa"] == pytest.approx(0.95)  # p_o 0.975, p_e 0.5: (0.975 - 0.5) / 0.5
    assert kappa["se"] > 0 and kappa["ci_low"] < kappa["kappa"] < kappa["ci_high"]
    assert (cal["far"]["numerator"], cal["far"]["denominator"]) == (1, 21)
    assert cal["far"]["rate"] == pytest.approx(1 / 21)
    low, high = proportion_confint(1, 21, alpha=0.05, method="wilson")
    assert (cal["far"]["ci_low"], cal["far"]["ci_high"]) == (
        pytest.approx(low, abs=1e-5),
        pytest.approx(high, abs=1e-5),
    )
    assert (cal["frr"]["rate"], cal["frr"]["numerator"], cal["frr"]["denominator"]) == (0.0, 0, 19)
    # FAR 1/21 = 4.8% meets 10% as a point; its Wilson upper bound (22.7%) does not.
    assert (cal["n_judge_errors"], cal["n_unlabeled"], cal["trust_ok"]) == (0, 0, False)
    assert cal["thresholds"] == {
        "min_n": 30,
        "min_kappa": 0.6,
        "max_far": 0.1,
        "min_human_fails": 35,
        "confidence": 0.95,
        "min_position_consistency": 0.8,
    }
    checks = {c["key"]: (c["value"], c["op"], c["threshold"], c["ok"]) for c in cal["trust_checks"]}
    assert checks["far_upper"] == (pytest.approx(high, abs=1e-5), "<=", 0.1, False)
    assert checks["human_fails"] == (21, ">=", 35, False)
    assert checks["kappa_lower"] == (pytest.approx(kappa["ci_low"]), ">=", 0.6, True)
    assert checks["n"] == (40, ">=", 30, True)


def test_a_reviewer_gets_the_set_but_never_the_judges_figures(calibrated, bob):
    cset = calibrated[0]
    response = client_for(bob).get(f"/api/calibration-sets/{cset.uuid}/")
    body = strict(response)
    assert body["size"] == 40 and body["calibration"] is None
    assert body["calibration_reason"].startswith("withheld: reviewers label blind")
    text = response.content.decode()
    assert "JUDGE-REASONING" not in text and "judge_pass" not in text
    probe = client_for(bob).get(f"/api/calibration-sets/{cset.uuid}/?judge_version={UNKNOWN}")
    assert probe.status_code == 200 and probe.json()["calibration"] is None  # nothing looked up


def test_undefined_figures_are_null_with_a_reason_never_nan(small, alice, carol):
    cset, _, trials = small
    client = client_for(carol)
    cal = strict(client.get(f"/api/calibration-sets/{cset.uuid}/"))["calibration"]
    assert (cal["n"], cal["agreement"], cal["n_unlabeled"]) == (0, None, 4)
    assert cal["agreement_reason"].startswith("n = 0")
    assert cal["kappa"]["kappa"] is None and cal["kappa"]["reason"]
    assert cal["far"]["rate"] is None and cal["far"]["reason"]
    for trial in trials:  # every human passes: kappa and FAR undefined, FRR defined
        label_submit(trial=trial, reviewer=alice, verdict="pass")
    cal = strict(client.get(f"/api/calibration-sets/{cset.uuid}/"))["calibration"]
    assert (cal["n"], cal["agreement"]) == (4, 0.75)
    assert cal["far"]["rate"] is None and cal["far"]["denominator"] == 0
    assert (cal["frr"]["numerator"], cal["frr"]["denominator"]) == (1, 4)
    assert any("no human fails" in w for w in cal["warnings"])
    assert cal["trust_ok"] is False and cal["trust_reasons"]


def test_the_detail_computes_another_judge_version_on_request(calibrated, small, carol):
    cset, _, _ = calibrated
    other = small[1]
    client = client_for(carol)
    cal = client.get(f"/api/calibration-sets/{cset.uuid}/?judge_version={other.uuid}").json()[
        "calibration"
    ]
    assert (cal["judge_version"], cal["n"], cal["n_judge_missing"]) == (str(other.uuid), 0, 40)
    assert (
        client.get(f"/api/calibration-sets/{cset.uuid}/?judge_version={UNKNOWN}").status_code == 404
    )
    response = client.get(f"/api/calibration-sets/{cset.uuid}/?judge_version=v1")
    assert response.status_code == 400 and list(response.json()) == ["judge_version"]
    CalibrationSet.objects.filter(pk=cset.pk).update(judge_version=None)
    body = client.get(f"/api/calibration-sets/{cset.uuid}/").json()
    assert body["calibration"] is None and "no judge version" in body["calibration_reason"]


def test_the_set_list_filters_by_suite_and_judge_version(calibrated, small, bob):
    client = client_for(bob)

    def names(query: str) -> list[str]:
        return sorted(
            r["name"] for r in client.get(f"/api/calibration-sets/{query}").json()["results"]
        )

    assert names("") == ["cal-1", "small"]
    assert names(f"?suite={small[0].suite.uuid}") == ["small"]
    assert names(f"?judge_version={calibrated[1].uuid}") == ["cal-1"]
    unknown = client.get(f"/api/calibration-sets/?suite={UNKNOWN}")
    assert unknown.status_code == 404
    assert unknown.json() == {
        "detail": f"suite: no suite with id {UNKNOWN}",
        "field": "suite",
        "record": None,
    }
    row = client.get("/api/calibration-sets/").json()["results"][0]
    assert "calibration" not in row
    for query in ("?suite=support", "?suite=1"):
        assert client.get(f"/api/calibration-sets/{query}").status_code == 400
    assert names("?judge_version=") == ["cal-1", "small"]  # empty: no filter (docs/api.md)
    assert client.get(f"/api/calibration-sets/{UNKNOWN}/").status_code == 404


# --- labels: reading --------------------------------------------------------------------------


def test_a_reviewer_reads_only_their_own_labels_and_engineers_and_leads_read_all(
    small, alice, bob, carol, mallory
):
    cset, _, trials = small
    label_submit(trial=trials[0], reviewer=bob, verdict="fail", critique="bob says")
    label_submit(trial=trials[0], reviewer=alice, verdict="pass", critique="alice says")
    Label.objects.create(
        trial=trials[1], reviewer_name="dataset gold", verdict="pass", source="import"
    )

    def reviewers(user, query: str = "") -> list[str]:
        rows = client_for(user).get(f"/api/labels/{query}").json()["results"]
        return sorted(r["reviewer"] for r in rows)

    assert reviewers(alice) == reviewers(carol) == ["alice", "bob", "dataset gold"]
    assert reviewers(bob) == ["bob"]
    assert reviewers(bob, f"?trial={trials[0].uuid}") == ["bob"]
    assert client_for(mallory).get("/api/labels/").status_code == 403
    assert client_for(None).get("/api/labels/").status_code == 401
    alices = Label.objects.get(reviewer=alice)
    assert client_for(bob).get(f"/api/labels/{alices.id}/").status_code == 404
    assert "alice says" not in client_for(bob).get("/api/labels/").content.decode()
    assert client_for(carol).get(f"/api/labels/{alices.id}/").json()["critique"] == "alice says"


def test_labels_filter_by_run_set_and_trial_and_preview_long_critiques(
    calibrated, small, alice, carol
):
    cset, _, trials = calibrated
    label_submit(trial=small[2][0], reviewer=alice, verdict="pass", critique="é" * 2500)
    client = client_for(carol)

    def count(query: str) -> int:
        seen, url = 0, f"/api/labels/{query}"
        while url:
            page = client.get(url).json()
            seen, url = seen + len(page["results"]), page["next"]
        return seen

    assert count("") == 41
    assert count(f"?run={trials[0].run.uuid}") == count(f"?calibration_set={cset.uuid}") == 40
    assert count(f"?calibration_set={small[0].uuid}") == 1
    assert count(f"?trial={trials[3].uuid}") == 1
    row = client.get(f"/api/labels/?trial={small[2][0].uuid}").json()["results"][0]
    assert (row["critique_preview"], row["critique_length"]) == ("é" * 2000, 2500)
    assert "critique" not in row
    assert (row["run"], row["case_id"], row["attempt"], row["source"], row["version"]) == (
        str(small[2][0].run.uuid),
        "c01",
        1,
        "reviewer",
        1,
    )
    assert client.get(f"/api/labels/{row['id']}/").json()["critique"] == "é" * 2500
    for param in ("run", "calibration_set", "trial"):
        response = client.get(f"/api/labels/?{param}=c01")
        assert response.status_code == 400 and list(response.json()) == [param]


# --- labels: submitting -------------------------------------------------------------------------


def _submit(user, body):
    return client_for(user).post("/api/labels", body, format="json")


def test_a_reviewer_labels_revises_and_gets_409_on_a_stale_version(small, bob):
    cset, _, trials = small
    trial = str(trials[0].uuid)
    first = _submit(
        bob, {"trial": trial, "verdict": "fail", "critique": "wrong refund", "expected_version": 0}
    )
    assert first.status_code == 201
    body = first.json()
    assert (
        body["verdict"],
        body["critique"],
        body["version"],
        body["reviewer"],
        body["trial"],
    ) == ("fail", "wrong refund", 1, "bob", trial)
    assert body["created_at"].endswith("Z") and body["updated_at"] == body["created_at"]
    cset.refresh_from_db()
    assert cset.is_frozen  # the first label freezes the set, as in the queue
    revised = _submit(bob, {"trial": trial, "verdict": "pass", "expected_version": 1})
    assert revised.status_code == 200 and revised.json()["version"] == 2
    same = _submit(bob, {"trial": trial, "verdict": "pass", "expected_version": 2})
    assert same.status_code == 200 and same.json()["version"] == 2
    stale = _submit(bob, {"trial": trial, "verdict": "fail", "expected_version": 1})
    assert stale.status_code == 409
    assert stale.json()["current_version"] == 2 and stale.json()["field"] == "expected_version"
    label = Label.objects.get()
    assert (label.verdict, label.version, LabelRevision.objects.count()) == ("pass", 2, 2)


def test_reviewers_and_leads_label_and_engineers_and_outsiders_do_not(
    small, alice, bob, carol, mallory
):
    body = {"trial": str(small[2][1].uuid), "verdict": "pass"}
    for user, status in ((carol, 403), (mallory, 403), (None, 401)):
        assert _submit(user, body).status_code == status
    assert _submit(alice, body).status_code == 201
    assert _submit(bob, body).status_code == 201
    assert sorted(Label.objects.values_list("reviewer__username", flat=True)) == ["alice", "bob"]


@pytest.mark.parametrize(
    "verdict", ["true", True, "PASS", "Pass", " pass", 1, None, "", ["pass"], "yes"]
)
def test_it_refuses_anything_but_pass_or_fail_and_names_verdict(small, bob, verdict):
    response = _submit(bob, {"trial": str(small[2][0].uuid), "verdict": verdict})
    assert response.status_code == 400 and list(response.json()) == ["verdict"]
    assert Label.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"critique": 5}, "critique"),
        ({"critique": "x" * 20_001}, "critique"),
        ({"expected_version": "1"}, "expected_version"),
        ({"expected_version": True}, "expected_version"),
        ({"expected_version": -1}, "expected_version"),
        ({"trial": 7}, "trial"),
        ({"trial": "c01"}, "trial"),
        ({"label": "pass"}, "label"),
    ],
)
def test_it_names_the_bad_field_and_writes_nothing(small, bob, body, field):
    data = {"trial": str(small[2][0].uuid), "verdict": "pass", **body}
    response = _submit(bob, data)
    assert response.status_code == 400 and field in response.json()
    assert Label.objects.count() == 0


def test_an_unknown_trial_is_a_404_and_a_form_body_a_415(small, bob):
    assert _submit(bob, {"trial": UNKNOWN, "verdict": "pass"}).status_code == 404
    response = client_for(bob).post(
        "/api/labels", {"trial": str(small[2][0].uuid), "verdict": "pass"}
    )
    assert response.status_code == 415
    assert Label.objects.count() == 0


def test_judge_reasons_never_reach_a_reviewer_through_labels_or_sets(calibrated, bob):
    client = client_for(bob)
    for path in (
        "/api/labels/",
        "/api/calibration-sets/",
        f"/api/calibration-sets/{calibrated[0].uuid}/",
    ):
        assert JUDGE_REASON[:15] not in client.get(path).content.decode()


# --- labels: undo and the A-B-A sequence --------------------------------------------------------


def _undo(user, body):
    return client_for(user).post("/api/labels/undo", body, format="json")


def test_the_aba_sequence_through_the_api_is_a_409_for_the_stale_tab(small, bob):
    """Save v1, undo (v2, cleared), save again from another tab (v3), then the stale tab
    saves with expected_version=1: 409, and the newer label stands."""
    trial = str(small[2][0].uuid)
    first = _submit(bob, {"trial": trial, "verdict": "pass", "expected_version": 0})
    assert first.status_code == 201 and first.json()["version"] == 1
    undone = _undo(bob, {"trial": trial, "expected_version": 1})
    assert undone.status_code == 200
    assert undone.json() == {"trial": trial, "version": 2, "label": None}
    again = _submit(bob, {"trial": trial, "verdict": "fail", "expected_version": 2})
    assert again.status_code == 201 and again.json()["version"] == 3
    stale = _submit(bob, {"trial": trial, "verdict": "pass", "expected_version": 1})
    assert stale.status_code == 409
    assert (stale.json()["field"], stale.json()["current_version"]) == ("expected_version", 3)
    label = Label.objects.get()
    assert (label.verdict, label.version) == ("fail", 3)
    assert list(
        LabelRevision.objects.order_by("version").values_list("version", "verdict", "undoes")
    ) == [(1, "pass", None), (2, "", 1), (3, "fail", None)]


def test_an_undo_through_the_api_goes_back_one_save_and_refuses_a_stale_version(small, bob):
    trial = str(small[2][0].uuid)
    _submit(bob, {"trial": trial, "verdict": "pass", "critique": "one"})
    _submit(bob, {"trial": trial, "verdict": "fail", "critique": "two", "expected_version": 1})
    stale = _undo(bob, {"trial": trial, "expected_version": 1})
    assert stale.status_code == 409 and stale.json()["current_version"] == 2
    undone = _undo(bob, {"trial": trial, "expected_version": 2})
    body = undone.json()
    assert undone.status_code == 200 and body["version"] == 3
    assert (body["label"]["verdict"], body["label"]["critique"], body["label"]["version"]) == (
        "pass",
        "one",
        3,
    )


def test_an_undo_by_an_engineer_is_refused_and_a_bad_trial_named(small, bob, carol):
    trial = str(small[2][0].uuid)
    _submit(bob, {"trial": trial, "verdict": "pass"})
    assert _undo(carol, {"trial": trial}).status_code == 403
    assert _undo(bob, {"trial": UNKNOWN}).status_code == 404
    bad = _undo(bob, {"trial": "zzz"})
    assert bad.status_code == 400 and list(bad.json()) == ["trial"]
    assert Label.objects.get().version == 1
