"""Benchmark the contract grader (``evals.grading.contract``) on the demo's expense-policy
contract: parsing and compiling the contract once, then checking one output (a 4-item and
a 20-item suite: strict schema, oracle per item, four CEL coverage predicates per item).

Usage: .venv/bin/python bench/bench_contract.py
Prints milliseconds: the median of 5 repeats of 50 checks each, per output and per item.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from demo.expense_contract import CONTRACT, CORRECT_CASES, FIXTURES  # noqa: E402
from evals.grading.contract.check import contract_check  # noqa: E402
from evals.grading.contract.config import contract_parse  # noqa: E402


def timed(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) * 1000 / n


def main() -> None:
    parse_ms = statistics.median(timed(lambda: contract_parse(CONTRACT), 5) for _ in range(5))
    contract = contract_parse(CONTRACT)
    large = json.dumps(
        {
            "sourceVersion": "expense-v2",
            "cases": [{**CORRECT_CASES[i % 4], "id": f"T-{i}"} for i in range(20)],
        }
    )
    print(f"contract parse + CEL compile: {parse_ms:.1f} ms")
    for label, text, items in (("4 items", FIXTURES["correct"], 4), ("20 items", large, 20)):
        ms = statistics.median(
            timed(lambda t=text: contract_check(contract, t), 50) for _ in range(5)
        )
        print(f"check, {label}: {ms:.2f} ms per output, {ms / items:.2f} ms per item")


if __name__ == "__main__":
    main()
