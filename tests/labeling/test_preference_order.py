"""The preference queue shows each pair in a random order, recorded when the pairs are first
shown and balanced over the judge run (half show the base run's response as A); every
analysis maps the reviewer's on-screen A/B back to base/head through that order."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from evals.models import TrialPair
from judges.models import PairwiseVerdict
from labeling.models import PreferenceLabel
from labeling.pairwise import pairwise_calibration_compute
from tests.labeling_builders import pairwise_judge_run

pytestmark = pytest.mark.django_db


def test_pairs_are_shown_in_a_recorded_balanced_order_and_choices_map_back_to_their_run(
    client, alice, bob
):
    judge_run = pairwise_judge_run(6)
    for pid in judge_run.trial_ids:  # the judge prefers the head's response in both orders
        for position in PairwiseVerdict.Position.values:
            PairwiseVerdict.objects.create(
                pair_id=pid,
                judge_version=judge_run.judge_version,
                position=position,
                preferred="B",
            )
    client.force_login(bob)
    url = reverse("labeling:preferences", args=[judge_run.uuid])
    uuids = dict(TrialPair.objects.values_list("id", "uuid"))
    orders = {}  # pair id -> shown swapped (the head run's response as A), read off the page
    for i, pid in enumerate(judge_run.trial_ids, start=1):
        page = client.get(f"{url}?pair={uuids[pid]}").content.decode()
        orders[pid] = f'<pre class="pre response-a">HEAD-{i}</pre>' in page
        assert orders[pid] or f'<pre class="pre response-a">BASE-{i}</pre>' in page
    assert sum(orders.values()) == 3  # balanced: half show the head's response as A
    for i, pid in enumerate(judge_run.trial_ids, start=1):
        page = client.get(f"{url}?pair={uuids[pid]}").content.decode()  # the same order again
        assert f'response-a">{"HEAD" if orders[pid] else "BASE"}-{i}<' in page
        client.post(url, {"pair": pid, "verdict": "A", "expected_version": 0})  # shown first

    stored = {lb.pair_id: lb for lb in PreferenceLabel.objects.all()}
    assert {pid: stored[pid].preferred for pid in orders} == {
        pid: "B" if swapped else "A" for pid, swapped in orders.items()
    }
    cal = pairwise_calibration_compute(judge_version=judge_run.judge_version)
    assert cal.agreement_numerator == 3  # the judge's head agrees where head was shown first
    assert (cal.human_first_slot.numerator, cal.human_first_slot.denominator) == (6, 6)

    client.force_login(alice)
    export = client.get(
        reverse("interop:preferences-export", args=[judge_run.uuid]) + "?format=csv"
    )
    rows = list(csv.DictReader(io.StringIO(export.content.decode(), newline="")))
    assert sorted(r["preferred_run"] for r in rows) == ["base"] * 3 + ["head"] * 3
    assert {r["chose_shown"] for r in rows} == {"A"}
    assert all(r["shown_first"] == r["preferred_run"] for r in rows)
