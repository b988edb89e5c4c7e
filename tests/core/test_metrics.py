"""/metrics: who may read it (a token, a network, nobody else), what it answers (every
process's counters, the database's gauges, a failing source reported, not zeroed), and the
example Grafana dashboard naming only metrics that exist."""

from __future__ import annotations

import asyncio
import json
import random
import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from prometheus_client import REGISTRY

import evals.metrics  # noqa: F401 - imported for their instruments
import providers.metrics  # noqa: F401 - imported for their instruments
from core.metrics import exposition
from core.metrics.access import DEFAULT_NETWORKS, networks_parse
from core.metrics.exposition import metrics_source_register, metrics_text
from core.models import OutboxMessage, WorkerHeartbeat
from evals.metrics import trials_finished_count
from evals.models import Case, Run, Suite, Trial
from evals.runner.finalize import run_cancel
from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAITarget
from judges.metrics import judge_call_closed_count, judge_calls_sent_count
from tests.conftest import PROJECT_DIR
from tests.fakellm import FakeLLM
from tests.metrics_scrape import scrape, value

pytestmark = pytest.mark.django_db

OUTSIDE = "203.0.113.7"


@pytest.fixture
def token(settings):
    settings.ASSAY = {**settings.ASSAY, "METRICS_TOKEN": "s3cret-metrics-token"}
    return "s3cret-metrics-token"


def test_loopback_may_read_it_without_a_token(client):
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b"assay_metrics_source_up" in response.content
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_an_anonymous_request_from_elsewhere_gets_a_404(client, token):
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDE)
    assert response.status_code == 404
    assert b"assay_" not in response.content


def test_a_signed_in_user_from_elsewhere_gets_a_404_too(client, alice, token):
    client.force_login(alice)
    assert client.get("/metrics", REMOTE_ADDR=OUTSIDE).status_code == 404


def test_the_token_opens_it_from_anywhere_and_a_wrong_one_is_refused(client, token):
    ok = client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ok.status_code == 200 and b"assay_runs" in ok.content
    wrong = client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Bearer guess")
    assert wrong.status_code == 403 and b"assay_" not in wrong.content
    # A wrong token is refused from an allowed network as well: it says who is asking.
    assert (
        client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer guess")
    ).status_code == 403


def test_no_token_is_accepted_when_none_is_set(client, settings):
    settings.ASSAY = {**settings.ASSAY, "METRICS_TOKEN": ""}
    response = client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Bearer ")
    assert response.status_code == 404
    assert (
        client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_AUTHORIZATION="Bearer x").status_code
        == 403
    )


def test_an_allowed_network_may_read_it_and_a_forwarded_header_does_not_count(client, settings):
    settings.ASSAY = {
        **settings.ASSAY,
        "METRICS_ALLOWED_NETWORKS": networks_parse("10.0.0.0/8, 2001:db8::/32"),
    }
    assert client.get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="2001:db8::5").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 404  # not listed
    spoofed = client.get("/metrics", REMOTE_ADDR=OUTSIDE, HTTP_X_FORWARDED_FOR="10.0.0.1")
    assert spoofed.status_code == 404


def test_the_default_networks_are_loopback_only_and_a_bad_entry_is_named():
    assert [str(n) for n in networks_parse(DEFAULT_NETWORKS)] == ["127.0.0.0/8", "::1/128"]
    assert networks_parse("") == ()
    with pytest.raises(ValueError, match="'10.0.0.300/8' is not a network"):
        networks_parse("10.0.0.0/8,10.0.0.300/8")


def test_it_needs_no_session_and_refuses_a_post(client):
    assert client.post("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 405
    # Not redirected to the login page (the middleware lets it through).
    assert Client().get("/metrics", REMOTE_ADDR=OUTSIDE).status_code == 404


def test_the_gauges_count_live_work_heartbeats_and_the_outbox(client):
    suite = Suite.objects.create(name="gauges")
    case = Case.objects.create(suite=suite, key="c1", input="q")
    live = Run.objects.create(suite=suite, name="live", status=Run.Status.RUNNING)
    done = Run.objects.create(suite=suite, name="done", status=Run.Status.SUCCEEDED)
    an_hour_ago = timezone.now() - timezone.timedelta(hours=1)
    Trial.objects.create(run=live, case=case, attempt=1, created_at=an_hour_ago)
    Trial.objects.create(run=live, case=case, attempt=2, status=Trial.Status.RUNNING)
    Trial.objects.create(run=done, case=case, attempt=1)  # a finished run's: not counted
    WorkerHeartbeat.objects.create(
        hostname="w1@host", pid=1, started_at=an_hour_ago, beat_at=timezone.now()
    )
    OutboxMessage.objects.create(task="t", created_at=an_hour_ago)
    OutboxMessage.objects.create(task="t", sent_at=timezone.now())

    samples = scrape(client)

    assert value(samples, "assay_runs", status="running") == 1
    assert value(samples, "assay_trials", status="queued") == 1
    assert value(samples, "assay_trials", status="running") == 1
    assert 3590 < value(samples, "assay_trial_oldest_queued_age_seconds") < 3700
    assert value(samples, "assay_worker_heartbeat_age_seconds", worker="w1@host") < 60
    assert value(samples, "assay_outbox_unsent") == 1
    assert value(samples, "assay_outbox_oldest_unsent_age_seconds") > 3590
    assert value(samples, "assay_metrics_source_up", source="core") == 1


def test_a_scrape_makes_the_same_few_queries_however_many_runs_and_trials(
    client, django_assert_num_queries
):
    suite = Suite.objects.create(name="cost")
    case = Case.objects.create(suite=suite, key="c1", input="q")

    def add_runs(n: int, status: str) -> None:
        for i in range(n):
            run = Run.objects.create(suite=suite, name=f"{status}-{Run.objects.count()}-{i}")
            Run.objects.filter(id=run.id).update(status=status)
            Trial.objects.bulk_create(
                Trial(run=run, case=case, attempt=a, status=Trial.Status.OK) for a in range(1, 6)
            )

    add_runs(1, Run.Status.RUNNING)
    # Heartbeats, outbox (count and oldest), live runs, their trials; the broker is not asked
    # under eager tasks.
    with django_assert_num_queries(4):
        scrape(client)
    add_runs(30, Run.Status.SUCCEEDED)
    add_runs(5, Run.Status.RUNNING)
    with django_assert_num_queries(4):
        samples = scrape(client)
    assert value(samples, "assay_runs", status="running") == 6


def test_a_failing_source_is_reported_down_and_the_others_still_answer(client):
    def broken():
        raise RuntimeError("the database is away")

    metrics_source_register("broken", broken)
    try:
        samples = scrape(client)
    finally:
        exposition._sources.pop("broken")
    assert value(samples, "assay_metrics_source_up", source="broken") == 0
    assert value(samples, "assay_metrics_source_up", source="evals") == 1
    assert ("assay_runs", (("status", "queued"),)) in samples


def test_a_cancel_counts_its_queued_trials_cancelled(client, django_capture_on_commit_callbacks):
    suite = Suite.objects.create(name="cancel")
    case = Case.objects.create(suite=suite, key="c1", input="q")
    run = Run.objects.create(suite=suite, name="r", status=Run.Status.RUNNING, trials_total=3)
    for attempt in (1, 2, 3):
        Trial.objects.create(run=run, case=case, attempt=attempt)
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):  # counted once committed
        assert run_cancel(run=run)
    after = scrape(client)
    name = "assay_trials_finished_total"
    assert value(after, name, status="cancelled") - value(before, name, status="cancelled") == 3


def test_a_rolled_back_write_counts_no_finished_trial(client, django_capture_on_commit_callbacks):
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):  # the test's transaction "commits"
        with pytest.raises(RuntimeError), transaction.atomic():
            trials_finished_count(ok=2, error=1)
            raise RuntimeError("the write failed")
        trials_finished_count(error=1)
    after = scrape(client)
    name = "assay_trials_finished_total"
    assert value(after, name, status="ok") == value(before, name, status="ok")
    assert value(after, name, status="error") - value(before, name, status="error") == 1


def _call(llm: FakeLLM, prompt: str) -> object:
    async def go():
        target = OpenAITarget.from_config(
            {
                "kind": "openai",
                "base_url": llm.base_url,
                "model": "m",
                "prompt_template": prompt,
                "backoff_base_s": 0.0,
                "backoff_max_s": 0.0,
            },
            rng=random.Random(1),
        )
        try:
            return await target.call(CaseInput(key="c1", input="hi"))
        finally:
            await target.aclose()

    return asyncio.run(go())


def test_calls_retries_429s_and_limiter_waits_are_counted_per_attempt(client):
    host = {"provider": "openai", "host": "127.0.0.1"}
    before = scrape(client)
    with FakeLLM(retry_after="0") as llm:
        result = _call(llm, "[fault=429x1] $input")
        assert result.ok and llm.requests == 2
    after = scrape(client)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("assay_provider_calls_total", **host, status="429") == 1
    assert moved("assay_provider_calls_total", **host, status="200") == 1
    assert moved("assay_provider_rate_limited_total", **host) == 1
    assert moved("assay_provider_retries_total", **host, kind="rate_limited") == 1
    assert moved("assay_limiter_wait_seconds_count", **host) == 2


def test_a_connection_failure_is_counted_under_its_kind(client):
    before = scrape(client)
    with FakeLLM() as llm:
        url = llm.base_url
    # The server is stopped: nothing listens on its port any more.
    closed = type("Closed", (), {"base_url": url})()
    result = _call(closed, "$input")
    assert not result.ok
    after = scrape(client)
    labels = {"provider": "openai", "host": "127.0.0.1", "status": "connection_error"}
    attempts = value(after, "assay_provider_calls_total", **labels) - value(
        before, "assay_provider_calls_total", **labels
    )
    assert attempts == result.attempts >= 1


def test_judge_spend_counts_known_cost_and_unknown_cost_apart(client):
    before = scrape(client)
    judge_calls_sent_count(2)
    judge_call_closed_count(status="answered", outcome="stored", cost_usd=Decimal("0.0125"))
    judge_call_closed_count(status="failed", outcome="stored", cost_usd=None)
    after = scrape(client)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("assay_judge_calls_sent_total") == 2
    assert moved("assay_judge_calls_total", status="answered", outcome="stored") == 1
    assert moved("assay_judge_calls_total", status="failed", outcome="stored") == 1
    assert moved("assay_judge_spend_usd_total") == pytest.approx(0.0125)
    assert moved("assay_judge_calls_cost_unknown_total") == 1


DASHBOARD = PROJECT_DIR / "docs" / "grafana" / "assay.json"
METRIC_NAME = re.compile(r"\bassay_[a-z_]+\b")


def _declared_names() -> set[str]:
    """Every sample name /metrics may carry: the instruments of every metrics module and the
    sources' families, as exposed (counters with ``_total``, histograms with their suffixes)."""
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("assay_"):
            names |= {
                family.name + suffix
                for suffix in {
                    "counter": ("_total",),
                    "histogram": ("_bucket", "_sum", "_count"),
                }.get(family.type, ("",))
            }
    text = metrics_text().decode()
    names |= set(METRIC_NAME.findall(text))
    return names


def test_every_metric_the_example_dashboard_queries_exists():
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in METRIC_NAME.findall(target["expr"])
    }
    assert len(queried) >= 10
    assert queried <= _declared_names(), queried - _declared_names()


def test_the_operations_page_lists_every_metric():
    page = (Path(PROJECT_DIR) / "docs" / "operations.md").read_text()
    families = {n.removesuffix("_total") for n in _declared_names()}
    families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in families}
    missing = {n for n in families if n not in page}
    assert not missing, missing
