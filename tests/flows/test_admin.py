"""The admin registers every model and its change lists render with data present."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.urls import reverse

from evals.models import Baseline, Case, CaseChange, Grade, Run, Suite, Trial


def test_every_model_of_the_three_apps_is_in_the_admin():
    missing = [
        m.__name__
        for app in ("evals", "judges", "labeling", "providers")
        for m in apps.get_app_config(app).get_models()
        if m not in admin.site._registry
    ]
    assert missing == []


@pytest.mark.django_db
def test_every_change_list_and_change_form_renders_for_staff(client):
    suite = Suite.objects.create(name="s")
    case = Case.objects.create(suite=suite, key="c1", input="<img src=x onerror=alert(1)>")
    run = Run.objects.create(suite=suite, name="r", target_kind="simulated")
    trial = Trial.objects.create(run=run, case=case, attempt=1, status="ok", output="x" * 5000)
    Grade.objects.create(trial=trial, grader="g", status="ok", passed=True, reason="ok")
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    for model in admin.site._registry:
        app, name = model._meta.app_label, model._meta.model_name
        if app not in ("evals", "judges", "labeling", "providers"):
            continue
        assert client.get(reverse(f"admin:{app}_{name}_changelist")).status_code == 200, name
    for obj in (suite, case, run, trial):
        url = reverse(f"admin:evals_{obj._meta.model_name}_change", args=[obj.pk])
        assert client.get(url).status_code == 200, url


@pytest.mark.django_db
def test_editing_a_case_s_content_in_the_admin_retires_it_and_creates_its_replacement(client):
    suite = Suite.objects.create(name="s")
    old = Case.objects.create(
        suite=suite, key="c1", input="What is 2+2?", expected="4", tags=["math"]
    )
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    url = reverse("admin:evals_case_change", args=[old.pk])
    response = client.post(
        url,
        {
            "input": '"What is 2+3?"',
            "expected": '"5"',
            "context": "[]",
            "tags": '["math"]',
        },
    )
    assert response.status_code == 302, response.content[:2000]
    old.refresh_from_db()
    new = Case.objects.active().get(suite=suite, key="c1")
    assert old.retired_at is not None and old.replaced_by == new
    assert (old.input, new.input) == ("What is 2+2?", "What is 2+3?")
    assert new.content_hash != old.content_hash


@pytest.mark.django_db
def test_editing_only_a_case_s_tags_in_the_admin_keeps_the_case(client):
    suite = Suite.objects.create(name="s")
    case = Case.objects.create(suite=suite, key="c1", input="q", expected="a", tags=["x"])
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    url = reverse("admin:evals_case_change", args=[case.pk])
    response = client.post(
        url,
        {
            "input": '"q"',
            "expected": '"a"',
            "context": "[]",
            "tags": '["x", "y"]',
        },
    )
    assert response.status_code == 302
    assert Case.objects.count() == 1
    case.refresh_from_db()
    assert case.tags == ["x", "y"] and case.retired_at is None


@pytest.mark.django_db
def test_editing_a_goal_state_in_the_admin_is_a_new_case_recorded_with_who(client):
    suite = Suite.objects.create(name="s")
    old = Case.objects.create(suite=suite, key="c1", input="q", expected="a", goal_state={"a": 1})
    root = User.objects.create_superuser("root", password="pw-root-123")
    client.force_login(root)
    url = reverse("admin:evals_case_change", args=[old.pk])
    data = {"input": '"q"', "expected": '"a"', "context": "[]", "tags": "[]"}
    response = client.post(url, {**data, "goal_state": '{"a": 2}'})
    assert response.status_code == 302, response.content[:2000]
    old.refresh_from_db()
    new = Case.objects.active().get(suite=suite, key="c1")
    assert old.replaced_by == new and new.goal_state == {"a": 2}
    change = CaseChange.objects.get(case=new)
    assert (change.action, change.via, change.by, change.previous) == (
        "replaced",
        "admin",
        root,
        old,
    )


@pytest.mark.django_db
def test_the_admin_refuses_nan_and_unstorable_text_by_the_rule_of_every_path(client):
    suite = Suite.objects.create(name="s")
    case = Case.objects.create(suite=suite, key="c1", input="q", expected="a")
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    url = reverse("admin:evals_case_change", args=[case.pk])
    data = {"input": '"q"', "context": "[]", "tags": "[]", "goal_state": ""}
    for expected, says in (('{"n": NaN}', "NaN"), ('"a\\u0000"', "U+0000")):
        response = client.post(url, {**data, "expected": expected})
        assert response.status_code == 200 and says in response.content.decode()
    assert Case.objects.get().expected == "a" and Case.objects.count() == 1


@pytest.mark.django_db
def test_the_user_page_shows_roles_read_only_with_their_history(client, mallory):
    from core.grants import role_grant  # noqa: PLC0415

    root = User.objects.create_superuser("root", password="pw-root-123")
    role_grant(user=mallory, role="engineer", by=root, via="admin")
    client.force_login(root)
    page = client.get(reverse("admin:auth_user_change", args=[mallory.pk])).content.decode()
    assert 'name="groups"' not in page and 'name="is_superuser"' not in page
    assert "Grant role lead" in client.get(reverse("admin:auth_user_changelist")).content.decode()
    assert "engineer" in page and "granted" in page  # the history, inline
    assert client.get(reverse("admin:core_rolechange_changelist")).status_code == 200
    assert client.get(reverse("admin:auth_user_add")).status_code == 200


@pytest.mark.django_db
def test_a_superuser_cannot_edit_the_evidence_of_runs_or_a_suites_trust_thresholds(client):
    # A trial's output, a run, a baseline: what reports, gates and calibration read. Suite
    # trust thresholds: what a judge needs to be trusted. All change through their services.
    suite = Suite.objects.create(name="s", trust_thresholds={"MIN_KAPPA": 0.6})
    case = Case.objects.create(suite=suite, key="c1", input="q")
    run = Run.objects.create(suite=suite, name="r", target_kind="simulated")
    trial = Trial.objects.create(run=run, case=case, attempt=1, status="ok", output="honest")
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    for model in (Trial, Run, Baseline):
        model_admin = admin.site._registry[model]
        assert not model_admin.has_change_permission(None), model.__name__
        assert not model_admin.has_delete_permission(None), model.__name__
    url = reverse("admin:evals_trial_change", args=[trial.pk])
    response = client.post(url, {"output": "forged", "status": "ok", "attempt": 1})
    assert response.status_code == 403
    trial.refresh_from_db()
    assert trial.output == "honest"
    page = client.get(reverse("admin:evals_suite_change", args=[suite.pk])).content.decode()
    assert 'name="trust_thresholds"' not in page
