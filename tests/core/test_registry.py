"""Functions named in configuration are looked up in the registry the operator loaded, never
imported from the name: an engineer cannot run ``os:system`` or the demo command's
``handle``, a name of one kind is not another, and settings a pipeline does not declare are
refused by name."""

from __future__ import annotations

import importlib.metadata
import io
import json
import sys
import types

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

import core.registry
from core.errors import DomainError
from core.registry import Registry, registered, registry_get, registry_load
from evals.grading.grader_config import parse_grader_specs
from evals.models import Case, Run, Suite
from evals.runner.targets import target_from_config


def _start_body(suite: Suite, target: dict) -> str:
    return json.dumps(
        {
            "suite": str(suite.uuid),
            "name": "x",
            "trials_per_case": 1,
            "graders": [{"key": "ok", "kind": "exact"}],
            "target": target,
        }
    )


@pytest.mark.django_db
def test_an_engineer_cannot_become_superuser_through_the_demo_command(client, carol):
    """The escalation a tester found: the demo command's ``handle`` as a callable target,
    with the command's options as settings, made the engineer a superuser."""
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c1", input="hi")
    password_before = carol.password
    users_before = set(User.objects.values_list("username", flat=True))
    client.force_login(carol)
    target = {
        "kind": "callable",
        "path": "demo.management.commands.demo:Command.handle",
        "settings": {
            "no_serve": True,
            "addrport": "127.0.0.1:1",
            "username": "carol",
            "password": "mine",
        },
    }
    response = client.post(
        "/api/runs/start", _start_body(suite, target), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "target.path"
    assert "is not a registered pipeline" in response.json()["detail"]
    carol.refresh_from_db()
    assert not carol.is_superuser and not carol.is_staff and carol.password == password_before
    assert set(User.objects.values_list("username", flat=True)) == users_before
    assert not User.objects.filter(is_superuser=True).exists()
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_a_setting_the_pipeline_does_not_take_naming_it(client, carol):
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c1", input="hi")
    client.force_login(carol)
    target = {
        "kind": "callable",
        "path": "demo.refund_agent:refund_agent",
        "settings": {"seed": 3, "username": "carol"},
    }
    response = client.post(
        "/api/runs/start", _start_body(suite, target), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "target.settings.username"
    assert "its settings: seed" in response.json()["detail"]
    assert not Run.objects.exists()


def test_a_name_nothing_registered_is_refused_and_nothing_is_imported():
    sys.modules.pop("this", None)
    for name in (
        "os:system",
        "subprocess:run",
        "this:s",
        "demo.refund_agent:random._os.system",
        "tests.grader_oracles:as_dict.__globals__",
    ):
        with pytest.raises(DomainError) as caught:
            registry_get(name=name, kind="grader", field="graders[0].config.function")
        assert caught.value.field == "graders[0].config.function"
        assert "is not a registered grader" in caught.value.message
        assert "ASSAY_REGISTRIES" in caught.value.message
    assert "this" not in sys.modules  # nothing ran: the name was only looked up
    assert registry_get(name="tests.grader_oracles:as_dict", kind="grader", field="f")(
        None, "ok"
    ) == {"passed": True, "score": 0.5, "reason": "checked by as_dict"}


def test_a_registered_name_of_another_kind_is_refused():
    with pytest.raises(DomainError) as caught:
        registry_get(name="demo.refund_tools:issue_refund", kind="pipeline", field="target.path")
    assert caught.value.field == "target.path"
    assert "registered for tool only, not as a pipeline" in caught.value.message
    with pytest.raises(DomainError, match="not as a grader"):
        parse_grader_specs(
            [
                {
                    "key": "g",
                    "kind": "python",
                    "config": {"function": "demo.refund_agent:refund_agent"},
                }
            ]
        )


def test_with_no_registry_loaded_no_configured_code_runs_and_the_error_names_the_setting(
    monkeypatch,
):
    monkeypatch.setattr(core.registry, "_active", registry_load(modules=(), entry_points=False))
    with pytest.raises(DomainError) as caught:
        target_from_config({"kind": "callable", "path": "demo.refund_agent:refund_agent"})
    assert caught.value.field == "target.path"
    assert "no registry is loaded" in caught.value.message
    assert "ASSAY_REGISTRIES" in caught.value.message


def test_importing_a_decorated_function_registers_nothing_until_a_loaded_module_exposes_it():
    import tests.grader_oracles  # noqa: F401, PLC0415 - imported, yet not in this registry

    demo_only = registry_load(modules=("demo.registry",), entry_points=False)
    assert "demo.refund_agent:refund_agent" in demo_only.entries
    assert "tests.grader_oracles:as_dict" not in demo_only.entries
    assert demo_only.sources == ["demo.registry"]


def test_an_installed_package_registers_through_the_entry_point_group(monkeypatch):
    point = importlib.metadata.EntryPoint(
        name="oracles", value="tests.grader_oracles", group="assay.registry"
    )
    asked = []

    def entry_points(**selection):
        asked.append(selection)
        return [point] if selection.get("group") == "assay.registry" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    registry = registry_load(modules=())
    assert asked == [{"group": "assay.registry"}]
    assert registry.sources == ["entry point oracles"]
    entry = registry.entries["tests.grader_oracles:as_dict"]
    assert entry.kinds == {"grader"} and entry.source == "entry point oracles"


def test_the_demo_command_loads_its_registry_and_passes_it_to_its_worker(settings, monkeypatch):
    from demo.management.commands import demo  # noqa: PLC0415 - the command under test

    settings.ASSAY = {**settings.ASSAY, "REGISTRIES": ("examples.registry",)}
    assert demo.demo_registries() == ("examples.registry", "demo.registry")
    started = {}
    monkeypatch.setattr(demo.subprocess, "Popen", lambda command, **kw: started.update(kw))
    demo.Command()._start_worker()
    assert started["env"]["ASSAY_REGISTRIES"] == "examples.registry,demo.registry"


def test_registry_list_prints_each_name_with_its_kinds_and_registry(monkeypatch):
    out = io.StringIO()
    call_command("registry_list", "--kind", "pipeline", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "registries: demo.registry, examples.registry, tests.registry"
    assert "demo.refund_agent:refund_agent  pipeline  (demo.registry)" in lines
    assert not any("refund_tools" in line for line in lines)  # tools, not pipelines
    monkeypatch.setattr(core.registry, "_active", registry_load(modules=(), entry_points=False))
    out = io.StringIO()
    call_command("registry_list", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"registries": [], "functions": []}


def test_two_registries_giving_one_name_to_different_functions_stop_the_start():
    first, second = types.ModuleType("first"), types.ModuleType("second")
    first.f = registered("tool", name="shop:f")(lambda state: 1)
    second.g = registered("tool", name="shop:f")(lambda state: 2)
    registry = Registry()
    registry.add_module(first, source="first")
    with pytest.raises(ImproperlyConfigured, match="'shop:f', already registered by first"):
        registry.add_module(second, source="second")
