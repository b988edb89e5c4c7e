"""Deleting old runs in batches (``evals.prune.runs_prune``, ``manage.py runs_prune``)."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import evals.prune as prune
from core.errors import DomainError
from evals.models import Baseline, Grade, Run, RunPrune, RunSummary, Trial
from evals.prune import run_relations, runs_prune, runs_pruned_count
from evals.run_status import run_status_shown
from labeling.models import Label
from tests.page_text import shows_word, visible_text
from tests.report_builders import add_trial, make_run

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "a", "kind": "regex", "config": {"pattern": "."}}]
NOW = timezone.now()


def _run(
    name: str, *, suite: str = "S", trials: int = 2, days_ago: float = 100, status="succeeded"
):
    run = make_run(
        cases=[(f"{suite}-c{i}", []) for i in range(trials)],
        graders=GRADERS,
        name=name,
        suite=suite,
    )
    for i in range(trials):
        add_trial(run, f"{suite}-c{i}", 1, grades={"a": True})
    at = NOW - timedelta(days=days_ago)
    Run.objects.filter(id=run.id).update(status=status, created_at=at, finished_at=at)
    run.refresh_from_db()
    return run


def _names() -> set[str]:
    return set(Run.objects.values_list("name", flat=True))


def test_every_relation_reaching_a_run_is_classified_and_labels_hold_it():
    kinds = {hold.key: hold.kind for hold in run_relations()}
    assert "unknown" not in kinds.values(), kinds
    assert kinds["labeling.Label.trial"] == "record"
    assert kinds["labeling.PreferenceLabel.pair"] == "record"
    assert kinds["evals.Baseline.run"] == "protect"
    assert kinds["labeling.CalibrationSet.run"] == "protect"
    assert kinds["evals.Grade.trial"] == "cascade"
    assert kinds["evals.RunSummary.run"] == "cascade"  # hidden (related_name="+"), found too
    assert kinds["judges.JudgeCallRecord.trial"] == "cascade"
    assert kinds["labeling.ItemNote.item"] == "record"
    assert kinds["evals.ExperimentVariant.run"] == "protect"


def test_an_unclassified_cascade_from_another_app_holds_the_run(monkeypatch):
    monkeypatch.setattr(prune, "DELETED_RELATIONS", frozenset())
    kinds = {hold.key: hold.kind for hold in run_relations()}
    assert kinds["judges.JudgeCallRecord.trial"] == "unknown"
    assert kinds["evals.Grade.trial"] == "cascade"  # evals' own rows go with the run


def test_prune_by_age_deletes_old_finished_runs_with_their_rows_and_records_it(alice):
    old = _run("old", days_ago=100)
    failed = _run("old-failed", days_ago=90, status="failed")
    _run("new", days_ago=1)
    RunSummary.objects.create(run=old, key="k", body="{}")

    report = runs_prune(older_than=timedelta(days=30), dry_run=False, by=alice, via="command")

    assert _names() == {"new"}
    assert {r.name for r in report.runs} == {"old", "old-failed"}
    assert (report.trials, report.grades) == (4, 4)
    assert Trial.objects.count() == 2 and Grade.objects.count() == 2
    assert not RunSummary.objects.exists()
    record = RunPrune.objects.get(run_uuid=old.uuid)
    assert (record.run_id, record.by, record.via, record.status_before) == (
        None,
        alice,
        "command",
        "succeeded",
    )
    assert (record.trials, record.grades, record.finished_at is not None) == (2, 2, True)
    assert RunPrune.objects.get(run_uuid=failed.uuid).status_before == "failed"
    assert runs_pruned_count(suite=old.suite) == 2


def test_keep_last_keeps_each_suites_newest_finished_runs_and_suite_narrows():
    for i, days in enumerate((50, 40, 30, 20)):
        _run(f"s{i}", suite="S", days_ago=days)
        _run(f"t{i}", suite="T", days_ago=days)
    _run("s-running", suite="S", days_ago=1, status="running")

    report = runs_prune(keep_last=2, suite=Run.objects.get(name="s0").suite, dry_run=False)

    assert {r.name for r in report.runs} == {"s0", "s1"}
    assert _names() == {"s2", "s3", "s-running", "t0", "t1", "t2", "t3"}
    runs_prune(keep_last=3, dry_run=False)
    assert _names() == {"s2", "s3", "s-running", "t1", "t2", "t3"}


def test_baseline_running_and_labeled_runs_are_kept_and_reported(alice):
    base = _run("base")
    _run("running", status="running")
    _run("queued", status="queued")
    labeled = _run("labeled")
    _run("plain")
    Baseline.objects.create(suite=base.suite, run=base)
    Label.objects.create(trial=labeled.trials.first(), reviewer=alice, verdict="pass")

    report = runs_prune(older_than=timedelta(days=30), dry_run=False)

    assert [r.name for r in report.runs] == ["plain"]
    assert _names() == {"base", "running", "queued", "labeled"}
    assert Label.objects.count() == 1
    assert report.kept_lines() == [
        "kept: 1 run is named by a baseline (current or past)",
        "kept: 1 run holds human labels",
    ]


def test_batches_each_delete_at_most_batch_size_trials_in_their_own_transaction(monkeypatch):
    run = _run("big", trials=10)
    _run("other", trials=2, days_ago=1)
    seen: list[tuple[str, int, str]] = []
    real_delete = prune._delete

    def spy(qs, record, report):
        seen.append((qs.model.__name__, qs.count(), connection.savepoint_ids[-1]))
        return real_delete(qs, record, report)

    monkeypatch.setattr(prune, "_delete", spy)
    with CaptureQueriesContext(connection) as queries:
        report = runs_prune(run_uuids=[str(run.uuid)], batch_size=3, dry_run=False)

    trial_batches = [(n, sid) for model, n, sid in seen if model == "Trial"]
    assert [n for n, _ in trial_batches] == [3, 3, 3, 1]
    assert len({sid for _, sid in trial_batches}) == 4  # four transactions
    trial_deletes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('DELETE FROM "evals_trial"')
    ]
    assert len(trial_deletes) == 4
    assert report.trials == 10 and report.grades == 10
    assert report.batches == len(seen) == RunPrune.objects.get().batches
    assert _names() == {"other"} and Trial.objects.count() == 2


def test_an_interrupted_prune_leaves_the_run_pruning_and_the_next_prune_finishes_it(monkeypatch):
    run = _run("big", trials=10)
    real_delete = prune._delete
    calls = []

    def dies_after_first_batch(qs, record, report):
        calls.append(qs.model)
        if len(calls) == 2:
            raise RuntimeError("killed")
        return real_delete(qs, record, report)

    monkeypatch.setattr(prune, "_delete", dies_after_first_batch)
    with pytest.raises(RuntimeError):
        runs_prune(run_uuids=[str(run.uuid)], batch_size=3, dry_run=False)

    run.refresh_from_db()
    assert run.status == "pruning" and not run.is_terminal
    assert run_status_shown(run).label == "pruning"
    assert Trial.objects.filter(run=run).count() == 7  # one whole batch gone, no half
    assert Grade.objects.filter(trial__run=run).count() == 7
    record = RunPrune.objects.get()
    assert (record.finished_at, record.trials, record.batches) == (None, 3, 1)

    monkeypatch.setattr(prune, "_delete", real_delete)
    dry = runs_prune(older_than=timedelta(days=10_000), dry_run=True)
    assert [(r.name, r.resumed, r.trials) for r in dry.runs] == [("big", True, 7)]
    report = runs_prune(older_than=timedelta(days=10_000), dry_run=False)  # matches nothing else

    assert [(r.name, r.resumed, r.status) for r in report.runs] == [("big", True, "succeeded")]
    assert not Run.objects.exists() and not Trial.objects.exists()
    record.refresh_from_db()
    assert (record.trials, record.grades, record.finished_at is not None) == (10, 10, True)
    assert RunPrune.objects.count() == 1


def test_a_label_written_while_a_run_is_pruned_stops_it_and_survives(monkeypatch, alice):
    run = _run("big", trials=4)
    real_delete = prune._delete

    def label_after_first_batch(qs, record, report):
        counts = real_delete(qs, record, report)
        if not Label.objects.exists():
            Label.objects.create(
                trial=Trial.objects.filter(run=run).first(), reviewer=alice, verdict="fail"
            )
        return counts

    monkeypatch.setattr(prune, "_delete", label_after_first_batch)
    report = runs_prune(run_uuids=[str(run.uuid)], batch_size=2, dry_run=False)

    assert len(report.errors) == 1 and "hold human labels" in report.errors[0]
    assert report.runs == []
    run.refresh_from_db()
    assert run.status == "pruning"
    assert Label.objects.count() == 1 and Trial.objects.filter(run=run).count() == 2


def test_dry_run_counts_and_deletes_nothing():
    run = _run("old", trials=3)
    report = runs_prune(older_than=timedelta(days=30), dry_run=True)
    assert [(r.name, r.trials, r.grades) for r in report.runs] == [("old", 3, 3)]
    assert report.bytes_estimate == 30  # three outputs of 10 characters
    assert Trial.objects.filter(run=run).count() == 3 and not RunPrune.objects.exists()
    run.refresh_from_db()
    assert run.status == "succeeded"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "older_than"),
        ({"older_than": timedelta(0)}, "older_than"),
        ({"keep_last": -1}, "keep_last"),
        ({"keep_last": 1, "batch_size": 0}, "batch_size"),
        ({"run_uuids": ["00000000-0000-0000-0000-000000000000"]}, "run_uuids"),
        ({"run_uuids": ["not-a-uuid"]}, "run_uuids"),
    ],
)
def test_bad_input_is_a_domain_error_on_its_field(kwargs, field):
    with pytest.raises(DomainError) as caught:
        runs_prune(dry_run=True, **kwargs)
    assert caught.value.field == field


def test_command_prints_json_and_exits_2_on_bad_input():
    _run("old")
    _run("new", days_ago=1)
    out = io.StringIO()
    call_command("runs_prune", "--older-than", "30", "--dry-run", "--json", stdout=out)
    body = json.loads(out.getvalue())
    assert (body["dry_run"], [r["name"] for r in body["runs"]], body["trials"]) == (
        True,
        ["old"],
        2,
    )
    assert _names() == {"old", "new"}

    out = io.StringIO()
    call_command("runs_prune", "--older-than", "30", "--batch-size", "1", stdout=out)
    assert "deleted 1 runs: 2 trials, 2 grades in" in out.getvalue()
    assert _names() == {"new"}

    for args in ([], ["--keep-last", "1", "--suite", "nope"], ["--run", "nope"]):
        with pytest.raises(CommandError) as caught:
            call_command("runs_prune", *args, stdout=io.StringIO(), stderr=io.StringIO())
        assert caught.value.returncode == 2


def test_pages_show_a_run_being_pruned_as_pruning_and_the_suite_its_pruned_runs(
    client, bob, monkeypatch
):
    gone = _run("gone")
    half = _run("half", trials=4)
    runs_prune(run_uuids=[str(gone.uuid)], dry_run=False)
    real_delete = prune._delete

    def dies_on_second_batch(qs, record, report, calls=[]):  # noqa: B006 - a counter
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("killed")
        return real_delete(qs, record, report)

    monkeypatch.setattr(prune, "_delete", dies_on_second_batch)
    with pytest.raises(RuntimeError):
        runs_prune(run_uuids=[str(half.uuid)], batch_size=2, dry_run=False)

    client.force_login(bob)
    suite_page = client.get(reverse("evals:suite-detail", args=[gone.suite.uuid]))
    assert suite_page.context["page"].runs_pruned == 1
    assert "1 run pruned" in visible_text(suite_page.content.decode())
    run_page = client.get(half.get_absolute_url())
    assert run_page.status_code == 200
    assert shows_word(run_page.content.decode(), "pruning")
    assert client.get(gone.get_absolute_url()).status_code == 404


def test_the_command_exits_3_when_a_run_stopped_half_way_and_prunes_the_others(monkeypatch, alice):
    held = _run("held", trials=4)
    _run("free", trials=2)
    real_delete = prune._delete

    def label_on_held(qs, record, report):
        counts = real_delete(qs, record, report)
        if record.run_uuid == held.uuid and not Label.objects.exists():
            trial = Trial.objects.filter(run=held).first()
            Label.objects.create(trial=trial, reviewer=alice, verdict="fail")
        return counts

    monkeypatch.setattr(prune, "_delete", label_on_held)
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("runs_prune", "--older-than", "30", "--batch-size", "2", stdout=out)

    assert caught.value.returncode == 3 and "hold human labels" in str(caught.value)
    assert "deleted run S/free" in out.getvalue()
    assert _names() == {"held"} and Run.objects.get().status == "pruning"
