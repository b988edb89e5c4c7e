"""Commands name a run by UUID, by ``suite/run`` or by a unique run name
(``evals.selectors.run_resolve``), and every surface has the same default trials per case."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from core.errors import DomainError
from evals.api.runs.lifecycle import RunStartInput
from evals.forms import RunStartForm
from evals.management.commands.run_suite import Command
from evals.models import Run, Suite
from evals.runner.start import DEFAULT_TRIALS_PER_CASE
from evals.selectors import run_resolve

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs():
    a, b = Suite.objects.create(name="a"), Suite.objects.create(name="b/c")
    return {
        "only": Run.objects.create(suite=a, name="only", target_kind="simulated"),
        "twice-a": Run.objects.create(suite=a, name="twice", target_kind="simulated"),
        "twice-b": Run.objects.create(suite=b, name="twice", target_kind="simulated"),
        "slashed": Run.objects.create(suite=b, name="d", target_kind="simulated"),
    }


def test_a_run_is_found_by_uuid_suite_and_name_or_a_unique_name(runs):
    assert run_resolve(ref=str(runs["only"].uuid)) == runs["only"]
    assert run_resolve(ref="a/only") == runs["only"]
    assert run_resolve(ref="only") == runs["only"]
    assert run_resolve(ref="b/c/d") == runs["slashed"]  # a suite name holding a slash
    assert run_resolve(ref="b/c/twice") == runs["twice-b"]


def test_an_ambiguous_or_unknown_run_is_refused_with_what_to_give(runs):
    with pytest.raises(DomainError, match="several suites; give 'suite/run'") as info:
        run_resolve(ref="twice")
    assert (info.value.field, info.value.code) == ("run", "conflict")
    with pytest.raises(DomainError) as info:
        run_resolve(ref="nope")
    assert info.value.code == "not_found"
    with pytest.raises(CommandError, match="several suites"):
        call_command("run_report", "twice")


def test_the_default_trials_per_case_is_the_same_on_form_command_and_api():
    assert DEFAULT_TRIALS_PER_CASE == 5
    assert RunStartForm().fields["trials_per_case"].initial == DEFAULT_TRIALS_PER_CASE
    parser = Command().create_parser("manage.py", "run_suite")
    assert parser.parse_args(["s", "--simulated"]).trials == DEFAULT_TRIALS_PER_CASE
    assert RunStartInput().fields["trials_per_case"].default == DEFAULT_TRIALS_PER_CASE
