"""The configured-code rows of the boundary matrix (``tests/flows/test_boundary_matrix.py``,
its ``CONFIGURED_CODE_ROWS``): each is ``(surface, the actors allowed, attempt)``, where
``attempt(client, user, world) -> bool`` tries the surface as the logged-in client and says
whether it was done. ``world`` needs ``suite`` (a suite with a case). Only registered
functions run; the demo command's ``handle`` (the escalation a tester found) is refused for
everyone, and a refused attempt leaves every user's flags as they were.

Plug in: ``CONFIGURED_CODE_ROWS = [Row(s, frozenset(a), f) for s, a, f in
configured_code_rows()]``."""

from __future__ import annotations

from collections.abc import Callable

from django.urls import reverse

from evals.models import Run

ENGINEERS = ("carol", "alice", "root")
NOBODY: tuple[str, ...] = ()
EXACT = [{"key": "exact", "kind": "exact", "config": {}}]
ESCALATION = {
    "kind": "callable",
    "path": "demo.management.commands.demo:Command.handle",
    "settings": {
        "no_serve": True,
        "addrport": "127.0.0.1:1",
        "username": "carol",
        "password": "mine",
    },
}
AGENT = "demo.refund_agent:refund_agent"
TOOL_LOOP = {
    "kind": "openai",
    "base_url": "https://api.example.com/v1",
    "model": "m",
    "prompt_template": "$input",
    "environment": "demo.refund_tools:environment",
}
CONTRACT = {
    "schema": {"type": "array"},
    "items": "",
    "id_field": "id",
    "oracle": {"function": "os:system"},
}


def _api_start(name: str, target: dict, graders: list, field: str | None) -> Callable:
    """Start a run named ``name`` through ``POST /api/runs/start``; a 400 must name
    ``field``."""

    def attempt(client, user, world) -> bool:
        body = {
            "suite": str(world.suite.uuid),
            "name": name,
            "trials_per_case": 1,
            "graders": graders,
            "target": target,
        }
        answer = client.post("/api/runs/start", body, content_type="application/json")
        if answer.status_code == 400:
            assert answer.json()["field"] == field, answer.content[:300]
        return Run.objects.filter(name=name).exists()

    return attempt


def _form_start(name: str, path: str, settings: str = "{}") -> Callable:
    """Start a run of the callable ``path`` through the "New run" form (``settings``: the
    settings field's JSON, which the form passes as the target's settings)."""

    def attempt(client, user, world) -> bool:
        client.post(
            reverse("evals:run-new"),
            {
                "suite": str(world.suite.uuid),
                "name": name,
                "target_kind": "callable",
                "callable_path": path,
                "settings_json": settings,
                "trials_per_case": "1",
                "graders": '[{"key": "exact", "kind": "exact"}]',
            },
        )
        return Run.objects.filter(name=name).exists()

    return attempt


def configured_code_rows() -> list[tuple[str, tuple[str, ...], Callable]]:
    """The rows: ``(surface, actors allowed, attempt)``."""
    return [
        (
            "run start (API), the demo command's handle with its options as settings",
            NOBODY,
            _api_start("code-escalation", ESCALATION, EXACT, "target.path"),
        ),
        (
            "run start (form), the demo command's handle as the callable path",
            NOBODY,
            _form_start("code-escalation-form", "demo.management.commands.demo:Command.handle"),
        ),
        (
            "run start (form), a registered pipeline with a setting it does not declare",
            NOBODY,  # the form dropped settings and started it; now they are checked
            _form_start("code-form-undeclared", AGENT, '{"username": "eve"}'),
        ),
        (
            "run start (API), a registered pipeline with its declared settings",
            ENGINEERS,
            _api_start(
                "code-registered",
                {"kind": "callable", "path": AGENT, "settings": {"seed": 1}},
                EXACT,
                None,
            ),
        ),
        (
            "run start (form), a registered pipeline",
            ENGINEERS,
            _form_start("code-registered-form", AGENT),
        ),
        (
            "run start (API), a setting the pipeline does not declare",
            NOBODY,
            _api_start(
                "code-setting",
                {"kind": "callable", "path": AGENT, "settings": {"seed": 1, "username": "x"}},
                EXACT,
                "target.settings.username",
            ),
        ),
        (
            "run start (API), a tool name as the pipeline",
            NOBODY,
            _api_start(
                "code-kind",
                {"kind": "callable", "path": "demo.refund_tools:issue_refund"},
                EXACT,
                "target.path",
            ),
        ),
        (
            "run start (API), an unregistered tool",
            NOBODY,
            _api_start(
                "code-tool", {**TOOL_LOOP, "tools": ["os:system"]}, EXACT, "target.tools[0]"
            ),
        ),
        (
            "run start (API), an unregistered python grader",
            NOBODY,
            _api_start(
                "code-grader",
                {"kind": "callable", "path": AGENT},
                [{"key": "g", "kind": "python", "config": {"function": "subprocess:run"}}],
                "graders[0].config.function",
            ),
        ),
        (
            "run start (API), an unregistered contract oracle",
            NOBODY,
            _api_start(
                "code-oracle",
                {"kind": "callable", "path": AGENT},
                [{"key": "c", "kind": "contract", "config": CONTRACT}],
                "graders[0].config.oracle.function",
            ),
        ),
    ]
