"""``POST /api/runs/<uuid>/cancel``: engineers and leads cancel a queued or running run; a
finished one is a 409, an unknown one a 404. (Cancelling mid-chunk on a real worker:
tests/evals/test_worker_faults.py.)"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from evals.models import Run, Trial
from evals.runner.finalize import run_cancel
from evals.runner.start import run_start
from tests.core.test_api_core import client_for
from tests.evals.test_worker import _suite

pytestmark = pytest.mark.django_db

SIMULATED = {"kind": "simulated", "model": "simulated", "seed": 7}
GRADERS = [{"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}]


@pytest.fixture
def queued(django_capture_on_commit_callbacks) -> Run:
    with django_capture_on_commit_callbacks(execute=False):  # no worker takes it yet
        return run_start(
            suite=_suite(3), name="r", target=SIMULATED, graders=GRADERS, trials_per_case=2
        )


def test_an_engineer_cancels_a_queued_run(queued, carol):
    response = client_for(carol).post(f"/api/runs/{queued.uuid}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert Trial.objects.filter(run=queued, status=Trial.Status.CANCELLED).count() == 6
    queued.refresh_from_db()
    assert queued.finished_at is not None  # nothing in flight: it closes at once


def test_cancelling_a_cancelled_run_again_changes_nothing(queued, alice):
    assert client_for(alice).post(f"/api/runs/{queued.uuid}/cancel").status_code == 200
    again = client_for(alice).post(f"/api/runs/{queued.uuid}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"


def test_it_refuses_a_reviewer_and_an_outsider(queued, bob, mallory):
    assert client_for(bob).post(f"/api/runs/{queued.uuid}/cancel").status_code == 403
    assert client_for(mallory).post(f"/api/runs/{queued.uuid}/cancel").status_code == 403
    assert client_for(None).post(f"/api/runs/{queued.uuid}/cancel").status_code in (401, 403)
    queued.refresh_from_db()
    assert queued.status == Run.Status.QUEUED


def test_a_finished_run_is_a_conflict_and_an_unknown_one_not_found(queued, carol):
    Run.objects.filter(id=queued.id).update(status=Run.Status.SUCCEEDED)
    finished = client_for(carol).post(f"/api/runs/{queued.uuid}/cancel")
    assert finished.status_code == 409 and finished.json()["field"] == "run"
    queued.refresh_from_db()
    assert queued.status == Run.Status.SUCCEEDED
    assert client_for(carol).post("/api/runs/not-a-uuid/cancel").status_code == 404


def test_the_command_cancels_and_refuses_a_finished_run_with_exit_3(queued):
    out = io.StringIO()
    call_command("run_cancel", str(queued.uuid), "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"run": str(queued.uuid), "status": "cancelled"}
    Run.objects.filter(id=queued.id).update(status=Run.Status.FAILED)
    with pytest.raises(CommandError, match="has already failed") as exc:
        call_command("run_cancel", str(queued.uuid))
    assert exc.value.returncode == 3


def test_the_command_names_the_run_by_name_and_uuid_never_its_internal_id(queued, caplog):
    """stdout and the log (stderr) say "run r (<uuid>)": never "run 12"."""
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="evals.runner.finalize"):
        call_command("run_cancel", str(queued.uuid), stdout=out)
    assert (
        out.getvalue() == f"run r ({queued.uuid}): cancelled; 0 of 6 trials finished, 6 cancelled\n"
    )
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [f"run r ({queued.uuid}) cancelled from the command line"]
    assert f"run {queued.id} " not in out.getvalue() + "".join(logged)


def _shown(run: Run, viewer) -> tuple[dict, str, str]:
    """What the API's run, the run page and its progress fragment say of the cancel."""
    body = client_for(viewer).get(f"/api/runs/{run.uuid}/").json()
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/runs/{run.uuid}/").content.decode()
    fragment = client.get(f"/runs/{run.uuid}/progress/").content.decode()
    return body, page, fragment


@pytest.mark.parametrize(
    ("how", "said", "via", "by"),
    [
        ("command", "from the command line", "command", None),
        ("system", "by the system", "system", None),
        ("api", "by carol through the API", "api", "carol"),
        ("page", "by carol", "page", "carol"),
    ],
)
def test_every_cancel_names_its_actor_in_the_log_the_page_and_the_api(
    queued, carol, alice, caplog, how, said, via, by
):
    with caplog.at_level(logging.INFO, logger="evals.runner.finalize"):
        if how == "command":
            call_command("run_cancel", str(queued.uuid), stdout=io.StringIO())
        elif how == "system":
            run_cancel(run=queued)
        elif how == "api":
            assert client_for(carol).post(f"/api/runs/{queued.uuid}/cancel").status_code == 200
        else:
            client = Client()
            client.force_login(carol)
            assert client.post(f"/runs/{queued.uuid}/cancel/").status_code == 302
    logged = [r.getMessage() for r in caplog.records if "cancelled" in r.getMessage()]
    assert logged == [f"run {queued.name} ({queued.uuid}) cancelled {said}"]
    body, page, fragment = _shown(queued, alice)
    assert (body["cancelled"], body["cancelled_via"], body["cancelled_by"]) == (said, via, by)
    assert f"Cancelled {said}" in page and f"Cancelled {said}" in fragment
    assert "None" not in logged[0] + body["cancelled"]


def test_a_run_not_cancelled_names_no_actor(queued, alice):
    body, page, _ = _shown(queued, alice)
    assert (body["cancelled"], body["cancelled_via"], body["cancelled_by"]) == ("", "", None)
    assert "Cancelled" not in page
