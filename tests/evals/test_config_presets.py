"""Config as code for targets and grader sets: ``apply_config``'s ``[targets.NAME]`` and
``[grader_sets.NAME]`` tables, and ``run_suite --target-preset NAME --grader-set NAME``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from evals.models import Case, GraderSetPreset, Run, Suite, TargetPreset
from tests.evals.test_views_runs import make_suite, start_form

CONFIG = """
[targets.sim]
kind = "simulated"
seed = {seed}
default_pass_probability = 1.0

[grader_sets.smoke]
graders = [{{ key = "nonempty", kind = "regex", config = {{ pattern = "." }} }}]
"""


def apply(tmp_path, text, *, as_json=True):
    path = tmp_path / "assay.toml"
    path.write_text(text)
    out = StringIO()
    args = [str(path), "--json"] if as_json else [str(path)]
    call_command("apply_config", *args, stdout=out)
    return json.loads(out.getvalue()) if as_json else out.getvalue()


@pytest.mark.django_db
def test_applying_the_same_presets_twice_changes_nothing(tmp_path):
    first = apply(tmp_path, CONFIG.format(seed=7))
    preset = TargetPreset.objects.get()
    second = apply(tmp_path, CONFIG.format(seed=7))
    assert [r["action"] for r in first["targets"] + first["grader_sets"]] == ["created", "created"]
    assert [r["action"] for r in second["targets"] + second["grader_sets"]] == [
        "unchanged",
        "unchanged",
    ]
    assert TargetPreset.objects.get().updated_at == preset.updated_at
    assert TargetPreset.objects.get().config == {
        "kind": "simulated",
        "seed": 7,
        "default_pass_probability": 1.0,
    }
    assert GraderSetPreset.objects.get().graders == [
        {"key": "nonempty", "kind": "regex", "config": {"pattern": "."}}
    ]


@pytest.mark.django_db
def test_a_changed_target_updates_its_preset_and_says_so(tmp_path):
    apply(tmp_path, CONFIG.format(seed=7))
    old_hash = TargetPreset.objects.get().content_hash
    out = apply(tmp_path, CONFIG.format(seed=8), as_json=False)
    assert out.splitlines() == [
        "target sim: updated (runs keep their own snapshot)",
        "grader set smoke: unchanged",
    ]
    preset = TargetPreset.objects.get()
    assert preset.config["seed"] == 8 and preset.content_hash != old_hash


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[targets.prod]\nkind = "openai"\nbase_url = "ftp://x"\nmodel = "m"\n'
            'prompt_template = "$input"\n',
            r"^targets\.prod\.base_url: must start with http",
        ),
        ('[targets.prod]\nkind = "telepathy"\n', r"^targets\.prod\.kind: unknown kind 'telepathy'"),
        (
            '[grader_sets.smoke]\ngraders = [{ key = "x", kind = "nope" }]\n',
            r"^grader_sets\.smoke\.graders\[0\]\.kind",
        ),
        ("[grader_sets.smoke]\ngrader = []\n", r"^grader_sets\.smoke\.grader: unknown field"),
        ("[grader_sets.smoke]\n", r"^grader_sets\.smoke\.graders: required"),
        ("targets = 3\n", r"^targets: expected tables"),
        ("[models.x]\n", r"^models: unknown table"),
    ],
)
def test_a_bad_preset_is_refused_naming_the_table_and_field(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(CONFIG.format(seed=7) + text if "[targets.prod]" in text else text)
    with pytest.raises(CommandError, match=message):
        call_command("apply_config", str(path))
    assert not TargetPreset.objects.exists() and not GraderSetPreset.objects.exists()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_run_suite_runs_with_a_target_preset_and_a_grader_set(tmp_path):
    suite = Suite.objects.create(name="smoke")
    for i in range(3):
        Case.objects.create(suite=suite, key=f"c{i}", input=f"q{i}", expected="yes")
    apply(tmp_path, CONFIG.format(seed=7))
    out = StringIO()
    call_command(
        "run_suite",
        "smoke",
        "--target-preset",
        "sim",
        "--grader-set",
        "smoke",
        "--trials",
        "2",
        "--name",
        "p1",
        "--wait",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue())["status"] == "succeeded"
    run = Run.objects.get(name="p1")
    assert run.target["seed"] == 7 and run.target_kind == "simulated"
    assert [g["key"] for g in run.graders] == ["nonempty"]
    assert run.trials.count() == 6
    apply(tmp_path, CONFIG.format(seed=9))  # a later change leaves the run's snapshot alone
    run.refresh_from_db()
    assert run.target["seed"] == 7


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target-preset", "nope"], r"--target-preset: no target preset named 'nope'"),
        (["--simulated", "--grader-set", "nope"], r"--grader-set: no grader set named 'nope'"),
    ],
)
def test_run_suite_refuses_an_unknown_preset(args, message):
    Suite.objects.create(name="smoke")
    with pytest.raises(CommandError, match=message):
        call_command("run_suite", "smoke", *args)
    assert not Run.objects.exists()


# -- the start-a-run form --------------------------------------------------------------------


@pytest.mark.django_db
def test_the_run_form_offers_presets_and_starts_a_run_with_them(client, carol, tmp_path):
    suite = make_suite(n_cases=2)
    client.force_login(carol)
    assert "Target preset (declared" not in client.get(reverse("evals:run-new")).content.decode()
    apply(tmp_path, CONFIG.format(seed=7))
    page = client.get(reverse("evals:run-new")).content.decode()
    assert "Target preset (declared" in page and '<option value="smoke">smoke</option>' in page
    response = client.post(
        reverse("evals:run-new"),
        start_form(
            suite, target_kind="preset", target_preset="sim", grader_set="smoke", graders="[]"
        ),
    )
    assert response.status_code == 302
    run = Run.objects.get(suite=suite, name="first")
    assert run.target == {"kind": "simulated", "seed": 7, "default_pass_probability": 1.0}
    assert [g["key"] for g in run.graders] == ["nonempty"]


@pytest.mark.django_db
def test_the_run_form_requires_a_preset_when_the_preset_target_is_chosen(client, carol):
    suite = make_suite()
    client.force_login(carol)
    response = client.post(reverse("evals:run-new"), start_form(suite, target_kind="preset"))
    assert response.status_code == 200
    assert "Required for the preset target." in response.content.decode()
    assert not Run.objects.exists()
