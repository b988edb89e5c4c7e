"""Fault M1: times are stored in UTC and shown in the viewer's zone."""

from datetime import UTC, datetime

import pytest

from evals.models import Case, Run, Suite, Trial
from labeling.models import Label

INSTANT = datetime(2025, 2, 24, 15, 30, tzinfo=UTC)


@pytest.fixture
def trial(db, carol):
    suite = Suite.objects.create(name="tz")
    case = Case.objects.create(suite=suite, key="c1", input="q")
    run = Run.objects.create(suite=suite, name="r", target_kind="simulated", started_at=INSTANT)
    trial = Trial.objects.create(
        run=run, case=case, attempt=1, status="ok", output="a", created_at=INSTANT
    )
    Label.objects.create(trial=trial, reviewer=carol, verdict="pass", created_at=INSTANT)
    return trial


def test_a_utc_plus_8_viewer_reads_23_30_on_the_run_list_and_trial_page(client, carol, trial):
    client.force_login(carol)
    client.cookies["assay_tz"] = "Asia/Shanghai"
    listing = client.get("/runs/").content.decode()
    assert "2025-02-24 23:30" in listing
    page = client.get(f"/trials/{trial.uuid}/").content.decode()
    assert "2025-02-24 23:30" in page
    assert "Asia/Shanghai" in page


def test_a_viewer_without_a_zone_reads_utc(client, carol, trial):
    client.force_login(carol)
    listing = client.get("/runs/").content.decode()
    assert "2025-02-24 15:30" in listing
    assert "2025-02-24 23:30" not in listing


def test_an_unknown_zone_name_falls_back_to_utc(client, carol, trial):
    client.force_login(carol)
    client.cookies["assay_tz"] = "Mars/Olympus_Mons"
    assert "2025-02-24 15:30" in client.get("/runs/").content.decode()


def test_the_stored_instant_stays_utc(trial):
    trial.refresh_from_db()
    assert trial.created_at == INSTANT
    assert Label.objects.get().created_at == INSTANT
