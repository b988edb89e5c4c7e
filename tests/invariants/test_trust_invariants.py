"""Trust on generated calibration sets (human labels and judge verdicts), through the real
services: approval where the rule allows it, then label changes (relabel, undo,
adjudication; a reviewer's labels frozen once they finish the set, a later change a flagged
revision), revocation. What the API and the model say is "trusted" is checked after every
step: trusted only while an approval stands and the rule holds on the current labels (an
approval lapses when a label change breaks the rule). Bounded and derandomized whatever the
seed; small thresholds so that small sets can pass the rule."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django.test import override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from core.errors import DomainError
from judges.models import JudgeApproval, JudgeVersion
from judges.trust import trust_revoke
from labeling.adjudication import adjudication_record
from labeling.approval import judge_trust_approve
from labeling.calibration_sets import calibration_set_build
from labeling.labels import label_submit, label_undo
from labeling.selectors import calibration_compute
from tests.calibration_builders import labeled_run
from tests.core.test_api_core import client_for

pytestmark = pytest.mark.django_db

# Small enough that 6–10 labeled trials can meet the rule, and that a change or two can
# break it: 6 compared trials, 4 human fails (a FAR bound of 0/4 is 49%), kappa's lower
# bound at least 0.2.
SMALL_RULE = {"MIN_N": 6, "MIN_KAPPA": 0.2, "MAX_FAR": 0.5}

verdict = st.sampled_from(["pass", "fail"])


def flip(v: str) -> str:
    return "fail" if v == "pass" else "pass"


@st.composite
def calibrations(draw):
    """(human labels, judge verdicts, steps): 5–10 trials (3–6 human fails), the judge
    agreeing with the humans but for at most one flip; then approve and up to 6 steps."""
    # 3 human fails can never meet the rule (4 needed); 4–6 can.
    fails, passes = draw(st.sampled_from([3, 4, 5, 5, 6, 6])), draw(st.integers(2, 4))
    humans = draw(st.permutations(["fail"] * fails + ["pass"] * passes))
    n = len(humans)
    flips = draw(st.sets(st.integers(0, n - 1), max_size=1))
    judges = [flip(h) if i in flips else h for i, h in enumerate(humans)]
    index = st.integers(0, n - 1)
    step = st.one_of(
        st.tuples(st.just("approve")),
        st.tuples(st.just("revoke")),
        st.tuples(st.just("relabel"), index, verdict),
        st.tuples(st.just("undo"), index),
        st.tuples(st.just("adjudicate"), index, verdict),
        st.tuples(st.just("finish set")),
    )
    steps = draw(st.lists(step, min_size=1, max_size=6))
    return humans, judges, [("approve",), *steps]


def trusted_now(version: JudgeVersion, api) -> bool:
    """What the model and the API say, checked equal to each other and to the approvals."""
    fresh = JudgeVersion.objects.get(pk=version.pk)
    response = api.get(f"/api/judge-versions/{version.uuid}/")
    assert response.status_code == 200
    active = JudgeApproval.objects.filter(judge_version=version, revoked_at__isnull=True)
    assert response.json()["trusted"] == fresh.is_trusted == active.exists()
    return fresh.is_trusted


def play(step, *, version, cset, trials, alice, bob) -> bool:
    """Take one step through the services; True when it changed trust (an approval or a
    revocation went through). A refusal the rules allow (approving when the rule does not
    hold or the version is trusted, undoing nothing or a frozen label) changes nothing."""
    kind = step[0]
    if kind == "approve":
        rule = calibration_compute(judge_version=version, calibration_set=cset).trust_ok
        already = JudgeVersion.objects.get(pk=version.pk).is_trusted
        try:
            judge_trust_approve(judge_version=version, by=alice, calibration_set=cset)
        except DomainError:
            assert already or not rule  # refused only when the rule does not allow it
            return False
        assert rule and not already
        return True
    if kind == "revoke":
        try:
            trust_revoke(judge_version=version, by=alice, reason="labels changed")
        except DomainError:
            return False
        return True
    try:
        if kind == "relabel":
            label_submit(trial=trials[step[1]], reviewer=bob, verdict=step[2], calibration_set=cset)
        elif kind == "undo":
            label_undo(trial=trials[step[1]], reviewer=bob)
        elif kind == "adjudicate":
            adjudication_record(trial=trials[step[1]], lead=alice, verdict=step[2], reason="r")
        else:  # bob labels every item: the set is revealed to him and his labels freeze
            for t in trials:
                label_submit(trial=t, reviewer=bob, verdict="pass", calibration_set=cset)
    except DomainError:
        pass  # nothing to undo, or a frozen label's undo: refused, nothing changed
    return False


def scenario(humans, judges, alice, carol):
    run, version, trials = labeled_run(humans, judges)
    cset = calibration_set_build(
        run=run, name="cal", by=carol, judge_version=version, size=len(trials)
    )
    return version, cset, trials


@hyp_settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calibration=calibrations())
def test_an_approval_is_allowed_by_the_rule_and_stands_until_revoked(
    calibration, alice, bob, carol
):
    humans, judges, steps = calibration
    api = client_for(alice)
    with (
        override_settings(ASSAY={**django_settings.ASSAY, "TRUST": SMALL_RULE}),
        transaction.atomic(),  # each example on a clean database
    ):
        version, cset, trials = scenario(humans, judges, alice, carol)
        expected = False
        for step in steps:
            if play(step, version=version, cset=cset, trials=trials, alice=alice, bob=bob):
                expected = step[0] == "approve"
            trusted = trusted_now(version, api)
            rule = calibration_compute(judge_version=version, calibration_set=cset).trust_ok
            # Trusted only while an approval the rule allowed stands, and only while the
            # rule holds on the current labels: a label change that breaks it lapses the
            # approval (labeling.trust_recheck); nothing but an approval grants trust.
            assert not trusted or rule
            assert trusted <= expected
            if step[0] in ("approve", "revoke"):
                assert trusted == expected
            expected = trusted
        transaction.set_rollback(True)


def test_trusted_means_the_rule_holds_on_the_current_labels(alice, bob, carol):
    humans = ["pass"] * 3 + ["fail"] * 5
    with override_settings(ASSAY={**django_settings.ASSAY, "TRUST": SMALL_RULE}):
        version, cset, trials = scenario(humans, humans, alice, carol)
        judge_trust_approve(judge_version=version, by=alice, calibration_set=cset)
        for t in trials[3:6]:  # the lead decides three of the judge's fails were passes
            adjudication_record(trial=t, lead=alice, verdict="pass", reason="misread")
        rule = calibration_compute(judge_version=version, calibration_set=cset).trust_ok
        assert not rule
        assert trusted_now(version, client_for(alice)) == rule
        lapsed = JudgeApproval.objects.get(judge_version=version)
        assert lapsed.revoked_by == alice  # whose change made it lapse, and when
        assert lapsed.revoke_reason.startswith("lapsed: alice's adjudication of trial ")
        assert "the rule no longer holds: " in lapsed.revoke_reason
