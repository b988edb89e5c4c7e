"""Helpers for the import tests: labeled records built from the format's template."""

from __future__ import annotations

import copy
import io
import json

from django.core.files.uploadedfile import SimpleUploadedFile

from interop.importers import results_import

TEMPLATE = {
    "id": "cal-a-01",
    "dataset": "acceptance",
    "split": "test",
    "task_type": "pointwise_binary",
    "category": "calibration",
    "tags": [],
    "input": "q01",
    "context": [],
    "responses": [{"response_id": "R", "model": None, "text": "r01"}],
    "human_label": {"type": "pass_fail", "value": "pass", "method": "fixture", "details": {}},
    "human_annotations": [],
    "judge_labels": [
        {
            "judge_model": "j1",
            "judge_type": "llm",
            "protocol": "p1",
            "position": None,
            "value": "pass",
            "score": None,
            "rationale": None,
        }
    ],
    "source": {
        "repo": None,
        "commit": None,
        "path": None,
        "index": 0,
        "original_id": None,
        "license": None,
    },
}

PAIR_TEMPLATE = {
    **TEMPLATE,
    "id": "pair-01",
    "task_type": "pairwise_preference",
    "responses": [
        {"response_id": "A", "model": None, "text": "The capital of France is Paris."},
        {"response_id": "B", "model": None, "text": "The capital of France is Paris."},
    ],
    "human_label": {"type": "preference", "value": "A", "method": "fixture", "details": {}},
    "judge_labels": [
        {
            "judge_model": "j1",
            "judge_type": "llm",
            "protocol": "p1",
            "position": "original",
            "value": "A",
            "score": None,
            "rationale": None,
        },
        {
            "judge_model": "j1",
            "judge_type": "llm",
            "protocol": "p1",
            "position": "swapped",
            "value": "B",
            "score": None,
            "rationale": None,
        },
    ],
}


def record(base: dict | None = None, **changes) -> dict:
    """A deep copy of ``base`` (the pointwise template) with top-level ``changes``."""
    rec = copy.deepcopy(base or TEMPLATE)
    rec.update(copy.deepcopy(changes))
    return rec


def jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode("utf-8")


def import_bytes(
    data: bytes, *, filename: str = "records.jsonl", suite: str = "s", run: str = "r", **kwargs
):
    """Run ``results_import`` on in-memory bytes."""
    return results_import(
        stream=io.BytesIO(data), filename=filename, suite_name=suite, run_name=run, **kwargs
    )


UPLOAD_URL = "/imports/new/"


def upload_post(client, data: bytes, name: str = "results.csv", **fields):
    """POST ``data`` as the file of the import page's form (suite S, run R, a regression
    suite, no mapping or threshold unless ``fields`` says otherwise); the response."""
    payload = {
        "file": SimpleUploadedFile(name, data),
        "suite": "S",
        "run": "R",
        "format": "",
        "suite_kind": "regression",
        "mapping": "",
        "threshold": "",
    }
    payload.update(fields)
    return client.post(UPLOAD_URL, payload)
