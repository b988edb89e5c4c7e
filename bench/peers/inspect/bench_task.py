"""Inspect AI side of the side-by-side benchmark (bench/peers/bench_peers.py runs it).

``inspect eval bench/peers/inspect/bench_task.py -T cases=FILE.jsonl --model openai/mock-model
--epochs 5 --max-connections C``: one sample per case (``input``, ``target``, ``id``), the
model's answer generated once per epoch and scored by a substring match (``includes``).
"""

from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def mock_bench(cases: str) -> Task:
    """The cases of ``cases`` (JSON Lines of ``{id, input, target}``), substring-graded."""
    return Task(dataset=json_dataset(cases), solver=generate(), scorer=includes(ignore_case=False))
