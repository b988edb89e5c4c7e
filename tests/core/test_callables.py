"""Functions named in configuration come only from ``ASSAY["CALLABLE_MODULES"]``: a run or a
grader set naming ``os:system`` is refused naming the field, before anything is imported."""

from __future__ import annotations

import json
import sys

import pytest

from core.callables import callable_allowed, callable_resolve
from core.errors import DomainError
from evals.grading.graders import parse_grader_specs
from evals.models import Case, Run, Suite


def test_only_modules_under_the_allow_list_resolve(settings):
    settings.ASSAY = {**settings.ASSAY, "CALLABLE_MODULES": ("demo", "tests")}
    assert callable_allowed("demo") and callable_allowed("demo.refund_agent")
    assert not callable_allowed("demolition") and not callable_allowed("os")
    assert callable_resolve("tests.grader_oracles:as_dict", field="f").__name__ == "as_dict"
    sys.modules.pop("this", None)
    for path in ("os:system", "subprocess:run", "this:s", "demolition.x:f", "builtins:eval"):
        with pytest.raises(DomainError) as caught:
            callable_resolve(path, field="target.path")
        assert caught.value.field == "target.path"
        assert "not in ASSAY_CALLABLE_MODULES (allowed: demo, tests)" in caught.value.message
    assert "this" not in sys.modules  # refused before import: no module code ran
    settings.ASSAY = {**settings.ASSAY, "CALLABLE_MODULES": ()}
    with pytest.raises(DomainError, match=r"allowed: none"):
        callable_resolve("tests.grader_oracles:as_dict", field="f")


def test_a_python_grader_naming_a_system_function_is_refused_naming_it():
    with pytest.raises(DomainError) as caught:
        parse_grader_specs([{"key": "g", "kind": "python", "config": {"function": "os:system"}}])
    assert caught.value.field.endswith("function") and "ASSAY_CALLABLE_MODULES" in str(caught.value)


@pytest.mark.django_db
def test_the_api_refuses_a_run_of_os_system_naming_the_field(client, carol):
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c1", input="rm -rf /")
    client.force_login(carol)
    body = {
        "suite": str(suite.uuid),
        "name": "x",
        "trials_per_case": 1,
        "graders": [{"key": "ok", "kind": "exact"}],
        "target": {"kind": "callable", "path": "os:system"},
    }
    response = client.post("/api/runs/start", json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert "target.path" in response.content.decode()
    assert "ASSAY_CALLABLE_MODULES" in response.content.decode()
    assert not Run.objects.exists()


def test_an_attribute_chain_cannot_leave_the_allowed_modules(settings):
    """Found by a tester: ``demo.refund_agent:random._os.system`` resolved to ``os.system``
    through the allowed module's imports. A chain may not name a special attribute, pass
    through another module, or end at a function defined outside the allowed modules."""
    settings.ASSAY = {**settings.ASSAY, "CALLABLE_MODULES": ("tests",)}
    refused = {
        "tests.callable_escapes:json.codecs.builtins.eval": "is a module",  # through modules
        "tests.callable_escapes:json.loads": "is a module",
        "tests.callable_escapes:__builtins__": "is a special name",
        "tests.callable_escapes:answer.__globals__": "is a special name",
        "tests.callable_escapes:_os_system": "which is not in ASSAY_CALLABLE_MODULES",
        "tests.callable_escapes:system": "which is not in ASSAY_CALLABLE_MODULES",  # imported
    }
    for path, says in refused.items():
        with pytest.raises(DomainError) as caught:
            callable_resolve(path, field="target.path")
        assert caught.value.field == "target.path", path
        assert says in caught.value.message, (path, caught.value.message)
    assert callable_resolve("tests.callable_escapes:answer", field="f")(None) == "42"
