"""The run file carries every token class and the cost basis, and refuses bad ones by name."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evals.models import Run, Trial
from tests.report_builders import mixed_run

pytestmark = pytest.mark.django_db

BASIS = {
    "model": "claude-sonnet-4-5",
    "price": "claude-sonnet-4-5*",
    "source": "built-in",
    "classes": ["input", "output", "cache_read"],
}
CLASSES = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")
USAGE = (*CLASSES, "reasoning_tokens", "cost_usd", "cost_basis")


def _run_with_classes() -> Run:
    run = mixed_run()
    Trial.objects.filter(run=run, case__key="c1", attempt=1).update(
        input_tokens=90,
        output_tokens=7,
        cache_write_tokens=0,
        cache_read_tokens=1200,
        reasoning_tokens=33,
        cost_usd=Decimal("0.00123"),
        cost_basis=BASIS,
    )
    Trial.objects.filter(run=run, case__key="c3", attempt=2).update(cost_basis={"source": "target"})
    return run


def _exported(run: Run, tmp_path) -> tuple[dict, object]:
    path = tmp_path / "run.json"
    call_command("export_run", str(run.uuid), "--out", str(path))
    return json.loads(path.read_text()), path


def _usage(run: Run) -> dict:
    return {
        (t.case.key, t.attempt): tuple(getattr(t, f) for f in USAGE)
        for t in Trial.objects.filter(run=run).select_related("case")
    }


def test_a_round_trip_keeps_every_token_class_and_the_cost_basis(tmp_path):
    run = _run_with_classes()
    data, path = _exported(run, tmp_path)
    trial = data["cases"][0]["trials"][0]
    assert {k: trial[k] for k in (*CLASSES, "reasoning_tokens", "cost_usd", "cost_basis")} == {
        "input_tokens": 90,
        "output_tokens": 7,
        "cache_write_tokens": 0,  # 0 is a count, written
        "cache_read_tokens": 1200,
        "reasoning_tokens": 33,
        "cost_usd": "0.001230000000",
        "cost_basis": BASIS,
    }
    # Unknown classes and no basis: left out, as the format's other optional keys.
    other = data["cases"][0]["trials"][1]
    assert not {"cache_write_tokens", "cache_read_tokens", "reasoning_tokens", "cost_basis"} & set(
        other
    )
    call_command("import_run", str(path), "--suite", "S2")
    copy = Run.objects.get(suite__name="S2")
    assert _usage(copy) == _usage(run)
    again = Trial.objects.get(run=copy, case__key="c1", attempt=1)
    assert (again.cache_read_tokens, again.reasoning_tokens, again.cost_basis) == (1200, 33, BASIS)
    assert Trial.objects.get(run=copy, case__key="c1", attempt=2).cache_read_tokens is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "cache_read_tokens",
            -5,
            "cache_read_tokens: expected a whole number from 0 to .*, got -5",
        ),
        ("reasoning_tokens", "x", 'reasoning_tokens: expected a whole number, got "x"'),
        ("cache_write_tokens", 1.5, "cache_write_tokens: expected a whole number"),
        ("cache_write_tokens", True, "cache_write_tokens: expected a whole number"),
        ("cache_read_tokens", 2**40, "cache_read_tokens: expected a whole number from 0 to"),
        ("cost_basis", "built-in", "cost_basis: expected an object or null"),
        ("cost_basis", {"classes": 5}, r"cost_basis\.classes: expected a list of strings"),
        ("cost_basis", {"unknown": [1]}, r"cost_basis\.unknown: expected a list of strings"),
        ("cost_basis", {"model": 7}, r"cost_basis\.model: expected a string or null"),
        ("cost_basis", {"price": "x", "extra": 1}, "cost_basis: unknown key 'extra'"),
    ],
)
def test_a_bad_token_class_or_cost_basis_is_refused_naming_it(tmp_path, key, value, message):
    data, path = _exported(_run_with_classes(), tmp_path)
    data["cases"][2]["trials"][1][key] = value
    path.write_text(json.dumps(data))
    with pytest.raises(CommandError, match=rf"cases\[2\]\.trials\[1\]\.{message}"):
        call_command("import_run", str(path), "--suite", "S3")
    assert not Run.objects.filter(suite__name="S3").exists()


def test_a_file_without_the_extra_classes_reads_them_as_unknown(tmp_path):
    data, path = _exported(_run_with_classes(), tmp_path)
    for case in data["cases"]:
        for trial in case["trials"]:
            for key in ("cache_write_tokens", "cache_read_tokens", "reasoning_tokens"):
                trial.pop(key, None)
            trial.pop("cost_basis", None)
    path.write_text(json.dumps(data))
    call_command("import_run", str(path), "--suite", "S4")
    copy = Trial.objects.filter(run__suite__name="S4")
    assert copy.count() == 6
    assert not copy.filter(cache_read_tokens__isnull=False).exists()
    assert not copy.filter(cost_basis__isnull=False).exists()
    assert copy.get(case__key="c1", attempt=1).input_tokens == 90
