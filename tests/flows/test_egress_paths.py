"""Every path that declares or starts a model endpoint refuses a host outside
ASSAY_ENDPOINT_HOSTS, naming the field, and stores nothing (the API start and the judge
version page are rows of tests/flows/test_boundary_matrix.py)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from core.egress import host_entries_parse
from core.errors import DomainError
from evals.comparison.topup import top_up_start
from evals.models import Case, Run, Suite, TopUp
from evals.runner.targets import target_from_config
from interop.config import config_apply
from judges.models import JudgeVersion

pytestmark = pytest.mark.django_db

OUTSIDE = "https://intranet.example.org/v1"
GRADERS = [{"key": "exact", "kind": "exact", "config": {}}]


def openai_target(base_url: str = OUTSIDE) -> dict:
    return {"kind": "openai", "base_url": base_url, "model": "m", "prompt_template": "$input"}


@pytest.fixture(autouse=True)
def egress_rule(settings):
    settings.ASSAY = {**settings.ASSAY, "ENDPOINT_HOSTS": host_entries_parse("api.example.com")}


@pytest.fixture
def suite(db) -> Suite:
    suite = Suite.objects.create(name="smoke")
    Case.objects.create(suite=suite, key="c1", input="q", expected="a")
    return suite


def test_the_start_form_shows_the_refusal_on_the_base_url(client, carol, suite):
    client.force_login(carol)
    page = client.post(
        reverse("evals:run-new"),
        {
            "suite": str(suite.uuid),
            "name": "r",
            "target_kind": "openai",
            "base_url": OUTSIDE,
            "model": "m",
            "prompt_template": "$input",
            "settings_json": "{}",
            "trials_per_case": 1,
            "graders": json.dumps(GRADERS),
        },
    ).content.decode()
    assert "intranet.example.org:443 is not in ASSAY_ENDPOINT_HOSTS" in page
    assert not Run.objects.exists()


def test_run_suite_names_target_base_url(suite, tmp_path):
    target, graders = tmp_path / "t.json", tmp_path / "g.json"
    target.write_text(json.dumps(openai_target()))
    graders.write_text(json.dumps(GRADERS))
    with pytest.raises(CommandError, match=r"target\.base_url.*ASSAY_ENDPOINT_HOSTS"):
        call_command("run_suite", "smoke", "--target", str(target), "--graders", str(graders))
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (
            {"judges": [{"name": "j", "kind": "rubric", "model": "m", "base_url": OUTSIDE}]},
            "base_url",
        ),
        ({"targets": {"prod": openai_target()}}, "base_url"),
    ],
)
def test_config_as_code_refuses_an_endpoint_outside_the_rule(tmp_path, document, field):
    with pytest.raises(DomainError) as info:
        config_apply(document=document, base_dir=tmp_path)
    assert info.value.field.endswith(field) and "ASSAY_ENDPOINT_HOSTS" in info.value.message
    assert not JudgeVersion.objects.exists()


def test_a_top_up_refuses_a_run_whose_endpoint_is_now_outside_the_rule(carol, suite):
    runs = [
        Run.objects.create(
            suite=suite,
            name=name,
            target_kind="openai",
            target=openai_target(),
            status=Run.Status.SUCCEEDED,
            source=Run.Source.EXECUTED,
            trials_per_case=1,
        )
        for name in ("base", "head")
    ]
    with pytest.raises(DomainError) as info:
        top_up_start(base=runs[0], head=runs[1], by=carol)
    assert info.value.field == "head" and "ASSAY_ENDPOINT_HOSTS" in info.value.message
    assert not TopUp.objects.exists()


def test_a_worker_never_calls_an_endpoint_outside_the_rule():
    with pytest.raises(DomainError) as info:
        target_from_config(openai_target("http://169.254.169.254/latest"))
    assert info.value.field == "target.base_url"
