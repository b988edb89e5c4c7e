"""The configured-code rows of the boundary matrix (``tests/flows/boundary_configured_code``),
tried by an engineer (carol) and a reviewer (bob): each does exactly what its row allows, and
a refused attempt changes no run and no user's flags."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User

from evals.models import Case, Run, Suite
from tests.flows.boundary_configured_code import configured_code_rows


def _flags() -> list:
    return sorted(User.objects.values_list("id", "is_superuser", "is_staff", "password"))


@pytest.mark.django_db
@pytest.mark.parametrize("actor", ["carol", "bob"])
def test_each_configured_code_row_does_exactly_what_it_allows(client, carol, bob, actor):
    suite = Suite.objects.create(name="code")
    Case.objects.create(suite=suite, key="c1", input="q", expected="a")
    world = SimpleNamespace(suite=suite, users={"carol": carol, "bob": bob})
    client.force_login(world.users[actor])
    for surface, allowed, attempt in configured_code_rows():
        runs, flags = Run.objects.count(), _flags()
        done = attempt(client, world.users[actor], world)
        assert done == (actor in allowed), surface
        if not done:
            assert (Run.objects.count(), _flags()) == (runs, flags), surface
