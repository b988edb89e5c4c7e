"""The OpenAPI schema (/api/schema/) and the API docs page (/api/docs/): the schema is valid
OpenAPI 3, generates without drf-spectacular warnings, and documents every operation,
parameter and property; the docs page follows the UI's roles."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from tests.conftest import PASSWORD
from tests.core.test_api_core import client_for

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


@pytest.fixture
def schema(alice) -> dict:
    response = client_for(alice).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200, response.content[:500]
    return response.json()


def _undocumented_properties(where: str, node: dict) -> Iterator[str]:
    """Paths (``where.prop.inner``) of properties with no description, walking inline object
    schemas, array items and allOf/anyOf/oneOf members (a ``$ref`` is checked where it is
    defined, as a component)."""
    for prop, sub in (node.get("properties") or {}).items():
        if not str(sub.get("description", "")).strip():
            yield f"{where}.{prop}"
        yield from _undocumented_properties(f"{where}.{prop}", sub)
    if isinstance(node.get("items"), dict):
        yield from _undocumented_properties(f"{where}[]", node["items"])
    if isinstance(node.get("additionalProperties"), dict):
        yield from _undocumented_properties(f"{where}{{}}", node["additionalProperties"])
    for key in ("allOf", "anyOf", "oneOf"):
        for i, member in enumerate(node.get(key) or []):
            yield from _undocumented_properties(f"{where}<{key}{i}>", member)


def _operations(schema: dict) -> Iterator[tuple[str, dict]]:
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                yield f"{method.upper()} {path}", item


def test_the_schema_is_valid_openapi_3(schema):
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # jsonschema against the OpenAPI 3 specification's schema


def test_the_schema_generates_without_warnings_and_validates():
    """``manage.py spectacular --validate --fail-on-warn``: a warning means a view or field
    drf-spectacular could not describe (it guessed, or left it out); they print above."""
    GENERATOR_STATS.reset()  # warnings are cached per process: count this generation only
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):  # drf-spectacular prints them to sys.stderr
            call_command(
                "spectacular",
                "--validate",
                "--fail-on-warn",
                "--format",
                "openapi-json",
                "--file",
                os.devnull,
            )
    except CommandError as exc:
        pytest.fail(f"{exc}:\n{err.getvalue()}")
    assert "Warning" not in err.getvalue(), err.getvalue()


def test_every_component_property_has_a_description(schema):
    missing = [
        gap
        for name, component in schema["components"]["schemas"].items()
        for gap in _undocumented_properties(name, component)
    ]
    assert missing == [], "properties without help text:\n" + "\n".join(missing)


def test_every_parameter_has_a_description(schema):
    missing = []
    for label, item in _operations(schema):
        method = label.split()[0].lower()
        for param in [*item.get("parameters", []), *item[method].get("parameters", [])]:
            if not str(param.get("description", "")).strip():
                missing.append(f"{label} {param['in']} parameter {param['name']!r}")
    assert missing == [], "parameters without a description:\n" + "\n".join(missing)


def test_every_operation_has_a_description_and_says_how_to_authenticate(schema):
    undescribed, unsecured = [], []
    for label, item in _operations(schema):
        operation = item[label.split()[0].lower()]
        if not str(operation.get("description") or operation.get("summary") or "").strip():
            undescribed.append(label)
        if {"bearerAuth": []} not in operation.get("security", []):
            unsecured.append(label)
    assert undescribed == [], "operations without a description:\n" + "\n".join(undescribed)
    assert unsecured == [], "operations without the bearer scheme:\n" + "\n".join(unsecured)
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_the_schema_is_served_to_the_ui_roles_only(alice, bob, carol, mallory):
    for user in (alice, bob, carol):
        assert client_for(user).get("/api/schema/").status_code == 200, user.username
    assert client_for(mallory).get("/api/schema/").status_code == 403
    assert APIClient().get("/api/schema/").status_code == 401


def test_the_docs_page_is_for_the_ui_roles(client, alice, bob, carol, mallory):
    for user in (alice, bob, carol):
        client.login(username=user.username, password=PASSWORD)
        response = client.get("/api/docs/")
        assert response.status_code == 200, user.username
        assert b'id="swagger-ui"' in response.content
        assert b'data-schema-url="/api/schema/"' in response.content
    client.login(username="mallory", password=PASSWORD)
    assert client.get("/api/docs/").status_code == 403


def test_the_docs_page_sends_an_anonymous_visitor_to_the_login_page(client, db):
    response = client.get("/api/docs/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/api/docs/"


def test_the_docs_page_loads_no_inline_script_and_nothing_from_another_origin(client, bob):
    client.login(username="bob", password=PASSWORD)
    response = client.get("/api/docs/")
    html = response.content.decode()
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert "<script>" not in html and "<style" not in html and " style=" not in html
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "https://" not in html and "http://" not in html
