"""The boundary matrix: every role against every surface that reads or changes a grant, a
label or a verdict (trust, roles, labels, adjudications, judge versions, run targets).

Each cell is one actor trying one surface. It asserts the outcome the rule allows (done or
refused) and, when refused, that nothing of the guarded tables changed. The actors are the
fixed cast (alice lead, bob reviewer, carol engineer, mallory no role), an anonymous visitor
and ``root``, a superuser in no group, who reaches the admin. The rows' data is built once
per module (``world``, rolled back at its end) and each cell runs in its own savepoint, so
the matrix runs on SQLite and PostgreSQL alike and stays fast.

A new surface is a ``Row``: its name, the actors it allows, and a function that tries it and
says whether it was done. The configured-code rows go in ``CONFIGURED_CODE_ROWS``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.test import Client
from django.urls import reverse

from core.egress import host_entries_parse
from core.errors import DomainError
from core.grants import role_grant
from core.models import RoleChange
from evals.models import Case, Run, Suite
from judges.models import Judge, JudgeApproval, JudgeVersion
from judges.trust import trust_grant
from judges.versions import judge_version_create
from labeling.models import Adjudication, Label, LabelRevision
from labeling.selectors import calibration_compute
from tests.calibration_builders import good_judge_run
from tests.conftest import PASSWORD
from tests.flows.boundary_configured_code import configured_code_rows

ANONYMOUS, MALLORY, BOB, CAROL, ALICE, ROOT = (
    "anonymous",
    "mallory",
    "bob",
    "carol",
    "alice",
    "root",
)
ACTORS = (ANONYMOUS, MALLORY, BOB, CAROL, ALICE, ROOT)
NOBODY: frozenset[str] = frozenset()
LEADS = frozenset({ALICE, ROOT})  # a superuser has every role
ENGINEERS = frozenset({CAROL, ALICE, ROOT})
LABELERS = frozenset({BOB, ALICE, ROOT})
ADMIN_USERS = frozenset({ROOT})  # the only staff account of the cast

ALLOWED_HOST = "api.example.com"
INSIDE = f"https://{ALLOWED_HOST}/v1"
OUTSIDE = "https://intranet.example.org/v1"
METADATA = "http://169.254.169.254/latest"
GRADERS = [{"key": "exact", "kind": "exact", "config": {}}]

# What a refused cell must leave as it was.
GUARDED = (JudgeApproval, JudgeVersion, Judge, Label, LabelRevision, Adjudication, RoleChange, Run)


@dataclass
class World:
    users: dict[str, User]
    passing: JudgeVersion  # untrusted; its calibration figures meet the trust rule
    failing: JudgeVersion  # untrusted; no labels, so the rule cannot hold
    trusted: JudgeVersion  # trusted by alice through the service
    approval: JudgeApproval
    label: Label
    adjudication: Adjudication
    trial_uuid: str
    suite: Suite


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            yield _world_build()
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


def _world_build() -> World:
    users = {}
    for name, role in ((ALICE, "lead"), (BOB, "reviewer"), (CAROL, "engineer"), (MALLORY, None)):
        users[name] = User.objects.create_user(username=name, password=PASSWORD)
        if role:
            users[name].groups.add(Group.objects.get(name=role))
    users[ROOT] = User.objects.create_superuser("root", password=PASSWORD)
    _run, passing, trials = good_judge_run()

    def version(name: str) -> JudgeVersion:
        return judge_version_create(
            judge_name=name,
            kind="rubric",
            model="judge-model",
            base_url=INSIDE,
            prompt_template="",
            params={},
            output_schema={},
        )[0]

    failing, trusted = version("unlabeled"), version("trusted")
    approval = trust_grant(judge_version=trusted, by=users[ALICE], figures={"n": 0})
    adjudication = Adjudication.objects.create(
        trial=trials[0], decided_by=users[ALICE], verdict="pass", reason="gold is right"
    )
    suite = Suite.objects.create(name="egress")
    Case.objects.create(suite=suite, key="c1", input="q", expected="a")
    return World(
        users=users,
        passing=passing,
        failing=failing,
        trusted=trusted,
        approval=approval,
        label=Label.objects.filter(trial=trials[1]).first(),
        adjudication=adjudication,
        trial_uuid=str(trials[2].uuid),
        suite=suite,
    )


@pytest.fixture(autouse=True)
def egress_rule(settings):
    settings.ASSAY = {**settings.ASSAY, "ENDPOINT_HOSTS": host_entries_parse(ALLOWED_HOST)}


def snapshot() -> dict:
    rows = {m._meta.label: list(m.objects.order_by("pk").values()) for m in GUARDED}
    rows["groups"] = sorted(User.groups.through.objects.values_list("user_id", "group_id"))
    rows["flags"] = sorted(User.objects.values_list("id", "is_superuser", "is_staff"))
    rows["roles"] = sorted(Group.objects.values_list("id", "name"))
    return rows


# -- helpers ----------------------------------------------------------------------------------


class _FormInputs(HTMLParser):
    """The named inputs of the form whose action is ``action``."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action, self.inside, self.data = action, False, {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.inside = attrs.get("action") == self.action
        elif self.inside and tag in ("input", "textarea") and attrs.get("name"):
            self.data[attrs["name"]] = attrs.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False


def form_as_a_lead_sees_it(world: World, page: str, action: str) -> dict:
    lead = Client()
    lead.force_login(world.users[ROOT])
    parser = _FormInputs(action)
    parser.feed(lead.get(page).content.decode())
    assert parser.data, f"no form posting to {action} on {page}"
    return parser.data


def approve_form(version: JudgeVersion) -> dict:
    cal = calibration_compute(judge_version=version)
    return {
        "calibration_set": "",
        "n": cal.n,
        "n_judge_errors": cal.n_judge_errors,
        **{k: getattr(cal.confusion, k) for k in vars(cal.confusion)},
    }


def ok(response) -> bool:
    return response.status_code < 300


def admin_date(prefix: str) -> dict:
    return {f"{prefix}_0": "2026-01-01", f"{prefix}_1": "00:00:00"}


# -- the surfaces -----------------------------------------------------------------------------


def trust_approve_page(version_of: str) -> Callable:
    def attempt(client: Client, user, world: World) -> bool:
        version = getattr(world, version_of)
        client.post(reverse("labeling:trust-approve", args=[version.uuid]), approve_form(version))
        return JudgeApproval.objects.filter(judge_version=version, revoked_at=None).exists()

    return attempt


def trust_revoke_page(client: Client, user, world: World) -> bool:
    page = reverse("labeling:calibration", args=[world.trusted.uuid])
    action = reverse("labeling:trust-revoke", args=[world.trusted.uuid])
    data = {**form_as_a_lead_sees_it(world, page, action), "reason": "drifted"}
    client.post(action, data)
    return not JudgeApproval.objects.filter(judge_version=world.trusted, revoked_at=None).exists()


def trust_api_write(client: Client, user, world: World) -> bool:
    url = f"/api/judge-versions/{world.failing.uuid}/"
    body = {"trusted": True}
    answers = [
        client.post(url, body, content_type="application/json"),
        client.put(url, body, content_type="application/json"),
        client.patch(url, body, content_type="application/json"),
        client.delete(url),
    ]
    shown = client.get(url)
    assert shown.status_code != 200 or shown.json()["trusted"] is False
    return any(ok(a) for a in answers)


def admin_form(obj, **changes) -> dict:
    """What the admin's form for ``obj`` posts, with ``changes`` (field name: value), built
    from the model's fields so a field added later is posted too."""
    data = {}
    for field in obj._meta.concrete_fields:
        if field.primary_key:
            continue
        value = changes.get(field.name, getattr(obj, field.attname))
        if isinstance(field, models.DateTimeField):
            if value is not None:
                data[f"{field.name}_0"], data[f"{field.name}_1"] = f"{value:%Y-%m-%d}", "00:00:00"
        elif isinstance(field, models.JSONField):
            data[field.name] = json.dumps(value)
        elif isinstance(field, models.BooleanField):
            if value:
                data[field.name] = "on"
        elif isinstance(field, models.ForeignKey):
            data[field.name] = "" if value is None else getattr(value, "pk", value)
        else:
            data[field.name] = "" if value is None else value
    return data


def admin_add(model: str, attr: str, done: Callable, **changes) -> Callable:
    """Post the admin's add form of a copy of ``world.<attr>`` with ``changes``; ``done``
    tells from the database whether it was added."""

    def attempt(client: Client, user, world: World) -> bool:
        obj = getattr(world, attr)
        values = {k: v(world) if callable(v) else v for k, v in changes.items()}
        client.post(reverse(f"admin:{model}_add"), admin_form(obj, **values))
        return done(world)

    return attempt


def admin_change(model: str, attr: str, done: Callable, **changes) -> Callable:
    """Post the admin's change form of ``world.<attr>`` with ``changes``."""

    def attempt(client: Client, user, world: World) -> bool:
        obj = getattr(world, attr)
        values = {k: v(world) if callable(v) else v for k, v in changes.items()}
        client.post(reverse(f"admin:{model}_change", args=[obj.pk]), admin_form(obj, **values))
        return done(world)

    return attempt


def admin_delete(model: str, attr: str) -> Callable:
    def attempt(client: Client, user, world: World) -> bool:
        obj = getattr(world, attr)
        url = reverse(f"admin:{model}_delete", args=[obj.pk])
        client.post(url, {"post": "yes"})
        return not type(obj).objects.filter(pk=obj.pk).exists()

    return attempt


def _flipped(world: World) -> str:
    return "pass" if world.label.verdict == "fail" else "fail"


approval_of_failing = admin_add(
    "judges_judgeapproval",
    "approval",
    lambda w: JudgeApproval.objects.filter(judge_version=w.failing).exists(),
    judge_version=lambda w: w.failing.pk,
    figures={"n": 100},
)
approval_revoked = admin_change(
    "judges_judgeapproval",
    "approval",
    lambda w: JudgeApproval.objects.filter(pk=w.approval.pk, revoked_at__isnull=False).exists(),
    revoked_at=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    revoked_by=lambda w: w.users[ALICE].pk,
    revoke_reason="edited in the admin",
)
label_added = admin_add(
    "labeling_label",
    "label",
    lambda w: Label.objects.filter(reviewer=w.users[CAROL]).exists(),
    reviewer=lambda w: w.users[CAROL].pk,
    reviewer_name="",
    source="reviewer",
)
label_flipped = admin_change(
    "labeling_label",
    "label",
    lambda w: Label.objects.get(pk=w.label.pk).verdict != w.label.verdict,
    verdict=_flipped,
)
adjudication_added = admin_add(
    "labeling_adjudication",
    "adjudication",
    lambda w: Adjudication.objects.filter(trial_id=w.label.trial_id).exists(),
    trial=lambda w: w.label.trial_id,
)
adjudication_flipped = admin_change(
    "labeling_adjudication",
    "adjudication",
    lambda w: Adjudication.objects.get(pk=w.adjudication.pk).verdict == "fail",
    verdict="fail",
)


def admin_add_group(client: Client, user, world: World) -> bool:
    client.post(reverse("admin:auth_group_add"), {"name": "owner"})
    return Group.objects.filter(name="owner").exists()


def admin_change_group(client: Client, user, world: World) -> bool:
    lead = Group.objects.get(name="lead")
    client.post(reverse("admin:auth_group_change", args=[lead.pk]), {"name": "leader"})
    return not Group.objects.filter(name="lead").exists()


def admin_delete_group(client: Client, user, world: World) -> bool:
    lead = Group.objects.get(name="lead")
    client.post(reverse("admin:auth_group_delete", args=[lead.pk]), {"post": "yes"})
    return not Group.objects.filter(name="lead").exists()


def admin_user_form_roles(client: Client, user, world: World) -> bool:
    target = world.users[MALLORY]
    client.post(
        reverse("admin:auth_user_change", args=[target.pk]),
        {
            "username": target.username,
            "is_active": "on",
            "is_staff": "on",
            "is_superuser": "on",
            "groups": [Group.objects.get(name="lead").pk],
            **admin_date("date_joined"),
        },
    )
    target = User.objects.get(pk=target.pk)
    return target.is_superuser or target.is_staff or target.groups.exists()


def admin_role_action(client: Client, user, world: World) -> bool:
    target = world.users[MALLORY]
    client.post(
        reverse("admin:auth_user_changelist"),
        {"action": "role_grant_engineer", "_selected_action": [target.pk]},
    )
    done = target.groups.filter(name="engineer").exists()
    if done:
        assert RoleChange.objects.filter(user=target, by=user, via="admin").exists()
    return done


def role_service(client: Client, user, world: World) -> bool:
    try:
        role_grant(user=world.users[MALLORY], role="lead", by=user, via="page")
    except PermissionDenied:
        return False
    return True


def label_submit(**extra) -> Callable:
    def attempt(client: Client, user, world: World) -> bool:
        before = Label.objects.count() + LabelRevision.objects.count()
        body = {"trial": world.trial_uuid, "verdict": "fail", "critique": "c", **extra}
        answer = client.post("/api/labels", body, content_type="application/json")
        done = Label.objects.count() + LabelRevision.objects.count() > before
        assert done == ok(answer), answer.content[:300]
        return done

    return attempt


def judge_version_declare(base_url: str) -> Callable:
    def attempt(client: Client, user, world: World) -> bool:
        client.post(
            reverse("judges:version-new"),
            {
                "name": "declared",
                "kind": "rubric",
                "base_url": base_url,
                "model": "judge-model",
                "prompt_template": "",
                "params_json": "{}",
                "output_schema_json": "",
                "threshold": "",
            },
        )
        return JudgeVersion.objects.filter(judge__name="declared").exists()

    return attempt


def run_start_api(base_url: str) -> Callable:
    def attempt(client: Client, user, world: World) -> bool:
        body = {
            "suite": str(world.suite.uuid),
            "name": "egress",
            "trials_per_case": 1,
            "graders": GRADERS,
            "target": {
                "kind": "openai",
                "base_url": base_url,
                "model": "m",
                "prompt_template": "$input",
            },
        }
        answer = client.post("/api/runs/start", body, content_type="application/json")
        if answer.status_code == 400:
            assert answer.json()["field"] == "target.base_url", answer.content[:300]
        return Run.objects.filter(name="egress").exists()

    return attempt


# -- the rows ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    surface: str
    allowed: frozenset[str]
    attempt: Callable[[Client, object, World], bool]


ROWS = [
    Row("trust approve page, figures meet the rule", LEADS, trust_approve_page("passing")),
    Row("trust approve page, figures fail the rule", NOBODY, trust_approve_page("failing")),
    Row("trust revoke page", LEADS, trust_revoke_page),
    Row("trust through the API (writes to a judge version)", NOBODY, trust_api_write),
    Row("admin: add a JudgeApproval", NOBODY, approval_of_failing),
    Row("admin: change a JudgeApproval", NOBODY, approval_revoked),
    Row("admin: delete a JudgeApproval", NOBODY, admin_delete("judges_judgeapproval", "approval")),
    Row("admin: add a label", NOBODY, label_added),
    Row("admin: change a label", NOBODY, label_flipped),
    Row("admin: delete a label", NOBODY, admin_delete("labeling_label", "label")),
    Row("admin: add an adjudication", NOBODY, adjudication_added),
    Row("admin: change an adjudication", NOBODY, adjudication_flipped),
    Row(
        "admin: delete an adjudication",
        NOBODY,
        admin_delete("labeling_adjudication", "adjudication"),
    ),
    Row("admin: add a group", NOBODY, admin_add_group),
    Row("admin: rename a role group", NOBODY, admin_change_group),
    Row("admin: delete a role group", NOBODY, admin_delete_group),
    Row("admin: superuser, staff or groups on the user form", NOBODY, admin_user_form_roles),
    Row("admin: the grant-a-role action", ADMIN_USERS, admin_role_action),
    Row("role grant through the service", LEADS, role_service),
    Row("label submit naming another reviewer (API)", NOBODY, label_submit(reviewer="bob")),
    Row("label submit as oneself (API)", LABELERS, label_submit()),
    Row(
        "judge version declare, endpoint inside the egress rule",
        ENGINEERS,
        judge_version_declare(INSIDE),
    ),
    Row(
        "judge version declare, endpoint outside the egress rule",
        NOBODY,
        judge_version_declare(OUTSIDE),
    ),
    Row("judge version declare, metadata endpoint", NOBODY, judge_version_declare(METADATA)),
    Row("run start (API), target inside the egress rule", ENGINEERS, run_start_api(INSIDE)),
    Row("run start (API), target outside the egress rule", NOBODY, run_start_api(OUTSIDE)),
    Row("run start (API), target at the metadata address", NOBODY, run_start_api(METADATA)),
]

# Configured code (registered pipelines, tools, graders, oracles; the demo's escalation):
# rows of the same shape, added here.
CONFIGURED_CODE_ROWS: list[Row] = [
    Row(surface, frozenset(allowed), attempt)
    for surface, allowed, attempt in configured_code_rows()
]

CELLS = [
    pytest.param(row, actor, id=f"{row.surface} | {actor}")
    for row in (*ROWS, *CONFIGURED_CODE_ROWS)
    for actor in ACTORS
]


@pytest.mark.django_db
@pytest.mark.parametrize(("row", "actor"), CELLS)
def test_each_role_gets_exactly_what_the_rule_allows(world, row, actor):
    client = Client()
    user = AnonymousUser()
    if actor != ANONYMOUS:
        user = User.objects.get(pk=world.users[actor].pk)
        client.force_login(user)
    before = snapshot()
    try:
        done = row.attempt(client, user, world)
    except DomainError:  # a service refusing on its rule
        done = False
    assert done == (actor in row.allowed), f"{row.surface}: {actor} done={done}"
    if not done:
        assert snapshot() == before, f"{row.surface}: {actor} was refused but rows changed"


def test_every_row_allows_only_actors_of_the_matrix():
    for row in (*ROWS, *CONFIGURED_CODE_ROWS):
        assert row.allowed <= set(ACTORS), row.surface
