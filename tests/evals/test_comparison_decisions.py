"""The comparison shows per case how contract decisions moved, and says so when the head
has fewer rejects overall but more wrong-outcome rejects (a policy error is never offset by
fewer malformed outputs)."""

from __future__ import annotations

import pytest
from django.test import Client

from demo.expense_contract import CONTRACT_GRADERS, FIXTURES
from evals.comparison.decisions import decision_movement_get
from evals.grading.recorded import run_grade
from evals.models import Case, Run, Suite, Trial


def run_of(suite: Suite, name: str, outputs: dict[str, list[str]]) -> Run:
    run = Run.objects.create(
        suite=suite,
        name=name,
        source=Run.Source.IMPORTED,
        target_kind="imported",
        trials_per_case=max(len(v) for v in outputs.values()),
        status=Run.Status.SUCCEEDED,
    )
    for key, names in outputs.items():
        case, _ = Case.objects.get_or_create(suite=suite, key=key, defaults={"input": key})
        for attempt, fixture in enumerate(names, start=1):
            Trial.objects.create(
                run=run, case=case, attempt=attempt, status="ok", output=FIXTURES[fixture]
            )
    run_grade(run=run, graders=CONTRACT_GRADERS)
    return Run.objects.get(pk=run.pk)


@pytest.fixture
def runs(db):
    suite = Suite.objects.create(name="writer")
    base = run_of(
        suite,
        "base",
        {
            "c1": ["malformed_json", "string_false", "correct", "correct"],
            "c2": ["correct", "reordered", "correct", "correct"],
        },
    )
    head = run_of(
        suite,
        "head",
        {
            "c1": ["correct", "correct", "correct", "correct"],
            "c2": ["boundary_error", "reordered", "correct", "correct"],
        },
    )
    return base, head


def test_it_shows_per_case_movement_and_warns_on_more_wrong_outcome_rejects(runs):
    base, head = runs
    movement = decision_movement_get(base=base, head=head)
    assert (movement.base_rejects, movement.head_rejects) == (2, 1)
    assert (movement.base_wrong_outcome, movement.head_wrong_outcome) == (0, 1)
    c1, c2 = movement.cases
    assert (c1.key, c1.base, c1.head) == ("c1", {"rejected": 2, "review": 2}, {"review": 4})
    assert (c2.key, c2.base, c2.head) == ("c2", {"review": 4}, {"rejected": 1, "review": 3})
    assert (c2.base_wrong_outcome, c2.head_wrong_outcome) == (0, 1)
    assert movement.warning == (
        "The head has fewer rejects overall (1 of 8 against 2 of 8) but more wrong-outcome "
        "rejects (1 against 0): a new policy error is not offset by fewer malformed outputs."
    )


def test_no_warning_when_the_head_does_not_trade_malformed_for_wrong(runs):
    base, head = runs
    movement = decision_movement_get(base=head, head=base)  # swapped: more rejects, fewer wrong
    assert movement.warning == ""


def test_the_comparison_page_says_so(runs, carol):
    base, head = runs
    client = Client()
    client.force_login(carol)
    html = client.get(f"/runs/{head.uuid}/compare/{base.uuid}/").content.decode()
    assert "fewer rejects overall (1 of 8 against 2 of 8) but more wrong-outcome" in html
    assert 'id="decision-movement"' in html


def test_no_movement_without_a_contract_on_both_sides(runs):
    base, head = runs
    other = Run.objects.create(suite=base.suite, name="plain", status=Run.Status.SUCCEEDED)
    assert decision_movement_get(base=other, head=head) is None
