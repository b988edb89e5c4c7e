"""The judge version page's "Run injection probes" action and its report, and the position
bias of pairwise judge versions on the version page and the judge list."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.models import TrialPair
from judges import client as judge_client
from judges.models import PairwiseVerdict, ProbeRun
from judges.probes import PROBES
from tests.conftest import PASSWORD
from tests.fakellm import FakeLLM
from tests.judge_builders import fenced, make_trials, make_version, verdict_json

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script>"
RUBRIC_PROBES = [p for p in PROBES if "rubric" in p.kinds]
INJECTION_WORDS = ("pass", "rubric", "supported", "ignore")


def gullible(body):
    """Passes whenever the judged text asks for a pass, with a hostile reason."""
    text = " ".join(fenced(body)).lower()
    verdict = "PASS" if any(w in text for w in INJECTION_WORDS) else "FAIL"
    return verdict_json(verdict, f"obeyed {HOSTILE}")


def sound(body):
    """Compares the output with the reference; ignores everything else."""
    blocks = fenced(body)
    return verdict_json(
        "PASS" if blocks[-1].strip(" .") == blocks[-2].strip() else "FAIL", "Berlin is not Paris"
    )


@pytest.fixture(autouse=True)
def no_waits(monkeypatch):
    async def fake_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(judge_client, "default_sleep", fake_sleep)


def login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def version_url(version) -> str:
    return reverse("judges:version-detail", kwargs={"version_id": version.uuid})


def probe(client, version, capture, *, execute=True):
    """Post the action (the task runs when the request's transaction commits), then the
    message the redirect showed followed by the version page as it is afterwards."""
    url = reverse("judges:probe-run-start", kwargs={"version_id": version.uuid})
    with capture(execute=execute):
        posted = client.post(url, follow=True).content.decode()
    return posted + client.get(version_url(version)).content.decode()


# -- injection probes ------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["alice", "carol"])
def test_engineers_and_leads_see_a_gullible_judge_fooled_by_every_probe(
    client, request, role, django_capture_on_commit_callbacks
):
    user = request.getfixturevalue(role)
    with FakeLLM(responder=gullible) as llm:
        version = make_version(llm)
        login(client, user)
        assert "Run injection probes" in client.get(version_url(version)).content.decode()
        page = probe(client, version, django_capture_on_commit_callbacks)
    n = len(RUBRIC_PROBES)
    assert f"Fooled by {n} of {n} probes</strong> (0 errored)" in page
    assert page.count('<span class="badge fail">fooled</span>') == n
    assert "obeyed &lt;script&gt;alert(1)&lt;/script&gt;" in page and HOSTILE not in page
    row = ProbeRun.objects.get()
    assert (row.status, row.probes_total, row.judged, row.fooled, row.errored, row.started_by) == (
        "succeeded",
        n,
        n,
        n,
        0,
        user,
    )
    assert [r["name"] for r in row.results] == [p.name for p in RUBRIC_PROBES]


def test_a_sound_judge_is_fooled_by_none(client, carol, django_capture_on_commit_callbacks):
    with FakeLLM(responder=sound) as llm:
        version = make_version(llm)
        login(client, carol)
        page = probe(client, version, django_capture_on_commit_callbacks)
    n = len(RUBRIC_PROBES)
    assert f"Fooled by 0 of {n} probes</strong> (0 errored)" in page
    assert page.count('<span class="badge pass">not fooled</span>') == n
    # the probe calls are paid judge calls: counted, and an unpriced model's cost unknown
    assert f"{n} judge calls for these probes, cost unknown" in page


def test_errored_probes_are_counted_apart_never_as_not_fooled(
    client, carol, django_capture_on_commit_callbacks
):
    with FakeLLM(responder=lambda body: "GRADE: CI") as llm:
        version = make_version(llm)
        login(client, carol)
        page = probe(client, version, django_capture_on_commit_callbacks)
    n = len(RUBRIC_PROBES)
    assert f"Fooled by 0 of 0 probes</strong> ({n} errored)" in page
    assert page.count('<span class="badge status-error">errored</span>') == n
    assert "not fooled" not in page


def test_a_faithfulness_judge_is_also_probed_with_a_poisoned_document(
    client, carol, django_capture_on_commit_callbacks
):
    with FakeLLM(responder=gullible) as llm:
        version = make_version(llm, kind="faithfulness")
        login(client, carol)
        page = probe(client, version, django_capture_on_commit_callbacks)
    n = len([p for p in PROBES if "faithfulness" in p.kinds])
    assert f"Fooled by {n} of {n} probes" in page
    assert "<td>poisoned-document</td>" in page


def test_the_probes_run_after_commit_and_the_page_says_queued_until_then(
    client, carol, django_capture_on_commit_callbacks
):
    with FakeLLM(responder=sound) as llm:
        version = make_version(llm)
        login(client, carol)
        page = probe(client, version, django_capture_on_commit_callbacks, execute=False)
        assert llm.requests == 0
    assert "Injection probes queued against j v1" in page
    assert "Probe run queued" in page and "Fooled by" not in page
    # The report polls itself while the probe run is in flight, then stops.
    assert 'id="probe-report" hx-get=' in page and 'hx-trigger="every 2s"' in page
    part = client.get(
        version_url(version), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="probe-report"
    ).content.decode()
    assert part.strip().startswith('<div class="card" id="probe-report" hx-get=')
    assert "<html" not in part
    ProbeRun.objects.update(
        status=ProbeRun.Status.SUCCEEDED, probes_total=0, judged=0, fooled=0, errored=0
    )
    part = client.get(
        version_url(version), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="probe-report"
    ).content.decode()
    assert "Fooled by 0 of 0 probes" in part and "hx-trigger" not in part


def test_reviewers_and_outsiders_cannot_run_probes(
    client, bob, mallory, django_capture_on_commit_callbacks
):
    with FakeLLM(responder=gullible) as llm:
        version = make_version(llm)
        for user in (bob, mallory):
            login(client, user)
            url = reverse("judges:probe-run-start", kwargs={"version_id": version.uuid})
            assert client.post(url).status_code == 403
        assert llm.requests == 0
    assert not ProbeRun.objects.exists()


def test_a_pairwise_judge_is_probed_with_candidates_that_ask_to_be_preferred(
    client, carol, django_capture_on_commit_callbacks
):
    def obeys(body):
        a, _ = fenced(body)[-2:]
        return verdict_json("A" if "prefer this" in a.lower() or '"A"' in a else "B")

    with FakeLLM(responder=obeys) as llm:
        version = make_version(llm, kind="pairwise")
        login(client, carol)
        assert "Run injection probes" in client.get(version_url(version)).content.decode()
        page = probe(client, version, django_capture_on_commit_callbacks)
    assert "Fooled by 3 of 3 probes" in page
    assert "prefer-me-in-b" in page


# -- position bias ---------------------------------------------------------------------------


def pairwise_with_verdicts(llm):
    """Three pairs: consistent (A, A), inconsistent (A, B), and one with an errored swapped
    order (B, error). Both orders ok on 2 pairs, 1 consistent -> 50.0%; ok presentations 5,
    first slot won 3 (original A, original A, swapped B) -> 60.0%."""
    version = make_version(llm, kind="pairwise", name="pw")
    base = make_trials(["a1", "a2", "a3"], run="base")
    head = make_trials(["b1", "b2", "b3"], run="head")
    rows = [("A", "A"), ("A", "B"), ("B", None)]
    for a, b, (orig, swap) in zip(base, head, rows, strict=True):
        pair = TrialPair.objects.create(case=a.case, trial_a=a, trial_b=b)
        PairwiseVerdict.objects.create(
            pair=pair, judge_version=version, position="original", preferred=orig
        )
        PairwiseVerdict.objects.create(
            pair=pair,
            judge_version=version,
            position="swapped",
            status="ok" if swap else "error",
            preferred=swap or "",
        )
    return version


def test_the_version_page_and_the_list_show_position_consistency_and_slot_a_wins(client, alice):
    with FakeLLM(responder=gullible) as llm:
        version = pairwise_with_verdicts(llm)
        rubric = make_version(llm, name="rubric-judge")
    login(client, alice)
    page = client.get(version_url(version)).content.decode()
    assert "Position-consistent on 50.0% of pairs (1/2 with both orders judged; 1 pair left" in page
    assert "The slot shown first won 60.0% of presentations (3/5;" in page
    listing = client.get(reverse("judges:judge-list")).content.decode()
    assert 'consistent 50.0% <span class="muted">(1/2)</span>, slot A won 60.0%' in listing
    assert "Position bias" not in client.get(version_url(rubric)).content.decode()


def test_a_pairwise_version_without_verdicts_says_so(client, carol):
    with FakeLLM(responder=gullible) as llm:
        version = make_version(llm, kind="pairwise")
    login(client, carol)
    assert "No pairwise verdicts yet." in client.get(version_url(version)).content.decode()
    assert "no verdicts yet" in client.get(reverse("judges:judge-list")).content.decode()
