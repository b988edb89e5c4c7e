"""Shared fixtures: the fixed cast of users, and paths to the shared data.

The cast: alice (lead), bob (reviewer), carol (engineer), mallory (outsider, no role).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User

PROJECT_DIR = Path(__file__).resolve().parent.parent
# The project's top-level packages of production code: the import contracts' root packages.
PRODUCTION_PACKAGES: tuple[str, ...] = tuple(
    tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]["root_packages"]
)
SHARED_DATA = Path(os.environ.get("ASSAY_SHARED_DATA", PROJECT_DIR.parent / "shared" / "data"))
PASSWORD = "correct horse battery staple"


def shared_data_file(folder: str) -> Path:
    """Path of ``../shared/data/<folder>/<folder>.shared.jsonl``; skips the test if absent
    (fails under CI=true, where the data must be there)."""
    path = SHARED_DATA / folder / f"{folder}.shared.jsonl"
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared data missing under CI: {path}")
        pytest.skip(f"shared data not found: {path}")
    return path


def _user(username: str, role: str | None) -> User:
    user = User.objects.create_user(username=username, password=PASSWORD)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def alice(db) -> User:
    return _user("alice", "lead")


@pytest.fixture
def bob(db) -> User:
    return _user("bob", "reviewer")


@pytest.fixture
def carol(db) -> User:
    return _user("carol", "engineer")


@pytest.fixture
def mallory(db) -> User:
    return _user("mallory", None)
