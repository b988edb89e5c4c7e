"""Loading the demo: suites and cases (idempotent), and the demo user."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction

from core.grants import COMMAND, role_grant, superuser_grant
from core.roles import ROLES
from demo.data import SUITES
from demo.expense_contract import SUITE as CONTRACT_SUITE
from demo.refund_agent import POLICY, agent_cases
from evals.cases import CaseSpec, case_upsert, cases_upsert
from evals.models import Suite


@transaction.atomic
def demo_suites_load() -> list[Suite]:
    """Creates or updates the demo suites; unchanged cases are reused (content hash)."""
    return [_suite_load(spec) for spec in SUITES]


@transaction.atomic
def contract_suite_load() -> Suite:
    """Creates or updates the contract suite (``demo.expense_contract``)."""
    return _suite_load(CONTRACT_SUITE)


AGENT_SUITE_NAME = "refund-agent"


@transaction.atomic
def agent_suite_load() -> Suite:
    """Creates or updates the refund agent's suite (``demo.refund_agent``): one case per
    order scenario, each with its goal state."""
    suite, _ = Suite.objects.get_or_create(
        name=AGENT_SUITE_NAME,
        defaults={
            "kind": Suite.Kind.CAPABILITY,
            "description": f"A simulated customer-service refund agent. Policy: {POLICY}",
        },
    )
    cases_upsert(
        suite=suite,
        specs=[
            CaseSpec(
                key=c["key"],
                input=c["input"],
                expected=c["expected"],
                tags=c["tags"],
                goal_state=c["goal_state"],
            )
            for c in agent_cases()
        ],
        via="demo",
    )
    return suite


def _suite_load(spec: dict) -> Suite:
    suite, _ = Suite.objects.get_or_create(
        name=spec["name"], defaults={"kind": spec["kind"], "description": spec["description"]}
    )
    for case in spec["cases"]:
        case_upsert(
            suite=suite,
            key=case["key"],
            input=case["input"],
            expected=case["expected"],
            context=case.get("context", []),
            tags=case["tags"],
            via="demo",
        )
    return suite


def demo_user_ensure(*, username: str, password: str) -> User:
    """Staff, superuser, every role, each grant recorded as the operator's; password reset each
    time."""
    user, _ = User.objects.get_or_create(username=username)
    user.set_password(password)
    user.save(update_fields=["password"])
    superuser_grant(user=user, via=COMMAND)
    for role in ROLES:
        role_grant(user=user, role=role, by=None, via=COMMAND)
    return user
