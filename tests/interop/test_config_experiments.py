"""Config as code for experiments (interop.config): ``[experiments.NAME]`` is checked when the
file is applied but starts nothing; ``config_experiment_start`` applies the file and starts
it in one transaction; every error names its TOML path."""

from __future__ import annotations

import copy
import json
import tomllib
from io import StringIO

import pytest
from django.core.management import call_command

from core.errors import DomainError
from evals.models import Experiment, ExperimentVariant, Run, Suite
from interop.config import config_apply, config_experiment_start
from tests.conftest import PROJECT_DIR

pytestmark = pytest.mark.django_db

EXAMPLE = PROJECT_DIR / "examples" / "experiment.toml"


def _document() -> dict:
    return tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))


def test_applying_the_example_declares_the_experiment_and_starts_nothing():
    out = StringIO()
    call_command("apply_config", str(EXAMPLE), "--json", stdout=out)
    applied = json.loads(out.getvalue())
    assert applied["experiments"] == [{"name": "prompts", "suite": "faq", "action": "declared"}]
    call_command("apply_config", str(EXAMPLE), stdout=StringIO())  # twice: still nothing runs
    assert not Experiment.objects.exists() and not Run.objects.exists()
    assert Suite.objects.get(name="faq").cases.count() == 8


def test_starting_it_applies_the_file_and_starts_one_run_per_variant():
    experiment = config_experiment_start(document=_document(), name="prompts")
    assert (experiment.name, experiment.suite.name, experiment.seed) == ("prompts", "faq", 7)
    assert (experiment.alpha, experiment.trials_per_case) == (0.05, 5)
    variants = ExperimentVariant.objects.filter(experiment=experiment).select_related("run")
    by_label = {v.label: v.run for v in variants}
    assert list(by_label) == ["baseline", "careful", "sloppy"]
    assert by_label["baseline"].target["default_pass_probability"] == 0.55  # the preset's
    assert by_label["careful"].target["seed"] == 7  # the experiment's seed, written in
    assert all(run.graders[0]["key"] == "exact" for run in by_label.values())
    with pytest.raises(DomainError) as again:
        config_experiment_start(document=_document(), name="prompts")
    assert again.value.field == "experiments.prompts.name" and again.value.code == "conflict"


def test_an_undeclared_name_is_not_found_and_applies_nothing():
    with pytest.raises(DomainError) as error:
        config_experiment_start(document=_document(), name="nope")
    assert error.value.field == "experiments.nope" and error.value.code == "not_found"
    assert "prompts" in error.value.message
    assert not Suite.objects.exists()  # the file's suite rolled back with it


def _set(path: str, value):
    def mutate(document: dict) -> None:
        node = document["experiments"]["prompts"]
        *parents, last = path.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is KeyError:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (_set("variants.1.target", {"kind": "simulated", "seed": "7"}), "variants[1].target.seed"),
        (_set("variants.0.preset", "missing"), "variants[0].preset"),
        (_set("variants.1.preset", "baseline"), "variants[1].preset"),  # and a target
        (_set("suite", "nowhere"), "suite"),
        (_set("alpah", 0.1), "alpah"),
        (_set("name", "x"), "name"),
        (_set("grader_set", "missing"), "grader_set"),
        (_set("graders", [{"key": "x", "kind": "exact"}]), "grader_set"),  # both
        (_set("grader_set", KeyError), "graders"),  # neither
        (_set("variants", "two"), "variants"),
    ],
)
def test_a_bad_declaration_names_its_toml_path_and_nothing_is_written(mutate, field):
    document = copy.deepcopy(_document())
    mutate(document)
    with pytest.raises(DomainError) as error:
        config_apply(document=document)
    assert error.value.field == f"experiments.prompts.{field}"
    assert not Suite.objects.exists()


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (_set("alpha", 0.9), "alpha"),
        (_set("alpha", "0.05"), "alpha"),
        (_set("trials_per_case", "5"), "trials_per_case"),
        (_set("k", 2), "k"),
        (_set("seed", -1), "seed"),
        (_set("metric", "best"), "metric"),
        (_set("variants.2.label", "Careful"), "variants[2].label"),
    ],
)
def test_what_only_a_start_checks_is_named_too_and_rolls_the_file_back(mutate, field):
    document = copy.deepcopy(_document())
    mutate(document)
    with pytest.raises(DomainError) as error:
        config_experiment_start(document=document, name="prompts")
    assert error.value.field == f"experiments.prompts.{field}"
    assert not Suite.objects.exists() and not Experiment.objects.exists()


def test_docs_config_shows_the_experiment_example_verbatim():
    doc = (PROJECT_DIR / "docs" / "config.md").read_text(encoding="utf-8")
    assert EXAMPLE.read_text(encoding="utf-8").strip() in doc
