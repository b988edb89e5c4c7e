"""Contract acceptance is a function of the labels of record, whatever sequence of label
changes led there: generated sequences of reviews, API relabels and undos by a reviewer
(whose labels freeze once they finish the queue) and a lead go through the real services
and the real API, and after every step the trial is accepted exactly when the model of the
labels of record says every review dimension passes, and the decision history ends in the
current decision."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from itertools import pairwise

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import DomainError
from demo.expense_contract import REVIEW_DIMENSIONS
from evals.grading.contract.decisions import decision_history, output_hash, trial_decision_get
from evals.models import Trial
from labeling.labels import label_undo
from labeling.review import review_set_create, review_submit
from tests.core.test_api_core import client_for
from tests.labeling.test_review import graded  # noqa: F401 - the fixture

ALL_PASS = {d: {"verdict": "pass", "critique": ""} for d in REVIEW_DIMENSIONS}
ONE_FAIL = {**ALL_PASS, "reviewer_clarity": {"verdict": "fail", "critique": "unclear"}}

# A step: (who, what, value). what: "review" (value: all dimensions pass), "relabel" (the
# API, no review; value: the verdict is pass), "undo", "finish" (the reviewer reviews every
# other item of the queue, so their labels freeze).
STEP = st.tuples(
    st.sampled_from(["bob", "alice"]),
    st.sampled_from(["review", "relabel", "undo", "finish"]),
    st.booleans(),
)


@dataclass
class Labels:
    """The model: per user, the saves still in effect (an undo pops one), the newest on top;
    ``frozen`` once the reviewer finished the queue (a lead never freezes)."""

    stacks: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    others_done: set[str] = field(default_factory=set)
    frozen: set[str] = field(default_factory=set)

    def save(self, who: str, entry: tuple[str, bool]) -> None:
        stack = self.stacks.setdefault(who, [])
        if who in self.frozen or (stack and stack[-1] == entry):
            return  # a flagged revision, or an identical resubmission: no new record
        stack.append(entry)

    def undo(self, who: str) -> None:
        if who not in self.frozen and self.stacks.get(who):
            self.stacks[who].pop()

    def settle(self, who: str) -> None:
        if who == "bob" and who in self.others_done and self.stacks.get(who):
            self.frozen.add(who)

    def accepted(self) -> bool:
        records = [s[-1] for s in self.stacks.values() if s]
        # (kind, passes): a review passes when every dimension does; a relabel by its verdict
        return all(passes for _, passes in records) and any(kind == "review" for kind, _ in records)


@pytest.mark.django_db
@settings(
    max_examples=12,
    deadline=timedelta(seconds=10),  # each example writes to the database: generous
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=1, max_size=6))
def test_acceptance_follows_the_labels_of_record_after_every_change(
    graded,  # noqa: F811 - the fixture imported above
    carol,
    bob,
    alice,
    steps,
):
    users = {"bob": bob, "alice": alice}
    clients = {name: client_for(user) for name, user in users.items()}
    with transaction.atomic():
        cset = review_set_create(run=graded, by=carol)
        items = list(cset.items.order_by("position").select_related("trial"))
        trial = Trial.objects.get(run=graded, case__key="correct")
        others = [i.trial for i in items if i.trial_id != trial.id]
        model = Labels()
        for who, what, value in steps:
            user = users[who]
            if what == "review":
                review_submit(
                    calibration_set=cset,
                    trial=trial,
                    reviewer=user,
                    dimensions=ALL_PASS if value else ONE_FAIL,
                    reviewed_hash=output_hash(trial.output),
                )
                model.save(who, ("review", value))
            elif what == "relabel":
                verdict = "pass" if value else "fail"
                response = clients[who].post(
                    "/api/labels",
                    {"trial": str(trial.uuid), "verdict": verdict, "critique": f"plain {verdict}"},
                    format="json",
                )
                assert response.status_code in (200, 201), response.content
                model.save(who, ("relabel", value))
            elif what == "undo":
                try:
                    label_undo(trial=trial, reviewer=user)
                except DomainError as exc:
                    assert who in model.frozen and exc.code == "conflict"
                model.undo(who)
            else:
                for other in others:
                    review_submit(
                        calibration_set=cset,
                        trial=other,
                        reviewer=user,
                        dimensions=ALL_PASS,
                        reviewed_hash=output_hash(other.output),
                    )
                model.others_done.add(who)
            model.settle(who)
            decision = trial_decision_get(trial_id=trial.id)
            assert (decision == "accepted") is model.accepted(), (steps, model)
            assert decision in ("accepted", "review")
            history = decision_history(trial_ids=[trial.id]).get(trial.id, [])
            assert (history[-1].to_decision if history else "review") == decision
            assert all(a.to_decision == b.from_decision for a, b in pairwise(history))
        transaction.set_rollback(True)
