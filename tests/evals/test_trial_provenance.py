"""Provenance of every trial (issue 14, point 5): the exact request an OpenAI-compatible
target sent is stored on the trial (model, rendered messages, generation settings) and shown
on the trial page, escaped, with the run's prompt revision, source version and grader
revisions."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evals.models import Case, Suite, Trial
from evals.runner.start import run_start
from tests.conftest import PASSWORD
from tests.fakellm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

HOSTILE = "<script>alert(1)</script>"


def test_the_request_sent_is_stored_for_every_trial_and_shown_on_its_page(client, carol):
    suite = Suite.objects.create(name="prov")
    Case.objects.create(suite=suite, key="c1", input=f"What is 2+2? {HOSTILE}", expected="4")
    Case.objects.create(suite=suite, key="c2", input="What is 3+3?", expected="6")
    with FakeLLM() as llm:
        run = run_start(
            suite=suite,
            name="r1",
            target={
                "kind": "openai",
                "base_url": llm.base_url,
                "model": "example-model-1.5",
                "prompt_template": "Answer briefly: $input",
                "system_prompt": "You are terse.",
                "settings": {"temperature": 0.2, "max_tokens": 50},
                "prompt_revision": "prompt-v7",
            },
            graders=[{"key": "four", "kind": "contains", "config": {"value": "4"}, "version": "3"}],
            trials_per_case=2,
            source_version="app-2026.12",
        )
    trials = list(Trial.objects.filter(run=run).select_related("case"))
    assert len(trials) == 4 and all(t.status == "ok" for t in trials)
    for t in trials:
        assert t.request["model"] == "example-model-1.5"
        assert t.request["temperature"] == 0.2 and t.request["max_tokens"] == 50
        assert t.request["messages"] == [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": f"Answer briefly: {t.case.input}"},
        ]
    assert client.login(username=carol.username, password=PASSWORD)
    trial = next(t for t in trials if t.case.key == "c1")
    page = client.get(reverse("evals:trial-detail", args=[trial.uuid])).content.decode()
    assert 'id="prompt-sent"' in page and "Answer briefly: What is 2+2?" in page
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "prompt-v7" in page and "app-2026.12" in page and "four (contains, revision 3)" in page


def test_a_simulated_trial_says_no_request_was_recorded(client, carol):
    suite = Suite.objects.create(name="sim")
    Case.objects.create(suite=suite, key="c1", input="q", expected="a")
    run = run_start(
        suite=suite,
        name="r1",
        target={"kind": "simulated", "seed": 1},
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=1,
    )
    trial = Trial.objects.get(run=run)
    assert trial.request is None
    assert client.login(username=carol.username, password=PASSWORD)
    page = client.get(reverse("evals:trial-detail", args=[trial.uuid])).content.decode()
    assert "No request recorded" in page
