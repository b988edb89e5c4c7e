"""Pairwise judges on your own runs (issue 12, point 5): a head run against a base run of the
same suite, attempt i against attempt i, judged in both presentation orders (a tie when
they disagree), as a judge run (progress, cancel, exit codes), from the service, the
command, the API and the comparison page.

The judge here is the scripted fake server (``tests.fakellm``), so preferences are known;
the end-to-end run through a real worker against the shared mock is in
``test_pairwise_worker.py``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.errors import DomainError
from evals.models import Case, Run, Suite, Trial, TrialPair
from judges import runs
from judges.models import JudgeRun, PairwiseVerdict
from judges.selectors import pairwise_tally_get, position_bias_list
from judges.versions import judge_version_create
from tests.conftest import PASSWORD
from tests.core.test_api_core import client_for
from tests.fakellm import FakeLLM
from tests.judge_builders import fenced, make_version, verdict_json

pytestmark = pytest.mark.django_db


def _runs(base_attempts: dict[str, list[str]], head_attempts: dict[str, list[str]]):
    """Two finished runs of one suite: ``{case key: [output of attempt 1, 2, ...]}``; an
    output of None is an errored trial."""
    suite, _ = Suite.objects.get_or_create(name="S")
    made = []
    for name, attempts in (("base", base_attempts), ("head", head_attempts)):
        run = Run.objects.create(
            suite=suite, name=name, target_kind="callable", status=Run.Status.SUCCEEDED
        )
        for key, outputs in attempts.items():
            case, _ = Case.objects.get_or_create(suite=suite, key=key, defaults={"input": key})
            for attempt, output in enumerate(outputs, start=1):
                Trial.objects.create(
                    run=run,
                    case=case,
                    attempt=attempt,
                    status="ok" if output is not None else "error",
                    output=output or "",
                )
        made.append(run)
    return made


def _prefers_paris(body) -> str:
    a, b = fenced(body)[1:3]
    return verdict_json("A" if "Paris" in a else "B")


@pytest.fixture
def paris_judge():
    with FakeLLM(responder=_prefers_paris) as llm:
        yield llm


def test_attempt_i_is_judged_against_attempt_i_in_both_orders_and_the_unpaired_are_counted(
    paris_judge, django_capture_on_commit_callbacks
):
    base, head = _runs(
        {"c1": ["Berlin", "Paris"], "c2": ["Paris", None], "c3": ["Paris"]},
        {"c1": ["Paris", "Paris", "Paris"], "c2": ["Paris", "Paris"], "c4": ["Paris"]},
    )
    version = make_version(paris_judge, kind="pairwise")
    with django_capture_on_commit_callbacks(execute=True):
        judge_run = runs.pairwise_judge_run_start(base=base, head=head, judge_version=version)
    judge_run.refresh_from_db()
    # Pairs: c1 attempts 1 and 2, c2 attempt 1 (attempt 2 errored in base). Unpaired ok
    # trials: head c1#3, head c2#2, base c3#1, head c4#1.
    assert (judge_run.status, judge_run.trials_total, judge_run.trials_graded) == (
        "succeeded",
        3,
        3,
    )
    assert (judge_run.unpaired, judge_run.trials_errored) == (4, 0)
    assert paris_judge.requests == 6
    pairs = TrialPair.objects.filter(id__in=judge_run.trial_ids)
    assert sorted((p.case.key, p.trial_a.attempt, p.trial_b.attempt) for p in pairs) == [
        ("c1", 1, 1),
        ("c1", 2, 2),
        ("c2", 1, 1),
    ]
    assert all(p.trial_a.run_id == base.id and p.trial_b.run_id == head.id for p in pairs)
    tally = pairwise_tally_get(judge_run=judge_run)
    # c1#1: Paris (head) over Berlin in both orders; c1#2 and c2#1: both Paris, the judge
    # picks slot A whatever it shows -> the orders disagree -> ties.
    assert (tally.head_wins, tally.base_wins, tally.ties, tally.errors) == (1, 0, 2, 0)
    [bias] = position_bias_list(judge_version_ids=[version.id])
    assert (bias.pairs_consistent, bias.pairs_both) == (1, 3)
    assert (bias.first_slot_wins, bias.presentations) == (5, 6)

    with django_capture_on_commit_callbacks(execute=True):
        again = runs.pairwise_judge_run_start(base=base, head=head, judge_version=version)
    assert again.id == judge_run.id and paris_judge.requests == 6  # nothing called twice
    again.refresh_from_db()
    assert again.status == "succeeded"


def test_refusals_name_the_field():
    base, head = _runs({"c1": ["x"]}, {"c1": ["y"]})
    rubric, _ = judge_version_create(
        judge_name="r",
        kind="rubric",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        prompt_template="",
        params={},
        output_schema={},
    )
    pairwise, _ = judge_version_create(
        judge_name="p",
        kind="pairwise",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        prompt_template="",
        params={},
        output_schema={},
    )
    with pytest.raises(DomainError) as caught:
        runs.pairwise_judge_run_start(base=base, head=head, judge_version=rubric)
    assert caught.value.field == "judge_version"
    with pytest.raises(DomainError, match="judge_run --pairwise BASE") as caught:
        runs.judge_run_start(run=head, judge_version=pairwise)
    with pytest.raises(DomainError, match="two different runs") as caught:
        runs.pairwise_judge_run_start(base=head, head=head, judge_version=pairwise)
    assert caught.value.field == "head_run"
    other = Run.objects.create(
        suite=Suite.objects.create(name="T"), name="o", target_kind="callable", status="succeeded"
    )
    with pytest.raises(DomainError, match="not of the suite"):
        runs.pairwise_judge_run_start(base=base, head=other, judge_version=pairwise)
    Run.objects.filter(id=head.id).update(status=Run.Status.RUNNING)
    head.refresh_from_db()
    with pytest.raises(DomainError) as caught:
        runs.pairwise_judge_run_start(base=base, head=head, judge_version=pairwise)
    assert caught.value.field == "head_run"
    assert not JudgeRun.objects.exists()


@pytest.mark.parametrize(
    ("slots", "message"),
    [
        ({"PASS": "A"}, "each of the slots"),
        ({"PASS": "A", "FAIL": "C"}, "expected an object"),
        ("A", "expected an object"),
    ],
)
def test_verdict_slots_must_name_both_slots(slots, message):
    with pytest.raises(DomainError, match=message) as caught:
        judge_version_create(
            judge_name="p",
            kind="pairwise",
            model="m",
            base_url="http://127.0.0.1:9/v1",
            prompt_template="",
            params={"verdict_slots": slots},
            output_schema={},
        )
    assert caught.value.field == "params.verdict_slots"


def test_verdict_slots_read_pass_fail_replies_and_an_unmapped_word_is_an_error(
    django_capture_on_commit_callbacks,
):
    replies = iter(["pass", "FAIL", "maybe", "pass"])
    with FakeLLM(responder=lambda body: verdict_json(next(replies))) as llm:
        version = make_version(
            llm, kind="pairwise", verdict_slots={"PASS": "A", "FAIL": "B"}, concurrency=1
        )
        assert version.output_schema["properties"]["verdict"] == {"enum": ["PASS", "FAIL"]}
        assert "verdict_slots" not in json.dumps(llm.bodies)
        base, head = _runs({"c1": ["x"], "c2": ["y"]}, {"c1": ["x2"], "c2": ["y2"]})
        with django_capture_on_commit_callbacks(execute=True):
            judge_run = runs.pairwise_judge_run_start(base=base, head=head, judge_version=version)
        assert "verdict_slots" not in json.dumps(llm.bodies)
    judge_run.refresh_from_db()
    verdicts = {
        (v.pair.case.key, v.position): (v.status, v.preferred)
        for v in PairwiseVerdict.objects.select_related("pair__case")
    }
    # c1: "pass" -> slot A (base) first, "FAIL" -> slot B = base when swapped: base wins.
    assert verdicts[("c1", "original")] == ("ok", "A")
    assert verdicts[("c1", "swapped")] == ("ok", "A")
    assert verdicts[("c2", "original")][0] == "error"  # "maybe" is outside the enum
    assert (judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == (
        "succeeded",
        2,
        1,
    )
    tally = pairwise_tally_get(judge_run=judge_run)
    assert (tally.base_wins, tally.errors) == (1, 1)


def test_a_cancelled_pairwise_judge_run_makes_no_call(
    paris_judge, django_capture_on_commit_callbacks
):
    base, head = _runs({"c1": ["Berlin"]}, {"c1": ["Paris"]})
    version = make_version(paris_judge, kind="pairwise")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        judge_run = runs.pairwise_judge_run_start(base=base, head=head, judge_version=version)
    assert runs.judge_run_cancel(judge_run=judge_run)
    for callback in callbacks:
        callback()  # the worker picks the chunk up after the cancel
    judge_run.refresh_from_db()
    assert (judge_run.status, paris_judge.requests, judge_run.trials_graded) == ("cancelled", 0, 0)


def _command(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("judge_run", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_command_compares_base_and_head_and_exits_by_the_documented_codes(paris_judge):
    base, head = _runs({"c1": ["Berlin"], "c2": ["Paris"]}, {"c1": ["Paris"], "c2": ["Berlin"]})
    make_version(paris_judge, kind="pairwise", name="pref")
    code, text = _command(
        "--pairwise", "S/base", str(head.uuid), "pref:v1", "--wait", "--timeout", "20", "--json"
    )
    assert code == 0, text
    out = json.loads(text)
    assert out["status"] == "succeeded" and out["base_run"] == str(base.uuid)
    assert (out["pairs_total"], out["pairs_judged"], out["unpaired"]) == (2, 2, 0)
    assert (out["head_wins"], out["base_wins"], out["ties"]) == (1, 1, 0)
    code, text = _command("--pairwise", "S/base", "S/head", "pref", "--wait")
    assert code == 0 and "head wins 1, base wins 1, ties (the orders disagree) 0" in text
    code, text = _command("--pairwise", "S/nope", "S/head", "pref")
    assert code == 3 and "nope" in text
    code, text = _command("--pairwise", "S/base", "S/head", "pref", "--sample", "1")
    assert code == 3


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_command_exits_1_when_every_pair_errored():
    with FakeLLM(responder=lambda body: "not json") as llm:
        _runs({"c1": ["a"]}, {"c1": ["b"]})
        make_version(llm, kind="pairwise", name="pref", max_attempts=1)
        code, text = _command("--pairwise", "S/base", "S/head", "pref", "--wait")
    assert code == 1, text
    assert "every pair errored (1 of 1; presentations: unparseable 2)" in text


def test_the_api_starts_a_pairwise_judge_run(
    paris_judge, carol, bob, django_capture_on_commit_callbacks
):
    base, head = _runs({"c1": ["Berlin"]}, {"c1": ["Paris"]})
    version = make_version(paris_judge, kind="pairwise")
    body = {"judge_version": str(version.uuid), "base_run": str(base.uuid)}
    client = client_for(carol)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/judge-runs", {**body, "head_run": str(head.uuid)}, format="json"
        )
    assert response.status_code == 202, response.content
    data = response.json()
    assert (data["run"], data["base_run"], data["trials_total"]) == (
        str(head.uuid),
        str(base.uuid),
        1,
    )
    detail = client.get(response["Location"]).json()
    assert detail["status"] == "succeeded"
    assert detail["pairwise"] == {"head_wins": 1, "base_wins": 0, "ties": 0, "errors": 0}
    missing = client.post("/api/judge-runs", body, format="json")
    assert missing.status_code == 400 and "head_run" in missing.json()
    pointwise = client.post(
        "/api/judge-runs",
        {"judge_version": str(version.uuid), "run": str(head.uuid)},
        format="json",
    )
    assert pointwise.status_code == 400 and "base_run and head_run" in str(
        pointwise.json()["judge_version"]
    )
    assert (
        client_for(bob)
        .post("/api/judge-runs", {**body, "head_run": str(head.uuid)}, format="json")
        .status_code
        == 403
    )


def test_the_comparison_page_offers_pairwise_judging_to_engineers_not_reviewers(
    client, paris_judge, carol, bob, django_capture_on_commit_callbacks
):
    base, head = _runs({"c1": ["Berlin"]}, {"c1": ["Paris"]})
    version = make_version(paris_judge, kind="pairwise")
    url = reverse("evals:comparison", kwargs={"head_id": head.uuid, "base_id": base.uuid})
    assert client.login(username=bob.username, password=PASSWORD)
    assert 'id="pairwise-judging"' not in client.get(url).content.decode()
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.get(url).content.decode()
    assert 'id="pairwise-judging"' in page and f'value="{version.uuid}"' in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("judges:pairwise-judge-run-start"),
            {"base_run": base.uuid, "head_run": head.uuid, "judge_version": version.uuid},
        )
    judge_run = JudgeRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("judges:judge-run-detail", args=[judge_run.uuid])
    detail = client.get(response["Location"]).content.decode()
    assert "pairs judged in both orders" in detail
    assert "head wins <strong>1</strong>" in detail
    assert reverse("labeling:preferences", args=[judge_run.uuid]) in detail
    page = client.get(url).content.decode()
    assert reverse("judges:judge-run-detail", args=[judge_run.uuid]) in page
    version_page = client.get(reverse("judges:version-detail", args=[version.uuid]))
    assert "S / head against base</a> (pairs)" in version_page.content.decode()
    assert "judge_run --pairwise BASE HEAD j:v1" in version_page.content.decode()
