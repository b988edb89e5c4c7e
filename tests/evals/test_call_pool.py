"""The call pool hands results over in batches (``CallPool.results``): a batch gathers for
``WRITE_BATCH_WINDOW_S`` while calls are still outstanding, and is handed over at once when
no call is left that could join it."""

from __future__ import annotations

import time
import uuid

from evals.runner import calls
from evals.runner.calls import CallPool
from evals.runner.targets import CaseInput
from tests.fakellm import FakeLLM


def _config(base_url: str) -> dict:
    return {
        "kind": "openai",
        "base_url": base_url,
        "model": "pool-model",
        "prompt_template": "$input",
        "limit_key": f"test-{uuid.uuid4().hex}",  # this test's own endpoint state
        "concurrency": 4,
    }


def test_a_batch_is_handed_over_once_no_call_is_left_to_join_it(monkeypatch):
    monkeypatch.setattr(calls, "WRITE_BATCH_WINDOW_S", 60.0)
    with FakeLLM() as llm, CallPool(_config(llm.base_url)) as pool:
        pool.submit([(n, CaseInput(key=f"c{n}", input="yes")) for n in (1, 2, 3)])
        begun = time.monotonic()
        batch = []
        while len(batch) < 3:
            batch += pool.results(timeout=10)
        waited = time.monotonic() - begun
    assert sorted(trial_id for trial_id, _ in batch) == [1, 2, 3]
    assert all(result.ok for _, result in batch)
    assert waited < 20  # not the 60-s window: nothing was left to wait for


def test_a_batch_is_handed_over_after_the_window_while_a_call_is_outstanding(monkeypatch):
    monkeypatch.setattr(calls, "WRITE_BATCH_WINDOW_S", 0.2)
    with FakeLLM() as llm, CallPool(_config(llm.base_url)) as pool:
        pool.submit(
            [
                (1, CaseInput(key="fast", input="yes")),
                (2, CaseInput(key="slow", input="yes [latency=2000]")),
            ]
        )
        first = pool.results(timeout=10)
        assert [trial_id for trial_id, _ in first] == [1]  # the slow call did not hold it
        assert pool.outstanding == 1
        rest = pool.close()
    assert [trial_id for trial_id, _ in rest] == [2]
