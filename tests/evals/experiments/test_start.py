"""Starting an experiment (evals.experiments.start): one run per variant, all or nothing, the
variant's errors named by its index, the shared seed written where a target takes one."""

from __future__ import annotations

import pytest

from core.errors import DomainError
from evals.experiments.start import experiment_start
from evals.models import Case, Experiment, ExperimentVariant, Run, Suite, Trial
from evals.runner.targets.base import CaseInput
from evals.runner.targets.openai import OpenAIConfig, OpenAITarget, trial_seed

pytestmark = pytest.mark.django_db

GRADERS = [{"key": "says-yes", "kind": "contains", "config": {"value": "yes"}}]


def _suite(n: int = 3) -> Suite:
    suite = Suite.objects.create(name="support")
    Case.objects.bulk_create(
        Case(suite=suite, key=f"c{i}", input=f"question {i}", content_hash=f"{i:064d}")
        for i in range(n)
    )
    return suite


def _simulated(p: float, seed: int | None = None) -> dict:
    target = {"kind": "simulated", "model": "simulated", "default_pass_probability": p}
    if seed is not None:
        target["seed"] = seed
    return target


def _model(template: str, **extra) -> dict:
    return {
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "gpt-4o-mini",
        "api_key_env": None,
        "prompt_template": template,
        **extra,
    }


def test_each_variant_becomes_a_run_with_the_shared_graders_and_trials(carol):
    suite = _suite(3)
    experiment = experiment_start(
        suite=suite,
        name="prompts",
        variants=[
            {"label": "terse", "target": _simulated(0.4)},
            {"label": " polite ", "target": _simulated(0.8)},
        ],
        graders=GRADERS,
        trials_per_case=4,
        seed=77,
        started_by=carol,
    )
    variants = list(ExperimentVariant.objects.filter(experiment=experiment).select_related("run"))
    assert [(v.position, v.label) for v in variants] == [(0, "terse"), (1, "polite")]
    assert [v.run.name for v in variants] == ["prompts · terse", "prompts · polite"]
    for variant in variants:
        assert variant.run.trials_total == 12
        assert Trial.objects.filter(run=variant.run).count() == 12
        assert variant.run.target["seed"] == 77  # the shared seed, written where none was named
        assert variant.run.started_by == carol
        assert [g["key"] for g in variant.run.graders] == ["says-yes"]
    assert experiment.trials_per_case == 4 and experiment.seed == 77


def test_a_variant_naming_its_own_seed_keeps_it():
    experiment = experiment_start(
        suite=_suite(),
        name="e",
        variants=[
            {"label": "a", "target": _simulated(0.5, seed=5)},
            {"label": "b", "target": _simulated(0.5)},
        ],
        graders=GRADERS,
        trials_per_case=1,
        seed=9,
    )
    seeds = [v.run.target["seed"] for v in experiment.variants.select_related("run")]
    assert seeds == [5, 9]


def test_a_refused_variant_starts_nothing_and_names_its_index():
    suite = _suite()
    with pytest.raises(DomainError) as caught:
        experiment_start(
            suite=suite,
            name="e",
            variants=[
                {"label": "ok", "target": _simulated(0.5, seed=1)},
                {"label": "bad", "target": _model("no placeholder here")},
            ],
            graders=GRADERS,
            trials_per_case=2,
        )
    assert caught.value.field == "variants[1].target.prompt_template"
    assert Run.objects.count() == 0 and Experiment.objects.count() == 0
    assert Trial.objects.count() == 0


@pytest.mark.parametrize(
    ("variants", "field"),
    [
        ([{"label": "only", "target": _simulated(0.5, 1)}], "variants"),
        ("nope", "variants"),
        ([{"label": "a", "target": _simulated(0.5, 1)}, {"label": "A", "target": {}}],
         "variants[1].label"),
        ([{"label": "a", "target": _simulated(0.5, 1)}, {"label": "", "target": {}}],
         "variants[1].label"),
        ([{"label": "a", "target": _simulated(0.5, 1)}, {"label": "b", "target": "x"}],
         "variants[1].target"),
        ([{"label": "a", "target": _simulated(0.5, 1)}, {"label": "b", "extra": 1, "target": {}}],
         "variants[1].extra"),
        ([{"label": "a", "target": _simulated(0.5, 1)}, {"label": "b\x00", "target": {}}],
         "variants[1].label"),
    ],
)  # fmt: skip
def test_bad_variants_are_refused_on_their_field(variants, field):
    with pytest.raises(DomainError) as caught:
        experiment_start(
            suite=_suite(), name="e", variants=variants, graders=GRADERS, trials_per_case=1
        )
    assert caught.value.field == field
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": True}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"metric": "best"}, "metric"),
        ({"metric": "pass_hat_k", "k": 4}, "k"),
        ({"k": 2}, "k"),
        ({"seed": -1}, "seed"),
        ({"trials_per_case": "3"}, "trials_per_case"),
        ({"name": " "}, "name"),
        ({"graders": []}, "graders"),
    ],
)
def test_bad_settings_are_refused_on_their_field(kwargs, field):
    args = {
        "suite": _suite(),
        "name": "e",
        "variants": [
            {"label": "a", "target": _simulated(0.5, 1)},
            {"label": "b", "target": _simulated(0.6, 1)},
        ],
        "graders": GRADERS,
        "trials_per_case": 3,
        **kwargs,
    }
    with pytest.raises(DomainError) as caught:
        experiment_start(**args)
    assert caught.value.field == field
    assert Run.objects.count() == 0 and Experiment.objects.count() == 0


def test_a_second_experiment_of_the_same_name_is_a_conflict():
    suite = _suite()
    variants = [
        {"label": "a", "target": _simulated(0.5, 1)},
        {"label": "b", "target": _simulated(0.6, 1)},
    ]
    experiment_start(suite=suite, name="e", variants=variants, graders=GRADERS, trials_per_case=1)
    with pytest.raises(DomainError) as caught:
        experiment_start(
            suite=suite, name="e", variants=variants, graders=GRADERS, trials_per_case=1
        )
    assert (caught.value.field, caught.value.code) == ("name", "conflict")
    assert Run.objects.count() == 2


def test_model_variants_get_a_seed_per_trial_shared_across_variants():
    experiment = experiment_start(
        suite=_suite(),
        name="e",
        variants=[
            {"label": "a", "target": _model("Q: $input")},
            {"label": "b", "target": _model("Answer: $input", settings={"temperature": 1})},
            {"label": "fixed", "target": _model("$input", settings={"seed": 3})},
        ],
        graders=GRADERS,
        trials_per_case=1,
        seed=42,
    )
    runs = [v.run for v in experiment.variants.select_related("run")]
    assert [r.target.get("seed_per_trial") for r in runs] == [42, 42, None]
    case = CaseInput(key="c1", input="hi", attempt=2)
    bodies = [OpenAITarget(OpenAIConfig.parse(r.target)).request_body(case) for r in runs]
    assert bodies[0]["seed"] == bodies[1]["seed"] == trial_seed(42, "c1", 2)
    assert bodies[2]["seed"] == 3
    other = OpenAITarget(OpenAIConfig.parse(runs[0].target)).request_body(
        CaseInput(key="c1", input="hi", attempt=3)
    )
    assert other["seed"] != bodies[0]["seed"]  # attempts stay independent draws


def test_seed_per_trial_is_refused_beside_a_seed_setting_and_on_anthropic():
    with pytest.raises(DomainError) as caught:
        OpenAIConfig.parse(_model("$input", seed_per_trial=1, settings={"seed": 2}))
    assert caught.value.field == "target.seed_per_trial"
    with pytest.raises(DomainError) as caught:
        OpenAIConfig.parse(
            _model("$input", seed_per_trial=1, provider="anthropic", settings={"max_tokens": 5})
        )
    assert caught.value.field == "target.seed_per_trial"
    with pytest.raises(DomainError) as caught:
        OpenAIConfig.parse(_model("$input", seed_per_trial="7"))
    assert caught.value.field == "target.seed_per_trial"
