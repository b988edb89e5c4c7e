"""The judge improvement loop end to end against the project's shared mock endpoint in judge
mode (``tests.mockllm``): a judge grades a run, a reviewer labels it, the lead builds an
improved version from the disagreements on the improve page (preview, edit, create), the
new version grades the run through a judge run, and its calibration leaves its development
labels out.

The mock judge passes an output when it carries the case's expect token, flipped with a
fixed probability (``--judge-flip``), so the first version disagrees with the honest labels
on some trials."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.models import Case, Grade, Run, Suite, Trial
from judges import runs, tasks
from judges.models import DevelopmentLabel, JudgeRun, JudgeVersion
from judges.versions import judge_version_create
from labeling import improve
from labeling.labels import label_submit
from labeling.selectors import calibration_compute
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set
from tests.mockllm import mockllm  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

N = 16


def _trials() -> list[Trial]:
    """N ok trials whose inputs carry the mock's marker; odd ones answer its expect token."""
    suite = Suite.objects.create(name="mock")
    run = Run.objects.create(
        suite=suite, name="r", target_kind="callable", graders=[], status=Run.Status.SUCCEEDED
    )
    out = []
    for i in range(N):
        key = f"m{i:02d}"
        case = Case.objects.create(
            suite=suite, key=key, input=f"[case={key} p=0.5 expect=ANSWER-{key}] Capital?"
        )
        output = f"ANSWER-{key}" if i % 2 else "WRONG"
        out.append(Trial.objects.create(run=run, case=case, attempt=1, status="ok", output=output))
    return out


def _judge(run: Run, version: JudgeVersion, monkeypatch, capture) -> JudgeRun:
    """A judge run of ``version`` on ``run``, its enqueued tasks executed here (as a worker
    would run them after the commit)."""
    enqueued = []
    monkeypatch.setattr(tasks.judge_run_execute, "delay", lambda *args: enqueued.append(args))
    with capture(execute=True):
        judge_run = runs.judge_run_start(run=run, judge_version=version)
    assert enqueued
    for run_id, version_id, ids in enqueued:
        runs.judge_run_execute(run_id=run_id, judge_version_id=version_id, trial_ids=ids)
    judge_run.refresh_from_db()
    return judge_run


def test_an_improved_version_is_built_on_the_page_and_grades_a_run_on_the_shared_mock(
    mockllm,  # noqa: F811
    monkeypatch,
    django_capture_on_commit_callbacks,
    client,
    alice,
    bob,
):
    capture = django_capture_on_commit_callbacks
    server = mockllm("--mode", "judge", "--latency-ms", "0", "--judge-flip", "0.3")
    trials = _trials()
    run = trials[0].run
    v1, _ = judge_version_create(
        judge_name="mock-judge",
        kind="rubric",
        model="judge-model",
        base_url=server.base_url,
        prompt_template="",
        params={"max_attempts": 1, "criteria": "The answer carries the expected token."},
        output_schema={},
    )
    first = _judge(run, v1, monkeypatch, capture)
    assert (first.status, first.trials_graded, first.trials_errored) == ("succeeded", N, 0)
    for t in trials:
        right = t.output.startswith("ANSWER")
        label_submit(
            trial=t,
            reviewer=bob,
            verdict="pass" if right else "fail",
            critique="carries the expected token" if right else "no expected token: $output",
            expected_version=0,
        )
    cset = calibration_set(run, v1, trials)
    before = calibration_compute(judge_version=v1, calibration_set=cset)
    k = len(before.disagreements)
    assert 0 < k < N and before.n == N

    # The lead's page: every disagreement offered; the template edited to show the
    # examples after the output; preview, then create.
    assert client.login(username=alice.username, password=PASSWORD)
    url = reverse("labeling:improve", kwargs={"version_id": v1.uuid}) + f"?set={cset.uuid}"
    _cal, candidates = improve.improve_candidates(base_version=v1, calibration_set=cset)
    assert client.get(url).content.decode().count('name="examples"') == k == len(candidates)
    template = v1.prompt_template + "\n\nPast verdicts of human reviewers:\n$examples"
    form = {"examples": [c.choice for c in candidates], "prompt_template": template}
    preview = client.post(url, {**form, "action": "preview"})
    assert preview.status_code == 200 and "the human reviewers&#x27; verdict is" in (
        preview.content.decode()
    )
    created = client.post(url, {**form, "action": "create"})
    assert created.status_code == 302
    v2 = JudgeVersion.objects.get(judge=v1.judge, number=2)
    assert len(v2.params["examples"]) == k
    assert DevelopmentLabel.objects.filter(judge_version=v2).count() == k

    # The improved version grades the run through a judge run on the mock.
    second = _judge(run, v2, monkeypatch, capture)
    assert (second.status, second.trials_graded, second.trials_errored) == ("succeeded", N, 0)
    assert server.stats()["requests"] == 2 * N
    sent = Grade.objects.filter(judge_version=v2).first().details
    nonce = sent["nonce"]
    user = sent["prompt"].split("[user]\n", 1)[1]
    assert user.count(f"<<<DATA-{nonce}>>>") == 2 + 3 * k  # input, output, 3 per example
    assert "no expected token: $output" in sent["prompt"]

    # Its calibration leaves the k development trials out; the page says so.
    after = calibration_compute(judge_version=v2, calibration_set=cset)
    assert (after.n, after.n_development, after.n_development_total) == (N - k, k, k)
    page = client.get(
        reverse("labeling:calibration", kwargs={"version_id": v2.uuid}) + f"?set={cset.uuid}"
    ).content.decode()
    assert f'<strong id="n-development">{k}</strong>' in page
    cmp = improve.versions_compare(judge=v1.judge)
    assert (cmp.n_items, cmp.n_development, len(cmp.rows)) == (N - k, k, 2)
