"""A contract grader declared in a config file: the reference example of docs/contracts.md
applies as a grader set preset equal to the demo's contract, and a bad predicate is
refused naming the preset, the grader and the option."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from demo.expense_contract import CONTRACT
from evals.models import GraderSetPreset
from tests.conftest import PROJECT_DIR


def docs_toml() -> str:
    text = (PROJECT_DIR / "docs" / "contracts.md").read_text()
    (block,) = re.findall(r"```toml\n(.*?)```", text, re.S)
    return block


def apply(tmp_path, text):
    path = tmp_path / "assay.toml"
    path.write_text(text)
    out = StringIO()
    call_command("apply_config", str(path), "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_the_documented_contract_applies_and_equals_the_demo_contract(tmp_path):
    apply(tmp_path, docs_toml())
    (grader,) = GraderSetPreset.objects.get(name="expense-contract").graders
    assert grader["kind"] == "contract"
    assert grader["config"] == CONTRACT


@pytest.mark.django_db
def test_a_bad_predicate_in_a_config_file_is_refused_naming_the_option(tmp_path):
    text = docs_toml().replace('at = "amountCents == 75000"', 'at = "amountCents =="')
    with pytest.raises(
        CommandError,
        match=r"grader_sets\.expense-contract\.graders\[0\]\.config\.coverage\.at: invalid CEL",
    ):
        apply(tmp_path, text)
    assert not GraderSetPreset.objects.exists()
