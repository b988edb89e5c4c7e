"""Loud judge jobs (issue 12, point 7): how a judge run ends (failed when every grade errored),
``judge_run``'s exit codes, ``--wait --timeout``, cancelling (service, command, API, page)
so that no further paid call is made, the live progress bar, and judge versions named
``JUDGE:vN`` or by the judge's config name.

The cancel is checked against the calls an endpoint really received: the scripted fake
server (``tests.fakellm``) and the project's shared mock (``tests.mockllm``)."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from core.errors import DomainError
from evals.models import Case, Grade, Run, Suite, Trial
from judges import runs, tasks
from judges.management.commands import judge_run as judge_run_command
from judges.models import JudgeCallRecord, JudgeClaim, JudgeRun
from judges.selectors import judge_version_resolve
from judges.versions import judge_version_create
from tests.conftest import PASSWORD
from tests.core.test_api_core import client_for
from tests.fakellm import FakeLLM
from tests.judge_builders import make_trials, make_version, verdict_json
from tests.mockllm import mockllm  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def _command(*args: str) -> tuple[int, str]:
    """``judge_run`` with ``args``: (exit code, stdout)."""
    from io import StringIO  # noqa: PLC0415

    out = StringIO()
    try:
        call_command("judge_run", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue() + str(exc)
    return 0, out.getvalue()


def _version(base_url: str, *, name: str = "j", **params):
    version, _ = judge_version_create(
        judge_name=name,
        kind="rubric",
        model="judge-model",
        base_url=base_url,
        prompt_template="",
        params={"max_attempts": 1, **params},
        output_schema={},
    )
    return version


# --- naming a judge version -------------------------------------------------------------------


def test_a_judge_version_is_named_by_uuid_judge_vn_grader_key_or_judge_name():
    v1 = _version("http://127.0.0.1:9/v1", name="helpfulness", temperature=0)
    v2 = _version("http://127.0.0.1:9/v1", name="helpfulness", temperature=1)
    assert judge_version_resolve(ref=str(v1.uuid)) == v1
    assert judge_version_resolve(ref="helpfulness:v1") == v1
    assert judge_version_resolve(ref="judge:helpfulness:v1") == v1
    assert judge_version_resolve(ref=" helpfulness ") == v2  # the newest version
    assert judge_version_resolve(ref="helpfulness:v2") == v2


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("", "invalid"),
        ("nope", "not_found"),
        ("helpfulness:v3", "not_found"),
        ("Helpfulness:v1", "not_found"),  # names are exact
        ("00000000-0000-0000-0000-000000000000", "not_found"),
    ],
)
def test_an_unknown_judge_version_name_is_a_domain_error_on_the_judge_field(ref, code):
    _version("http://127.0.0.1:9/v1", name="helpfulness")
    with pytest.raises(DomainError) as caught:
        judge_version_resolve(ref=ref)
    assert (caught.value.field, caught.value.code) == ("judge", code)


def test_a_name_that_names_two_versions_is_ambiguous():
    a = _version("http://127.0.0.1:9/v1", name="a", temperature=0)
    _version("http://127.0.0.1:9/v1", name="a", temperature=1)
    odd = _version("http://127.0.0.1:9/v1", name="a:v2")  # a judge literally named "a:v2"
    with pytest.raises(DomainError, match="ambiguous: it names a v2 and a:v2 v1") as caught:
        judge_version_resolve(ref="a:v2")
    assert (caught.value.field, caught.value.code) == ("judge", "conflict")
    assert judge_version_resolve(ref="a:v2:v1") == odd
    assert judge_version_resolve(ref="a:v1") == a


def test_apply_config_prints_the_names_judge_run_accepts(
    tmp_path, django_capture_on_commit_callbacks
):
    from io import StringIO  # noqa: PLC0415

    path = tmp_path / "assay.toml"
    path.write_text(
        '[[judges]]\nname = "helpfulness"\nkind = "rubric"\nmodel = "judge-model"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
    )
    out = StringIO()
    call_command("apply_config", str(path), stdout=out)
    line = out.getvalue().strip()
    assert line.startswith("judge helpfulness: new version 1 (untrusted); helpfulness:v1 = ")
    printed_uuid = line.rsplit(" ", 1)[1]
    trials = make_trials(["Paris"])
    for name in ("helpfulness:v1", "helpfulness", printed_uuid):
        with django_capture_on_commit_callbacks(execute=False):
            code, text = _command(str(trials[0].run.uuid), name)
        assert code == 0, text
        run = trials[0].run
        assert f"helpfulness v1 on run R1 ({run.uuid}) of suite S: queued" in text


# --- how a judge run ends, and judge_run's exit codes ----------------------------------------


@pytest.fixture
def no_wait(monkeypatch):
    """The command's clock without real sleeps (a waiting loop finishes at once)."""
    clock = SimpleNamespace(now=0.0)

    def sleep(seconds):
        clock.now += seconds

    monkeypatch.setattr(
        judge_run_command, "time", SimpleNamespace(monotonic=lambda: clock.now, sleep=sleep)
    )
    return clock


def _scripted(body) -> str:
    return verdict_json("PASS")


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize(
    ("outputs", "status", "code", "message"),
    [
        (["Paris", "Lyon"], "succeeded", 0, ""),
        (["Paris", "[fault=500]"], "succeeded", 4, "1 of 2 grades errored: server_error 1"),
        (
            ["[fault=500]", "[fault=503]"],
            "failed",
            1,
            "every grade errored (2 of 2): server_error 2",
        ),
    ],
)
def test_judge_run_wait_exits_with_the_documented_code(outputs, status, code, message, no_wait):
    # transaction=True: the chunk tasks run (eagerly) as judge_run_start commits.
    with FakeLLM(responder=_scripted) as llm:
        trials = make_trials(outputs)
        make_version(llm, max_attempts=1)
        got, text = _command(str(trials[0].run.uuid), "j:v1", "--wait")
    judge_run = JudgeRun.objects.get()
    assert (judge_run.status, judge_run.error_message, got) == (status, message, code), text
    assert judge_run.finished_at is not None


def test_a_judge_run_whose_every_grade_errored_ends_failed_never_succeeded(
    django_capture_on_commit_callbacks,
):
    with FakeLLM(responder=_scripted) as llm:
        trials = make_trials(["[fault=500]", "[fault=500]", "[fault=500]"])
        version = make_version(llm, max_attempts=1)
        with django_capture_on_commit_callbacks(execute=True):
            runs.judge_run_start(run=trials[0].run, judge_version=version)
    judge_run = JudgeRun.objects.get()
    assert (judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == ("failed", 3, 3)
    assert set(Grade.objects.values_list("status", "passed")) == {("error", None)}


def test_wait_timeout_exits_5_and_the_judge_run_keeps_going(
    no_wait, django_capture_on_commit_callbacks
):
    with FakeLLM(responder=_scripted) as llm:
        trials = make_trials(["Paris"])
        make_version(llm)
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            code, text = _command(str(trials[0].run.uuid), "j", "--wait", "--timeout", "3")
        assert (code, JudgeRun.objects.get().status) == (5, "queued"), text
        assert "--timeout passed" in text and "it keeps going" in text
        assert no_wait.now == pytest.approx(3.0)  # it waited exactly the timeout
        for callback in callbacks:  # the worker picks the chunk up later
            callback()
    assert JudgeRun.objects.get().status == "succeeded"  # the job went on


def test_a_judge_run_cancelled_while_waiting_exits_6(
    monkeypatch, django_capture_on_commit_callbacks
):
    def sleep(seconds):
        runs.judge_run_cancel(judge_run=JudgeRun.objects.get())

    monkeypatch.setattr(
        judge_run_command, "time", SimpleNamespace(monotonic=time.monotonic, sleep=sleep)
    )
    trials = make_trials(["Paris"])
    _version("http://127.0.0.1:9/v1")
    with django_capture_on_commit_callbacks(execute=True):
        code, text = _command(str(trials[0].run.uuid), "j:v1", "--wait")
    assert code == 6 and "was cancelled" in text
    assert Grade.objects.count() == 0  # the chunk task found it cancelled: no call


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["S/R1", "nope"], "judge: no judge version 'nope'"),
        (["S/R1", "j:v9"], "judge: no judge version 'j:v9'"),
        (["S/none", "j"], "run: no run 'S/none'"),
        (["S/R1", "j", "--timeout", "5"], "timeout: only with --wait"),
        (["S/R1", "j", "--wait", "--timeout", "0"], "timeout: expected a positive number"),
        (["S/R1", "j", "--sample", "0"], "sample: expected a positive number"),
        (["S/R1"], "run: give RUN and JUDGE_VERSION"),
        (["--cancel", "nope"], "cancel: no judge run with id 'nope'"),
    ],
)
def test_judge_run_refuses_bad_input_with_exit_3_and_starts_nothing(args, field):
    make_trials(["Paris"])
    _version("http://127.0.0.1:9/v1")
    code, text = _command(*args)
    assert (code, field in text) == (3, True), text
    assert JudgeRun.objects.count() == 0


def test_judge_run_refuses_a_pairwise_judge_with_exit_3():
    trials = make_trials(["Paris"])
    judge_version_create(
        judge_name="pair",
        kind="pairwise",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        prompt_template="",
        params={},
        output_schema={},
    )
    code, text = _command(str(trials[0].run.uuid), "pair")
    assert code == 3 and "does not grade single trials" in text


# --- cancelling stops further calls ----------------------------------------------------------


def test_a_cancel_between_calls_stops_every_further_call(
    monkeypatch, django_capture_on_commit_callbacks
):
    """One call at a time, 6 trials: the cancel lands after the second call was sent (as a
    user's cancel would, between two of the worker's checks); the call in flight finishes
    and is recorded, the endpoint receives nothing more, and the judge run stays cancelled
    with 2 of 6 graded."""
    real = runs.judge_run_live
    checks = []

    def cancelled_after_two_calls(**kwargs):
        checks.append(1)
        if len(checks) == 4:  # the chunk's first check, then one before each call
            assert runs.judge_run_cancel(judge_run=JudgeRun.objects.get()) is True
        return real(**kwargs)

    monkeypatch.setattr(runs, "judge_run_live", cancelled_after_two_calls)
    with FakeLLM(responder=_scripted) as llm:
        trials = make_trials(["a", "b", "c", "d", "e", "f"])
        version = make_version(llm, concurrency=1)
        with django_capture_on_commit_callbacks(execute=True):
            runs.judge_run_start(run=trials[0].run, judge_version=version)
        requests = llm.requests
    judge_run = JudgeRun.objects.get()
    assert (requests, Grade.objects.count(), JudgeCallRecord.objects.count()) == (2, 2, 2)
    assert set(JudgeCallRecord.objects.values_list("status", "outcome")) == {("answered", "stored")}
    assert (judge_run.status, judge_run.trials_graded, judge_run.trials_total) == (
        "cancelled",
        2,
        6,
    )
    assert not JudgeClaim.objects.exists()  # the calls a cancel stopped released their claims
    # A redelivered chunk of a cancelled judge run calls nothing either.
    runs.judge_run_execute(
        run_id=trials[0].run_id, judge_version_id=version.id, trial_ids=judge_run.trial_ids
    )
    assert (Grade.objects.count(), JudgeCallRecord.objects.count()) == (2, 2)


def test_progress_is_recounted_between_calls_at_most_every_progress_interval(
    monkeypatch, django_capture_on_commit_callbacks
):
    seen = []
    real = runs.judge_run_progress

    def record(**kwargs):
        judge_run = real(**kwargs)
        seen.append(judge_run.trials_graded)
        return judge_run

    monkeypatch.setattr(runs, "judge_run_progress", record)
    monkeypatch.setattr(runs, "PROGRESS_EVERY_S", 0.0)
    with FakeLLM(responder=_scripted) as llm:
        trials = make_trials(["a", "b", "c", "d", "e"])
        version = make_version(llm, concurrency=2)
        with django_capture_on_commit_callbacks(execute=True):
            runs.judge_run_start(run=trials[0].run, judge_version=version)
        # Recounted at check-ins between calls (the bar moves while the chunk runs), then
        # once more at the chunk's end.
        assert len(seen) >= 3 and seen == sorted(seen) and seen[0] < 5 and seen[-1] == 5, seen
        assert JudgeRun.objects.get().status == "succeeded"
        # At most one recount a second (and one at the end): a fast endpoint pays none between.
        seen.clear()
        monkeypatch.setattr(runs, "PROGRESS_EVERY_S", 3600.0)
        version = make_version(llm, concurrency=2, temperature=1)
        with django_capture_on_commit_callbacks(execute=True):
            runs.judge_run_start(run=trials[0].run, judge_version=version)
    assert seen == [5]


def test_cancel_is_a_compare_and_set_and_refuses_a_finished_judge_run_when_asked(
    django_capture_on_commit_callbacks,
):
    with FakeLLM(responder=_scripted) as llm:
        trials = make_trials(["Paris"])
        version = make_version(llm)
        with django_capture_on_commit_callbacks(execute=True):
            judge_run = runs.judge_run_start(run=trials[0].run, judge_version=version)
    judge_run.refresh_from_db()
    assert judge_run.status == "succeeded"
    assert runs.judge_run_cancel(judge_run=judge_run) is False
    assert judge_run.status == "succeeded"
    with pytest.raises(DomainError, match="has already succeeded") as caught:
        runs.judge_run_cancel(judge_run=judge_run, refuse_finished=True)
    assert (caught.value.field, caught.value.code) == ("judge_run", "conflict")
    code, text = _command("--cancel", str(judge_run.uuid))
    assert code == 3 and "nothing to cancel" in text


def test_the_cancel_command_cancels_a_queued_judge_run_and_is_idempotent(
    django_capture_on_commit_callbacks,
):
    trials = make_trials(["Paris", "Rome"])
    version = _version("http://127.0.0.1:9/v1")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        judge_run = runs.judge_run_start(run=trials[0].run, judge_version=version)
    for _ in range(2):
        code, text = _command("--cancel", str(judge_run.uuid))
        assert code == 0 and ": cancelled, 0/2 graded" in text, text
    for callback in callbacks:  # the queued chunk runs now: it calls nothing
        callback()
    assert (JudgeRun.objects.get().status, Grade.objects.count()) == ("cancelled", 0)


def _mock_trials(n: int) -> list[Trial]:
    """n ok trials whose inputs carry the mock's marker; odd ones answer its expect token."""
    suite = Suite.objects.create(name="mock")
    run = Run.objects.create(
        suite=suite, name="r", target_kind="callable", graders=[], status=Run.Status.SUCCEEDED
    )
    trials = []
    for i in range(n):
        key = f"m{i:02d}"
        case = Case.objects.create(
            suite=suite, key=key, input=f"[case={key} p=0.5 expect=ANSWER-{key}] Capital?"
        )
        output = f"ANSWER-{key}" if i % 2 else "WRONG"
        trials.append(
            Trial.objects.create(run=run, case=case, attempt=1, status="ok", output=output)
        )
    return trials


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_shared_mock_judge_is_read_and_a_cancel_stops_its_calls(mockllm, monkeypatch):  # noqa: F811
    """A worker (a thread here) grades 12 trials one call at a time against the shared mock in
    judge mode (100 ms a call); ``judge_run --cancel`` lands after 3 calls. The mock then
    receives at most the one call already in flight, every call it answered is a verdict
    (its lower-case "pass"/"fail" read), and the judge run stays cancelled."""
    server = mockllm("--mode", "judge", "--latency-ms", "100", "--judge-flip", "0")
    trials = _mock_trials(12)
    version = _version(server.base_url, name="mock-judge", concurrency=1)
    enqueued = []
    monkeypatch.setattr(tasks.judge_run_execute, "delay", lambda *args: enqueued.append(args))
    judge_run = runs.judge_run_start(run=trials[0].run, judge_version=version)
    assert len(enqueued) == 1

    def worker():
        try:
            runs.judge_run_execute(
                run_id=enqueued[0][0], judge_version_id=enqueued[0][1], trial_ids=enqueued[0][2]
            )
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    deadline = time.monotonic() + 20
    while server.stats()["requests"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    code, text = _command("--cancel", str(judge_run.uuid))
    at_cancel = server.stats()["requests"]
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert code == 0, text
    time.sleep(0.3)  # three more call latencies: a call made now would be counted
    received = server.stats()["requests"]
    judge_run.refresh_from_db()
    grades = Grade.objects.filter(grader=judge_run.grader)
    assert 3 <= at_cancel <= received <= at_cancel + 1 < 12
    assert (judge_run.status, judge_run.trials_graded) == ("cancelled", received)
    assert grades.count() == received and judge_run.trials_errored == 0
    # With no flip the mock passes exactly the outputs carrying its expect token.
    assert {(g.trial.output.startswith("ANSWER"), g.passed) for g in grades} <= {
        (True, True),
        (False, False),
    }


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_whole_judge_run_on_the_shared_mock_succeeds_with_its_verdicts(mockllm, no_wait):  # noqa: F811
    server = mockllm("--mode", "judge", "--latency-ms", "0", "--judge-flip", "0")
    trials = _mock_trials(8)
    _version(server.base_url, name="mock-judge")
    code, text = _command(str(trials[0].run.uuid), "mock-judge", "--wait", "--timeout", "20")
    judge_run = JudgeRun.objects.get()
    assert (code, judge_run.status, judge_run.trials_graded, judge_run.trials_errored) == (
        0,
        "succeeded",
        8,
        0,
    ), text
    stats = server.stats()
    passed = Grade.objects.filter(grader=judge_run.grader, passed=True).count()
    assert (stats["requests"], passed, stats["outcomes"]["judge_pass"]) == (8, 4, 4)


# --- the page: progress bar and cancel button ------------------------------------------------


@pytest.fixture
def queued(django_capture_on_commit_callbacks, carol):
    trials = make_trials(["a", "b", "c"])
    version = _version("http://127.0.0.1:9/v1")
    with django_capture_on_commit_callbacks(execute=False):
        judge_run = runs.judge_run_start(run=trials[0].run, judge_version=version, by=carol)
    JudgeRun.objects.filter(id=judge_run.id).update(status="running", trials_graded=1)
    judge_run.refresh_from_db()
    return judge_run


def _login(client, user):
    assert client.login(username=user.username, password=PASSWORD)


def test_the_judge_run_page_shows_a_live_progress_bar_and_a_cancel_button(client, carol, queued):
    _login(client, carol)
    page = client.get(reverse("judges:judge-run-detail", args=[queued.uuid])).content.decode()
    progress_url = reverse("judges:judge-run-progress", args=[queued.uuid])
    assert f'hx-get="{progress_url}" hx-trigger="every 2s"' in page
    assert '<progress value="1" max="3" aria-label="Trials graded">' in page
    assert "1/3</strong> trials graded" in page and "Cancel judge run" in page
    part = client.get(progress_url, HTTP_HX_REQUEST="true")
    assert part.status_code == 200 and "<html" not in part.content.decode()
    version_page = client.get(reverse("judges:version-detail", args=[queued.judge_version.uuid]))
    assert reverse("judges:judge-run-detail", args=[queued.uuid]) in version_page.content.decode()


def test_the_judge_run_report_counts_verdicts_and_swaps_in_once_it_ends(client, carol, queued):
    """The page's ``#judge-run-report`` counts the version's verdicts on the judge run's
    trials; the progress fragment asks for it (one-shot swap) only on the poll that sees the
    end, never while it runs."""
    _login(client, carol)
    trials = list(Trial.objects.filter(id__in=queued.trial_ids).order_by("id"))
    version = queued.judge_version
    for trial, (status, passed) in zip(
        trials, [("ok", True), ("ok", False), ("error", None)], strict=True
    ):
        Grade.objects.create(
            trial=trial,
            grader=queued.grader,
            judge_version=version,
            status=status,
            passed=passed,
            score=None if passed is None else float(passed),
            reason="r",
            gating=False,
        )
    detail = reverse("judges:judge-run-detail", args=[queued.uuid])
    page = client.get(detail).content.decode()
    assert 'id="judge-run-report"' in page and 'data-count="passed">1<' in page
    assert 'data-count="failed">1<' in page and 'data-count="errored">1<' in page
    assert "50.0%" in page  # 1 of 2 verdicts; the errored grade left out
    progress_url = reverse("judges:judge-run-progress", args=[queued.uuid])
    running = client.get(progress_url, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-select="#judge-run-report"' not in running
    JudgeRun.objects.filter(id=queued.id).update(status="succeeded", trials_graded=3)
    ended = client.get(progress_url, HTTP_HX_REQUEST="true")
    assert ended.status_code == 286
    body = ended.content.decode()
    assert f'hx-get="{detail}" hx-trigger="load" hx-select="#judge-run-report"' in body
    assert 'hx-target="#judge-run-report" hx-swap="outerHTML"' in body


@pytest.mark.parametrize(
    ("costs", "says"),
    [
        ([None, None], "2 judge calls, cost unknown."),
        (["0.001", None], "2 judge calls, cost ≥ $0.0010 (unknown for 1 of 2 calls)."),
        (["0.001", "0.002"], "2 judge calls, cost $0.0030."),
    ],
)
def test_the_judge_run_spend_line_reads_right_when_costs_are_unknown(
    client, carol, queued, costs, says
):
    """An unpriced judge model's calls have no cost: the line says "cost unknown" (it read
    "unknown known, 2 of unknown cost"), a partly known cost is a lower bound."""
    trials = list(Trial.objects.filter(id__in=queued.trial_ids).order_by("id"))
    for i, (trial, cost) in enumerate(zip(trials, costs, strict=False)):
        JudgeCallRecord.objects.create(
            nonce=f"n{i}",
            judge_version=queued.judge_version,
            run=trial.run,
            trial=trial,
            judge_run=queued,
            status="answered",
            cost_usd=cost,
        )
    _login(client, carol)
    page = client.get(reverse("judges:judge-run-detail", args=[queued.uuid])).content.decode()
    line = page.split('class="muted judge-run-spend">', 1)[1].split("</p>", 1)[0]
    assert line == says


def test_the_cancel_button_cancels_and_the_bar_stops_polling(client, carol, queued):
    _login(client, carol)
    url = reverse("judges:judge-run-cancel", args=[queued.uuid])
    response = client.post(url, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 286  # htmx: stop polling
    assert 'hx-trigger="every' not in body and "Cancel judge run" not in body  # no polling
    assert 'hx-select="#judge-run-report"' in body  # the final report swaps in once
    assert "Cancelled by carol" in body and 'data-status="cancelled"' in body
    queued.refresh_from_db()
    assert (queued.status, queued.cancelled_by) == ("cancelled", carol)
    progress = client.get(reverse("judges:judge-run-progress", args=[queued.uuid]))
    assert progress.status_code == 286
    followed = client.post(url, follow=True).content.decode()
    assert "Judge run is cancelled; nothing to cancel." in followed


@pytest.mark.parametrize(("who", "status"), [("bob", 403), ("mallory", 403)])
def test_reviewers_and_outsiders_neither_see_nor_cancel_a_judge_run(
    client, queued, request, who, status
):
    _login(client, request.getfixturevalue(who))
    for name in ("judges:judge-run-detail", "judges:judge-run-progress"):
        assert client.get(reverse(name, args=[queued.uuid])).status_code == status
    assert client.post(reverse("judges:judge-run-cancel", args=[queued.uuid])).status_code == status
    queued.refresh_from_db()
    assert queued.status == "running"


# --- the API ---------------------------------------------------------------------------------


def test_the_api_cancels_a_judge_run_409_once_finished(queued, carol, alice, bob):
    path = f"/api/judge-runs/{queued.uuid}/cancel"
    assert client_for(bob).post(path).status_code == 403
    assert client_for(None).post(path).status_code == 401
    response = client_for(carol).post(path)
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["cancelled_by"], body["trials_graded"]) == (
        "cancelled",
        "carol",
        0,
    )
    assert client_for(alice).post(path).status_code == 200  # again: nothing changes
    JudgeRun.objects.filter(id=queued.id).update(status="succeeded")
    refused = client_for(carol).post(path)
    assert refused.status_code == 409
    assert refused.json()["field"] == "judge_run"
    assert client_for(carol).post("/api/judge-runs/nope/cancel").status_code == 404
    unknown = "/api/judge-runs/00000000-0000-0000-0000-000000000000/cancel"
    assert client_for(carol).post(unknown).status_code == 404


@pytest.mark.parametrize(
    ("how", "said", "via", "by"),
    [
        ("command", "from the command line", "command", None),
        ("system", "by the system", "system", None),
        ("api", "by carol through the API", "api", "carol"),
        ("page", "by carol", "page", "carol"),
    ],
)
def test_every_judge_run_cancel_names_its_actor_in_the_log_the_page_and_the_api(
    client, queued, carol, alice, caplog, how, said, via, by
):
    with caplog.at_level(logging.INFO, logger="judges.runs"):
        if how == "command":
            assert _command("--cancel", str(queued.uuid))[0] == 0
        elif how == "system":
            assert runs.judge_run_cancel(judge_run=queued)
        elif how == "api":
            assert (
                client_for(carol).post(f"/api/judge-runs/{queued.uuid}/cancel").status_code == 200
            )
        else:
            _login(client, carol)
            client.post(reverse("judges:judge-run-cancel", args=[queued.uuid]))
    logged = [r.getMessage() for r in caplog.records if "cancelled" in r.getMessage()]
    assert logged == [f"judge run {queued.uuid} cancelled {said}"]
    body = client_for(alice).get(f"/api/judge-runs/{queued.uuid}/").json()
    assert (body["cancelled"], body["cancelled_via"], body["cancelled_by"]) == (said, via, by)
    _login(client, alice)
    page = client.get(reverse("judges:judge-run-detail", args=[queued.uuid])).content.decode()
    assert f"Cancelled {said}" in page
