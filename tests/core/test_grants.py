"""Roles change only through core.grants, and each change is recorded with who and when."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command

from core.errors import DomainError
from core.grants import role_grant, role_revoke, superuser_grant, user_create
from core.models import RoleChange
from core.roles import user_has_role
from demo.load import demo_user_ensure


def test_a_lead_grants_a_role_and_it_is_recorded_with_who(alice, mallory):
    assert role_grant(user=mallory, role="engineer", by=alice, via="admin") is True
    assert user_has_role(User.objects.get(pk=mallory.pk), "engineer")
    change = RoleChange.objects.get()
    assert (change.user, change.role, change.action, change.by, change.via) == (
        mallory,
        "engineer",
        "granted",
        alice,
        "admin",
    )
    assert role_grant(user=mallory, role="engineer", by=alice) is False
    assert RoleChange.objects.count() == 1


@pytest.mark.parametrize("actor", ["bob", "carol", "mallory"])
def test_it_refuses_a_grant_by_anyone_but_a_lead(request, actor, mallory):
    by = request.getfixturevalue(actor)
    with pytest.raises(PermissionDenied):
        role_grant(user=mallory, role="lead", by=by, via="admin")
    assert not mallory.groups.exists() and not RoleChange.objects.exists()


def test_it_refuses_a_change_with_no_user_outside_the_command_line(mallory):
    with pytest.raises(PermissionDenied):
        role_grant(user=mallory, role="lead", by=None, via="page")
    assert not mallory.groups.exists()


def test_it_refuses_an_unknown_role_on_its_field(alice, mallory):
    with pytest.raises(DomainError) as exc:
        role_grant(user=mallory, role="admin", by=alice)
    assert exc.value.field == "role"


def test_a_revoke_is_recorded_and_takes_the_role_away(alice, bob):
    assert role_revoke(user=bob, role="reviewer", by=alice) is True
    assert not user_has_role(User.objects.get(pk=bob.pk), "reviewer")
    assert list(RoleChange.objects.values_list("action", "by__username")) == [("revoked", "alice")]


def test_user_create_makes_the_first_user_from_the_command_line(db, monkeypatch):
    monkeypatch.setenv("FIRST_PASSWORD", "a long and unusual passphrase")
    call_command(
        "user_create", "root", "--role", "lead", "--superuser", "--password-from-env",
        "FIRST_PASSWORD",
    )  # fmt: skip
    user = User.objects.get(username="root")
    assert user.is_superuser and user.is_staff
    assert user.check_password("a long and unusual passphrase")
    assert sorted(RoleChange.objects.values_list("role", "via", "by")) == [
        ("lead", "command", None),
        ("superuser", "command", None),
    ]


def test_user_create_refuses_a_weak_password_and_creates_nothing(db, monkeypatch):
    monkeypatch.setenv("WEAK", "password")
    with pytest.raises(CommandError, match="password"):
        call_command("user_create", "eve", "--role", "reviewer", "--password-from-env", "WEAK")
    assert not User.objects.filter(username="eve").exists()
    assert not RoleChange.objects.exists()


def test_user_create_refuses_a_superuser_made_by_a_user(alice):
    with pytest.raises(PermissionDenied):
        user_create(username="eve", password=None, role="lead", superuser=True, by=alice)
    assert not User.objects.filter(username="eve").exists()


def test_the_role_commands_grant_and_revoke_through_the_service(mallory, capsys):
    call_command("role_grant", "mallory", "reviewer")
    call_command("role_grant", "mallory", "reviewer")
    call_command("role_revoke", "mallory", "reviewer")
    out = capsys.readouterr().out
    assert "reviewer granted for mallory" in out and "nothing changed" in out
    assert "reviewer revoked for mallory" in out
    assert list(RoleChange.objects.order_by("id").values_list("action", "via")) == [
        ("granted", "command"),
        ("revoked", "command"),
    ]
    with pytest.raises(CommandError, match="no user named"):
        call_command("role_grant", "nobody", "lead")


def test_superuser_is_granted_at_the_command_line_only_and_recorded(mallory):
    with pytest.raises(PermissionDenied):
        superuser_grant(user=mallory, via="admin")
    assert not User.objects.get(pk=mallory.pk).is_superuser
    assert superuser_grant(user=mallory) is True
    assert superuser_grant(user=mallory) is False
    mallory.refresh_from_db()
    assert mallory.is_superuser and mallory.is_staff
    assert list(RoleChange.objects.values_list("role", "via")) == [("superuser", "command")]


def test_the_demo_login_gets_its_roles_through_the_grants(db):
    user = demo_user_ensure(username="demo", password="assay-demo")
    demo_user_ensure(username="demo", password="assay-demo")
    assert user.is_superuser and user_has_role(User.objects.get(pk=user.pk), "lead")
    assert sorted(RoleChange.objects.values_list("role", flat=True)) == [
        "engineer",
        "lead",
        "reviewer",
        "superuser",
    ]
