"""Settling suspects with more trials, end to end with eager Celery (issue 11, points 2–4):
``gate --top-up`` and its caps, runs that cannot be replayed, redelivery of a round, the
API (202 and polling), the comparison page's "Settle with more trials", adaptive runs and
retrying errored trials.

Every run here is executed by Assay on the simulated target, whose outcome is a pure
function of (seed, case key, attempt): the seeds below were chosen so that case c00 is a
suspect at the first look (head did worse, within noise), and the figures asserted are
exact. Transactional tests: the on-commit enqueues run, so the eager tasks do too.
"""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count
from django.urls import reverse
from django_htmx.http import HttpResponseStopPolling

import evals.comparison.topup as topup_module
import evals.runner.finalize as finalize_module
import evals.runner.start as start_module
from evals.comparison.topup import top_up_advance, top_up_cancel, top_up_start
from evals.models import Case, Run, Suite, TopUp, Trial
from evals.report.selectors import run_report
from evals.runner.finalize import run_cancel
from evals.runner.start import run_start
from evals.tasks import run_chunk_execute
from evals.tasks import top_up_advance as top_up_advance_task
from interop.run_file import run_export_json
from providers.models import ModelPrice
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

GRADERS = [{"key": "exact", "kind": "exact", "config": {}}]
N = 5  # trials per case at the first look; rounds add N then 2N a side (cap 4N)


def make_suite(n_cases: int = 12, name: str = "s") -> Suite:
    suite = Suite.objects.create(name=name, kind=Suite.Kind.REGRESSION)
    for i in range(n_cases):
        Case.objects.create(suite=suite, key=f"c{i:02d}", input=f"q{i}", expected=f"a{i}")
    return suite


def sim(seed: int, **per_case: float) -> dict:
    """A simulated target: every case passes, but those named pass with their rate."""
    return {
        "kind": "simulated",
        "seed": seed,
        "default_pass_probability": 1.0,
        "pass_probability": per_case,
    }


def executed(suite: Suite, name: str, target: dict, n: int = N, **kwargs) -> Run:
    run = run_start(
        suite=suite, name=name, target=target, graders=GRADERS, trials_per_case=n, **kwargs
    )
    run.refresh_from_db()
    return run


@pytest.fixture
def drop():
    """c00 truly dropped (1.0 -> 0.3); at the first look 5/5 -> 3/5, a suspect."""
    suite = make_suite()
    return executed(suite, "base", sim(1)), executed(suite, "head", sim(1003, c00=0.3))


@pytest.fixture
def same():
    """The same pipeline twice (c00 at 0.8 on both): 5/5 -> 4/5 at the first look."""
    suite = make_suite()
    return executed(suite, "base", sim(1, c00=0.8)), executed(suite, "head", sim(2, c00=0.8))


def gate(*args: str, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        call_command("gate", *args)
    return exit_info.value.code, capsys.readouterr().out


def gate_json(base: Run, head: Run, *extra: str, capsys) -> tuple[int, dict]:
    code, out = gate(
        "--base", str(base.uuid), "--head", str(head.uuid), "--json", *extra, capsys=capsys
    )
    return code, json.loads(out)


def c00(run: Run):
    return Trial.objects.filter(run=run, case__key="c00")


def test_the_first_look_names_c00_a_suspect_that_more_trials_would_settle(drop, capsys):
    base, head = drop
    code, out = gate_json(base, head, capsys=capsys)
    assert code == 0
    assert out["decision"]["verdict"] == "undecided"
    assert [s["key"] for s in out["decision"]["suspects"]] == ["c00"]
    assert out["decision"]["next_round"] == {"c00": [5, 5]}


def test_gate_top_up_settles_a_true_drop_as_a_block_adding_ordinary_trials(drop, capsys):
    base, head = drop
    before = set(Trial.objects.values_list("id", flat=True))

    code, out = gate_json(base, head, "--top-up", capsys=capsys)

    assert code == 1
    decision = out["decision"]
    assert decision["verdict"] == "block"
    assert decision["sentence"].startswith("Blocked: case c00 dropped from 20/20 to 9/20")
    top_up = TopUp.objects.get(base=base, head=head)
    assert (top_up.status, top_up.rounds_done, top_up.trials_added) == ("settled", 2, 30)
    for run in (base, head):
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED
        added = Trial.objects.filter(run=run, top_up=top_up)
        # Only the suspect gets trials: N then 2N, numbered after the first N attempts.
        assert set(added.values_list("case__key", flat=True)) == {"c00"}
        assert sorted(added.values_list("top_up_round", "attempt")) == [
            (1, a) for a in range(6, 11)
        ] + [(2, a) for a in range(11, 21)]
        assert list(c00(run).order_by("attempt").values_list("attempt", flat=True)) == list(
            range(1, 21)
        )
        assert run.trials_total == 12 * N + 15
    # Nothing deleted: every trial of the first look is still there, and unmarked.
    assert before <= set(Trial.objects.values_list("id", flat=True))
    assert not Trial.objects.filter(id__in=before, top_up__isnull=False).exists()
    # The added trials are the run's trials: its report counts them in the pass rates.
    report = run_report(run=head)
    assert report.trials.total == 12 * N + 15
    row = next(r for r in report.cases if r.key == "c00")
    assert (row.passed, row.graded) == (9, 20)
    assert report.overall.trials_passed == 11 * N + 9
    assert report.overall.trials_graded == 12 * N + 15


def test_the_run_page_shows_the_trials_a_top_up_added(drop, capsys, client, carol):
    base, head = drop
    gate_json(base, head, "--top-up", capsys=capsys)
    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", args=[head.uuid])).content.decode()
    assert "30 trials added to settle suspects of" in html
    assert "head vs base" in html
    assert "20 trials" in html or ">20<" in html  # c00's row counts 20 trials


def test_gate_top_up_on_the_same_pipeline_twice_passes(same, capsys):
    base, head = same
    code, first = gate_json(base, head, capsys=capsys)
    assert (code, first["decision"]["verdict"]) == (0, "undecided")

    code, out = gate_json(base, head, "--top-up", capsys=capsys)

    assert code == 0
    assert out["decision"]["verdict"] == "pass"
    top_up = TopUp.objects.get(base=base, head=head)
    assert top_up.status == TopUp.Status.SETTLED and top_up.trials_added > 0


def test_gate_top_up_again_reports_the_settled_decision_without_new_trials(drop, capsys):
    base, head = drop
    gate_json(base, head, "--top-up", capsys=capsys)
    trials = Trial.objects.count()

    code, out = gate_json(base, head, "--top-up", capsys=capsys)

    assert code == 1 and out["decision"]["verdict"] == "block"
    assert Trial.objects.count() == trials
    assert TopUp.objects.count() == 1


def test_once_settled_every_surface_shows_the_settled_decision(drop, capsys, client, carol):
    """The page, plain ``gate`` (no --top-up), POST /api/gate and GET /api/comparisons/ all
    read a settled top-up's trials (``comparison_decision``): one story everywhere."""
    base, head = drop
    gate_json(base, head, "--top-up", capsys=capsys)

    code, out = gate_json(base, head, capsys=capsys)
    assert code == 1 and out["decision"]["sentence"].startswith(
        "Blocked: case c00 dropped from 20/20"
    )
    client.force_login(carol)
    api = client.post(
        "/api/gate",
        {"base": str(base.uuid), "head": str(head.uuid)},
        content_type="application/json",
    ).json()
    assert api["decision"]["verdict"] == "block"
    listed = client.get(f"/api/comparisons/?base={base.uuid}&head={head.uuid}").json()
    assert listed["decision"]["sentence"] == api["decision"]["sentence"]
    page = client.get(f"/runs/{head.uuid}/compare/{base.uuid}/").content.decode()
    assert "dropped from 20/20 to 9/20" in page
    # A non-default policy is not what the top-up decided under: the runs' own trials.
    code, out = gate_json(base, head, "--allow-untrusted", capsys=capsys)
    assert out["decision"]["verdict"] == "undecided"


def test_an_unwritable_markdown_path_or_a_bad_timeout_is_a_bad_argument(drop, capsys):
    base, head = drop
    ids = ("--base", str(base.uuid), "--head", str(head.uuid))
    with pytest.raises(CommandError, match="--markdown: cannot write") as info:
        call_command("gate", *ids, "--markdown", "/nonexistent/dir/x.md")
    assert info.value.returncode == 3  # never 1, which would read as a regression
    for timeout in ("-5", "0", "nan"):
        with pytest.raises(CommandError) as info:
            call_command("gate", *ids, "--top-up", "--timeout", timeout)
        assert info.value.returncode == 3
    assert not TopUp.objects.exists()


def test_max_trials_per_case_keeps_only_the_whole_rounds_under_it(drop, capsys):
    base, head = drop
    code, out = gate_json(base, head, "--top-up", "--max-trials-per-case", "10", capsys=capsys)

    top_up = TopUp.objects.get()
    assert top_up.plan["rounds"] == [5] and top_up.max_trials_per_case == 10
    assert top_up.rounds_done == 1
    assert c00(head).count() == 10 and c00(base).count() == 10
    # The last look of the design is final: no "undecided" is left.
    assert out["decision"]["verdict"] in ("block", "pass")
    assert code == {"block": 1, "pass": 0}[out["decision"]["verdict"]]


def test_a_top_up_ended_by_its_trial_cap_decides_at_its_last_look_and_says_what_it_could_miss(
    same, capsys
):
    # The cap keeps one round; c00 (0.8 on both sides) is still worse in head after it. The
    # design's last look is taken: that look's decision (pass), with what it could have
    # missed, never "N more trials would settle it" beside the pass.
    base, head = same
    code, out = gate_json(base, head, "--top-up", "--max-trials-per-case", "10", capsys=capsys)
    decision = out["decision"]
    assert (code, decision["exit_code"], decision["verdict"]) == (0, 0, "pass")
    assert decision["sentence"].startswith(
        "No measurable regression at the design's last look (top-up round 1: no trial can be "
        "added): 1 case(s) did worse in head"
    )
    assert "could have been missed (80% power)" in decision["sentence"]
    assert "(one-sided p = 0.29 at top-up round 1)" in decision["sentence"]
    [suspect] = decision["suspects"]
    assert (suspect["look"], suspect["settle_trials"], suspect["missable"]) == (1, None, 0.59)
    assert "settle" not in json.dumps(decision["sentence"])


def test_max_trials_per_case_below_the_first_trials_is_a_bad_argument(drop):
    base, head = drop
    with pytest.raises(CommandError, match="at least the first 5 trials per case") as exc:
        call_command(
            "gate", "--base", str(base.uuid), "--head", str(head.uuid), "--top-up",
            "--max-trials-per-case", "3",
        )  # fmt: skip
    assert exc.value.returncode == 3
    assert not TopUp.objects.exists()


def priced():
    """The simulated model priced (a project override), so its trials have a cost."""
    ModelPrice.objects.create(
        model="simulated", input_usd_per_mtok=Decimal("1000"), output_usd_per_mtok=Decimal("1000")
    )


def test_max_cost_stops_before_a_round_that_would_pass_it_and_cannot_decide(capsys):
    priced()
    suite = make_suite()
    executed(suite, "base", sim(1)), executed(suite, "head", sim(1003, c00=0.3))
    assert not Trial.objects.filter(cost_usd__isnull=True).exists()

    code, out = gate(
        "--base", "s/base", "--head", "s/head", "--top-up", "--max-cost", "0.0001", capsys=capsys
    )

    assert code == 2
    assert out.startswith("gate: cannot decide (exit 2)")
    assert "would pass the cost cap of $0.0001" in out
    top_up = TopUp.objects.get()
    assert (top_up.status, top_up.trials_added) == (TopUp.Status.CAPPED, 0)
    assert not Trial.objects.filter(top_up__isnull=False).exists()


def test_max_cost_lets_rounds_run_while_they_fit(capsys):
    priced()
    suite = make_suite()
    executed(suite, "base", sim(1)), executed(suite, "head", sim(1003, c00=0.3))
    code, _ = gate(
        "--base", "s/base", "--head", "s/head", "--top-up", "--max-cost", "100", capsys=capsys
    )
    assert code == 1
    assert TopUp.objects.get().status == TopUp.Status.SETTLED


def test_max_cost_on_trials_of_unknown_cost_is_a_bad_argument(drop):
    base, head = drop  # the simulated model has no price: cost unknown
    with pytest.raises(CommandError, match="cost cap cannot be kept") as exc:
        call_command(
            "gate", "--base", str(base.uuid), "--head", str(head.uuid), "--top-up",
            "--max-cost", "1",
        )  # fmt: skip
    assert exc.value.returncode == 3


def no_worker_queue(sent: list[int]):
    """A stand-in for a module's ``outbox_enqueue``: the ``top_up_advance`` messages it would
    write are kept in ``sent`` (their top-up ids), not sent."""

    def enqueue(task, top_up_id: int, **kwargs) -> None:
        sent.append(top_up_id)

    return enqueue


@pytest.fixture
def no_worker(monkeypatch):
    """No worker takes the top-up's start message: it is kept, not run."""
    sent: list[int] = []
    monkeypatch.setattr(topup_module, "outbox_enqueue", no_worker_queue(sent))
    return sent


def test_timeout_exits_2_and_leaves_the_top_up_running(drop, no_worker):
    base, head = drop
    with pytest.raises(CommandError, match=r"still running after 0.3 s") as exc:
        call_command(
            "gate", "--base", str(base.uuid), "--head", str(head.uuid), "--top-up",
            "--timeout", "0.3",
        )  # fmt: skip
    assert exc.value.returncode == 2
    top_up = TopUp.objects.get()
    assert top_up.status == TopUp.Status.QUEUED and no_worker == [top_up.id]


def test_an_imported_run_is_decided_on_the_trials_there_are(drop, capsys):
    base, head = drop
    Run.objects.filter(id=base.id).update(source=Run.Source.IMPORTED)

    code, out = gate("--base", str(base.uuid), "--head", str(head.uuid), "--top-up", capsys=capsys)

    # All of alpha at the one look there is: 5/5 -> 3/5 is within noise, exit 0.
    assert code == 0
    assert "suspect: c00: 5/5 -> 3/5" in out
    assert "note: no trial can be added (run 'base' was imported: Assay cannot run it again)" in out
    assert "unresolved: c00 (a new run of about " in out and " trials a side)" in out
    assert not TopUp.objects.exists() and not Trial.objects.filter(attempt__gt=N).exists()


def test_a_run_file_is_decided_on_the_trials_there_are(drop, capsys, tmp_path):
    base, head = drop
    path = tmp_path / "base.json"
    path.write_text(run_export_json(run=base), encoding="utf-8")

    code, out = gate_json(base, head, capsys=capsys)  # as a run, for the figures
    code_file, out_file = gate(
        "--base", str(path), "--head", str(head.uuid), "--top-up", "--json", capsys=capsys
    )
    decision = json.loads(out_file)["decision"]
    assert code_file == 0
    assert decision["notes"][0].startswith(
        "no trial can be added (a run read from a file cannot be replayed)"
    )
    (suspect,) = decision["suspects"]
    assert suspect["key"] == "c00" and suspect["settle_trials"] > 0
    settle = suspect["settle_trials"]
    assert f"c00 (a new run of about {settle} trials a side)" in decision["notes"][0]
    assert not TopUp.objects.exists()


def test_top_up_with_a_policy_flag_is_a_bad_argument(drop):
    base, head = drop
    with pytest.raises(CommandError, match="drop --allow-untrusted") as exc:
        call_command(
            "gate", "--base", str(base.uuid), "--head", str(head.uuid), "--top-up",
            "--allow-untrusted",
        )  # fmt: skip
    assert exc.value.returncode == 3


# -- redelivery ------------------------------------------------------------------------


def test_a_redelivered_advance_adds_a_round_once(drop, no_worker, monkeypatch):
    """The same task message twice while the round's trials wait for a worker: the second
    finds the runs running and does nothing; once the trials are done the rounds go on."""
    base, head = drop
    top_up = top_up_start(base=base, head=head)
    held: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(
        start_module,
        "_chunks_enqueue",
        lambda run_id, chunks: held.extend((run_id, ids) for ids in chunks),
    )

    top_up_advance(top_up_id=top_up.id)
    top_up_advance(top_up_id=top_up.id)

    top_up.refresh_from_db()
    assert (top_up.rounds_done, top_up.trials_added) == (1, 10)
    assert Trial.objects.filter(top_up=top_up).count() == 10
    assert len(held) == 2  # one chunk a run, enqueued once

    monkeypatch.undo()  # the worker is back: its chunks run, finalize moves the top-up on
    for run_id, ids in held:
        run_chunk_execute.delay(run_id, ids)
    top_up.refresh_from_db()
    assert (top_up.status, top_up.rounds_done, top_up.trials_added) == ("settled", 2, 30)
    assert c00(head).count() == 20 and c00(base).count() == 20


def test_two_workers_deciding_the_same_look_add_its_round_once(drop, no_worker, monkeypatch):
    """Both find the runs finished and decide look 0; the other one adds round 1 and its
    trials finish (the runs are finished again) before this one claims: the
    compare-and-set on the round lets this one add nothing."""
    base, head = drop
    top_up = top_up_start(base=base, head=head)
    monkeypatch.setattr(finalize_module, "outbox_enqueue", no_worker_queue(no_worker))
    decide = topup_module.top_up_decide
    calls = []

    def racing_decide(*, top_up):
        result = decide(top_up=top_up)
        if not calls:
            calls.append(1)
            top_up_advance(top_up_id=top_up.id)  # the other worker, between decide and claim
        return result

    monkeypatch.setattr(topup_module, "top_up_decide", racing_decide)
    top_up_advance(top_up_id=top_up.id)

    top_up.refresh_from_db()
    head.refresh_from_db()
    assert head.status == Run.Status.SUCCEEDED  # round 1 ran: only the claim stood in the way
    assert (top_up.rounds_done, top_up.trials_added) == (1, 10)
    assert Trial.objects.filter(top_up=top_up).count() == 10


def test_a_decision_taken_on_a_look_another_worker_has_moved_past_is_not_stored(
    drop, no_worker, monkeypatch
):
    """Two workers read the top-up at look 0; the other one adds round 1 (and its trials
    finish) while this one is still deciding look 0. This one's decision, taken on look 0's
    trials, must not become the stored decision of a top-up now at look 1: the stored
    decision once said "no measurable regression" while the gate on the same runs said
    "block" (a flaky worker test under duplicate messages)."""
    base, head = drop
    top_up = top_up_start(base=base, head=head)
    monkeypatch.setattr(finalize_module, "outbox_enqueue", no_worker_queue(no_worker))
    decide = topup_module.top_up_decide
    calls = []

    def racing_decide(*, top_up):
        comparison, decision = decide(top_up=top_up)
        if not calls:
            calls.append(1)
            top_up_advance(top_up_id=top_up.id)  # the other worker adds round 1 meanwhile
            # and this one's look-0 reading would settle (as a near-threshold draw can)
            decision = dataclasses.replace(decision, verdict="pass", next_round={})
        return comparison, decision

    monkeypatch.setattr(topup_module, "top_up_decide", racing_decide)
    top_up_advance(top_up_id=top_up.id)

    top_up.refresh_from_db()
    assert (top_up.rounds_done, top_up.trials_added) == (1, 10)
    assert top_up.status == TopUp.Status.RUNNING and top_up.decision is None
    monkeypatch.setattr(topup_module, "top_up_decide", decide)
    top_up_advance(top_up_id=top_up.id)  # look 1 decided on look 1's trials
    top_up.refresh_from_db()
    assert top_up.rounds_done == 2 or top_up.status == TopUp.Status.SETTLED


def test_the_task_redelivered_after_the_end_changes_nothing(drop, capsys):
    base, head = drop
    gate_json(base, head, "--top-up", capsys=capsys)
    top_up = TopUp.objects.get()
    trials = Trial.objects.count()
    top_up_advance_task.apply(args=[top_up.id])
    top_up_advance_task.apply(args=[top_up.id])
    assert Trial.objects.count() == trials
    top_up.refresh_from_db()
    assert (top_up.status, top_up.rounds_done) == ("settled", 2)


def test_a_second_top_up_on_a_shared_base_waits_for_the_first_ones_round(
    drop, no_worker, monkeypatch
):
    """Two comparisons against one baseline: while the first top-up's round runs the base
    is "running"; the second top-up is not refused, it waits, and both settle on their own
    trials."""
    base, head = drop
    other = executed(base.suite, "other", sim(1004, c00=0.3))  # c00: 5/5 -> 3/5 too
    first = top_up_start(base=base, head=head)
    held: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(
        start_module,
        "_chunks_enqueue",
        lambda run_id, chunks: held.extend((run_id, ids) for ids in chunks),
    )
    top_up_advance(top_up_id=first.id)
    base.refresh_from_db()
    assert base.status == Run.Status.RUNNING

    second = top_up_start(base=base, head=other)

    monkeypatch.undo()
    for run_id, ids in sorted(held, key=lambda h: h[0] != base.id):  # the base's chunk first
        run_chunk_execute.delay(run_id, ids)
    for top_up in (first, second):
        top_up.refresh_from_db()
        assert top_up.status == TopUp.Status.SETTLED, top_up.error
        assert Trial.objects.filter(run=base, top_up=top_up).count() == top_up.trials_added / 2
    assert c00(base).count() == N + (first.trials_added + second.trials_added) // 2
    assert first.decision["decision"]["sentence"].startswith(
        "Blocked: case c00 dropped from 20/20 to 9/20"
    )


def test_a_run_cancelled_mid_top_up_ends_it_and_the_gate_cannot_decide(
    drop, no_worker, monkeypatch, carol
):
    base, head = drop
    top_up = top_up_start(base=base, head=head)
    held: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(
        start_module,
        "_chunks_enqueue",
        lambda run_id, chunks: held.extend((run_id, ids) for ids in chunks),
    )
    top_up_advance(top_up_id=top_up.id)
    monkeypatch.undo()

    run_cancel(run=head)
    for run_id, ids in held:
        run_chunk_execute.delay(run_id, ids)  # the base's round ends; the head's was cancelled

    top_up.refresh_from_db()
    assert top_up.status == TopUp.Status.FAILED and top_up.error == "run 'head' was cancelled"
    result = client_for(carol).get(f"/api/top-ups/{top_up.uuid}/").json()["result"]
    assert result["decision"]["exit_code"] == 2
    assert result["decision"]["sentence"].startswith(
        "Cannot decide: the top-up failed: run 'head' was cancelled; "
    )


# -- API --------------------------------------------------------------------------------


def test_api_gate_top_up_answers_202_and_the_status_url_reaches_the_decision(drop, carol, capsys):
    base, head = drop
    client = client_for(carol)
    response = client.post(
        "/api/gate", {"head": str(head.uuid), "base": str(base.uuid), "top_up": True}, format="json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    top_up = TopUp.objects.get()
    assert body["uuid"] == str(top_up.uuid)
    assert response["Location"] == f"/api/top-ups/{top_up.uuid}/"
    assert body["url"].endswith(f"/api/top-ups/{top_up.uuid}/")

    polled = client.get(body["url"]).json()
    assert polled["status"] == "settled" and polled["rounds_done"] == 2
    assert polled["trials_added"] == 30
    # The usual gate body, the one the command prints for the same top-up.
    code, printed = gate_json(base, head, "--top-up", capsys=capsys)
    assert polled["result"] == printed and code == polled["result"]["decision"]["exit_code"] == 1


def test_api_gate_top_up_is_for_engineers_and_leads(drop, bob, alice, mallory):
    base, head = drop
    body = {"head": str(head.uuid), "base": str(base.uuid), "top_up": True}
    assert client_for(bob).post("/api/gate", body, format="json").status_code == 403
    assert client_for(mallory).post("/api/gate", body, format="json").status_code == 403
    assert not TopUp.objects.exists()
    assert client_for(alice).post("/api/gate", body, format="json").status_code == 202
    # A reviewer may follow it (the comparison page shows it to them too).
    url = f"/api/top-ups/{TopUp.objects.get().uuid}/"
    assert client_for(bob).get(url).json()["status"] == "settled"
    assert client_for(mallory).get(url).status_code == 403
    assert client_for(bob).get("/api/top-ups/not-a-uuid/").status_code == 404


def test_api_gate_top_up_on_a_run_file_decides_on_the_trials_there_are(drop, carol):
    base, head = drop
    body = {
        "head": str(head.uuid),
        "base_file": json.loads(run_export_json(run=base)),
        "top_up": True,
    }
    response = client_for(carol).post("/api/gate", body, format="json")
    assert response.status_code == 200, response.content
    decision = response.json()["decision"]
    assert decision["exit_code"] == 0 and decision["notes"][0].startswith("no trial can be added")
    assert not TopUp.objects.exists()


def test_api_gate_top_up_refuses_policy_flags(drop, carol):
    base, head = drop
    body = {"head": str(head.uuid), "base": str(base.uuid), "top_up": True, "allow_untrusted": True}
    response = client_for(carol).post("/api/gate", body, format="json")
    assert response.status_code == 400 and "top_up" in response.json()


# -- the comparison page ------------------------------------------------------------------


def test_the_settle_button_starts_a_top_up_and_the_live_partial_shows_it_settle(
    drop, client, carol, no_worker
):
    base, head = drop
    page_url = reverse("evals:comparison", args=[head.uuid, base.uuid])
    live_url = reverse("evals:comparison-top-up", args=[head.uuid, base.uuid])
    client.force_login(carol)
    html = client.get(page_url).content.decode()
    assert 'id="settle"' in html and "Settle with more trials" in html
    assert 'data-verdict="undecided"' in html

    response = client.post(reverse("evals:comparison-settle", args=[head.uuid, base.uuid]))
    assert response.status_code == 302 and response["Location"] == page_url
    top_up = TopUp.objects.get()
    assert top_up.started_by == carol

    # While the rounds run the page polls the partial, and the button is gone.
    html = client.get(page_url).content.decode()
    assert 'id="settle"' not in html and "Settling suspects: round 0" in html
    live = client.get(live_url, HTTP_HX_REQUEST="true")
    assert live.status_code == 200 and 'hx-trigger="every 2s"' in live.content.decode()

    top_up_advance_task.delay(top_up.id)  # the worker takes it: every round, eagerly

    live = client.get(live_url, HTTP_HX_REQUEST="true")
    assert live.status_code == HttpResponseStopPolling.status_code  # the polling stops
    text = live.content.decode()
    assert 'data-status="settled"' in text
    assert "Blocked: case c00 dropped from 20/20 to 9/20" in text
    assert "2 rounds, 30 trials added (exit 1)" in text
    # Loaded again, the page tells one story: the decision and figures of the top-up.
    html = client.get(page_url).content.decode()
    assert 'data-exit-code="1" data-verdict="block"' in html
    gate_card = html[html.index('id="gate-decision"') : html.index('id="headline"')]
    assert "Blocked: case c00 dropped from 20/20 to 9/20" in gate_card
    assert "Settle with more trials" not in html


def test_a_reviewer_sees_no_settle_button_and_cannot_settle(drop, client, bob):
    base, head = drop
    client.force_login(bob)
    html = client.get(reverse("evals:comparison", args=[head.uuid, base.uuid])).content.decode()
    assert 'id="settle"' not in html
    response = client.post(reverse("evals:comparison-settle", args=[head.uuid, base.uuid]))
    assert response.status_code == 403
    assert not TopUp.objects.exists()


def test_the_page_says_why_an_imported_run_cannot_be_settled(drop, client, carol):
    base, head = drop
    Run.objects.filter(id=base.id).update(source=Run.Source.IMPORTED)
    client.force_login(carol)
    html = client.get(reverse("evals:comparison", args=[head.uuid, base.uuid])).content.decode()
    assert 'id="settle"' not in html
    assert "More trials cannot be added here: run &#x27;base&#x27; was imported" in html


# -- adaptive runs ----------------------------------------------------------------------


def test_run_suite_against_a_baseline_spends_trials_only_on_uncertain_cases(
    tmp_path, client, carol
):
    suite = make_suite()
    base = executed(suite, "base", sim(1))
    target = tmp_path / "target.json"
    target.write_text(json.dumps(sim(1003, c00=0.3)), encoding="utf-8")
    graders = tmp_path / "graders.json"
    graders.write_text(json.dumps(GRADERS), encoding="utf-8")

    call_command(
        "run_suite", "s", "--target", str(target), "--graders", str(graders), "--trials", "5",
        "--name", "adaptive", "--against", "s/base", "--wait", "--timeout", "20",
    )  # fmt: skip

    run = Run.objects.get(name="adaptive")
    assert run.status == Run.Status.SUCCEEDED and run.against == base
    top_up = TopUp.objects.get(head=run)
    assert top_up.adaptive and top_up.base == base and top_up.status == TopUp.Status.SETTLED
    # The first round: N per case; then more only for the uncertain case, until settled.
    per_case = dict(
        Trial.objects.filter(run=run)
        .values("case__key")
        .annotate(n=Count("id"))
        .values_list("case__key", "n")
    )
    assert per_case == {**{f"c{i:02d}": N for i in range(1, 12)}, "c00": 20}
    assert top_up.decision["decision"]["verdict"] == "block"
    design = top_up.decision["design"]
    assert design["spent_trials"] == 2 * 12 * N + 30
    assert 0 < design["power"] <= 1 and design["power_se"] < 0.05
    assert design["fixed_trials"] == 2 * 12 * design["fixed_trials_per_case"]

    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", args=[run.uuid])).content.decode()
    assert "Adaptive run: after the first 5 trials per case, 30 more trials went to" in html
    assert (
        f"Trials spent: {design['spent_trials']}, both runs; a fixed design of the same power "
        f"would need about {design['fixed_trials']}"
    ) in html
    assert "(Monte Carlo SE, 200 simulations)" in html


def test_api_run_start_against_a_baseline_is_adaptive(carol):
    suite = make_suite(6)
    base = executed(suite, "base", sim(1, c00=0.8))
    body = {
        "suite": str(suite.uuid),
        "name": "adaptive",
        "target": sim(2, c00=0.8),
        "graders": GRADERS,
        "trials_per_case": N,
        "against": str(base.uuid),
    }
    response = client_for(carol).post("/api/runs/start", body, format="json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(name="adaptive")
    top_up = TopUp.objects.get(head=run)
    assert top_up.adaptive and top_up.is_terminal
    # Only cases still uncertain after the first N got more trials.
    extra = set(Trial.objects.filter(run=run, attempt__gt=N).values_list("case__key", flat=True))
    assert extra <= {"c00"}
    assert top_up.decision["decision"]["verdict"] == "pass"


def test_an_adaptive_run_whose_baseline_cannot_serve_any_more_says_why_and_ends(
    capsys, monkeypatch, client, carol
):
    suite = make_suite(4)
    base = executed(suite, "base", sim(1))
    # Servable when the run starts; not any more when its first round is done.
    monkeypatch.setattr(
        topup_module,
        "run_replay_refusal",
        lambda run: (
            "run 'base' was imported: Assay cannot run it again" if run.id == base.id else None
        ),
    )

    run = executed(suite, "adaptive", sim(2), against=base)

    top_up = TopUp.objects.get(head=run)
    assert top_up.status == TopUp.Status.FAILED and top_up.trials_added == 0
    assert "was imported" in top_up.error
    client.force_login(carol)
    html = client.get(reverse("evals:run-detail", args=[run.uuid])).content.decode()
    assert "(failed: no trial could be added: base: run &#x27;base&#x27; was imported" in html


def test_an_adaptive_run_against_a_run_of_another_suite_is_refused():
    base = executed(make_suite(3, name="a"), "base", sim(1))
    with pytest.raises(Exception, match="is of another suite"):
        run_start(
            suite=make_suite(3, name="b"), name="x", target=sim(2), graders=GRADERS,
            trials_per_case=N, against=base,
        )  # fmt: skip


# -- retrying errored trials --------------------------------------------------------------

# Seed 7 at error rate 0.1 errs five of 36 trials (c03, c05, c06 once, c11 twice); the
# attempts that replace them (4, and 5 for c11) do not err.
FLAKY = {"kind": "simulated", "seed": 7, "default_pass_probability": 1.0, "error_probability": 0.1}


@pytest.fixture
def failed_run() -> Run:
    run = executed(make_suite(), "flaky", FLAKY, n=3)
    assert run.status == Run.Status.FAILED and run.trials_errored == 5
    return run


def assert_retried(run: Run, errored: set[int]) -> None:
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.trials_errored == 0
    assert run.error_message == ""
    # The replaced attempts are history: 36 of 36 planned trials, as before the retry.
    assert (run.trials_finished, run.trials_total) == (36, 36)
    old = Trial.objects.filter(id__in=errored)
    # Kept as history, each pointing at the attempt that replaced it.
    assert old.count() == 5 and all(t.status == "error" and t.replaced_by_id for t in old)
    new = Trial.objects.filter(id__in=[t.replaced_by_id for t in old])
    assert all(
        t.status == "ok" and t.case_id == o.case_id
        for t, o in zip(new.order_by("id"), old.order_by("replaced_by_id"), strict=True)
    )
    assert sorted(new.values_list("case__key", "attempt")) == [
        ("c03", 4),
        ("c05", 4),
        ("c06", 4),
        ("c11", 4),
        ("c11", 5),
    ]
    report = run_report(run=run)
    assert (report.trials.total, report.trials.errored, report.trials.retried) == (36, 0, 5)
    assert (report.overall.trials_graded, report.overall.trials_passed) == (36, 36)


def errored_ids(run: Run) -> set[int]:
    return set(Trial.objects.filter(run=run, status="error").values_list("id", flat=True))


def test_run_retry_command_keeps_the_errored_attempts_and_finalizes_again(failed_run, capsys):
    errored = errored_ids(failed_run)
    call_command("run_retry", str(failed_run.uuid), "--wait", "--timeout", "10")
    assert "5 errored trial(s) retried; now succeeded" in capsys.readouterr().out
    assert_retried(failed_run, errored)
    with pytest.raises(CommandError, match="no errored trial to retry"):
        call_command("run_retry", str(failed_run.uuid))


def test_api_retry_answers_202_and_retries(failed_run, carol, bob):
    errored = errored_ids(failed_run)
    url = f"/api/runs/{failed_run.uuid}/retry"
    assert client_for(bob).post(url).status_code == 403
    response = client_for(carol).post(url)
    assert response.status_code == 202, response.content
    assert_retried(failed_run, errored)
    assert client_for(carol).post(url).status_code == 400


def test_the_retry_button_retries(failed_run, client, carol):
    errored = errored_ids(failed_run)
    client.force_login(carol)
    page = reverse("evals:run-detail", args=[failed_run.uuid])
    assert 'id="retry-errored"' in client.get(page).content.decode()
    response = client.post(reverse("evals:run-retry", args=[failed_run.uuid]))
    assert response.status_code == 302 and response["Location"] == page
    assert_retried(failed_run, errored)
    html = client.get(page).content.decode()
    assert 'id="retry-errored"' not in html
    assert "5 errored trials retried: kept as history, left out of every figure." in html


def test_cancelling_a_top_up_cancels_its_queued_trials_and_its_chunks_call_nothing(
    drop, no_worker, monkeypatch
):
    base, head = drop
    top_up = top_up_start(base=base, head=head)
    held: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(
        start_module,
        "_chunks_enqueue",
        lambda run_id, chunks: held.extend((run_id, ids) for ids in chunks),
    )
    top_up_advance(top_up_id=top_up.id)  # round 1: its trials wait for a worker
    totals = dict(Run.objects.filter(id__in=[base.id, head.id]).values_list("id", "trials_total"))
    added = Trial.objects.filter(top_up=top_up).count()
    assert added == 10 and len(held) == 2

    assert top_up_cancel(top_up=top_up) is True

    assert Trial.objects.filter(top_up=top_up, status=Trial.Status.CANCELLED).count() == added
    for run in (base, head):
        run.refresh_from_db()
        assert run.trials_total == totals[run.id] - added // 2  # out of the run's count
        assert run.status == Run.Status.SUCCEEDED and run.trials_finished == run.trials_total
    monkeypatch.undo()
    for run_id, ids in held:  # the worker comes back: the chunks find nothing to call
        run_chunk_execute.delay(run_id, ids)
    assert not Trial.objects.filter(top_up=top_up, status__in=Trial.FINISHED).exists()
    assert top_up_cancel(top_up=top_up) is False


def test_a_replayable_collapse_no_first_look_could_block_cannot_be_decided_without_a_top_up(
    capsys,
):
    # 3 cases x 1 trial, every case 1/1 -> 0/1, on runs that can be replayed: the first look
    # could not block any head, so "no measurable regression yet" (exit 0) said nothing; it
    # is "cannot decide yet" (exit 2) until a top-up has run, and the top-up blocks.
    suite = make_suite(3)
    base = executed(suite, "base", sim(1), n=1)
    head = executed(suite, "head", sim(2, c00=0.0, c01=0.0, c02=0.0), n=1)
    code, out = gate_json(base, head, capsys=capsys)
    decision = out["decision"]
    assert (code, decision["verdict"]) == (2, "cannot decide yet")
    assert decision["sentence"].startswith("Cannot decide yet: at the first look no head")
    assert "gate --top-up adds trials to them" in decision["sentence"]
    assert decision["next_round"]
    code, out = gate_json(base, head, "--top-up", capsys=capsys)
    assert (code, out["decision"]["verdict"]) == (1, "block")
