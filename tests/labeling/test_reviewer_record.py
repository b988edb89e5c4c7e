"""A reviewer's record (labeling.reviewer_record): its figures against a brute-force
computation on generated labels, kappa against statsmodels, constant queries, who may read
which record, and blindness for a reviewer reading their own."""

from __future__ import annotations

import random
import statistics
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa
from statsmodels.stats.proportion import proportion_confint

from labeling.models import Adjudication, Label, LabelRevision
from labeling.reviewer_record import SESSION_GAP_SECONDS, reviewer_record_get
from tests.conftest import PASSWORD
from tests.labeling_builders import calibration_set, judged_run

START = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def reviewer(name: str) -> User:
    user = User.objects.create_user(username=name, password=PASSWORD)
    user.groups.add(Group.objects.get(name="reviewer"))
    return user


def generate(seed: int, n_trials: int, alice, names=("bob", "dave", "erin")):
    """Labels of record by each reviewer on a random subset of trials (timestamps spread over
    days, with breaks), a LabelRevision per save (and some undos), adjudications with
    several versions on some trials. Returns (reviewers, verdicts {name: {trial_id: v}},
    decided {trial_id: v}, saves {name: [times]})."""
    rng = random.Random(seed)
    _, _, trials = judged_run(n_trials, suite_name=f"s{seed}", judge_name=f"j{seed}")
    users = {n: reviewer(n) for n in names}
    verdicts: dict[str, dict[int, str]] = {n: {} for n in names}
    saves: dict[str, list[datetime]] = {n: [] for n in names}
    for name, user in users.items():
        clock = START + timedelta(minutes=rng.randint(0, 60))
        version = 0
        for trial in trials:
            if rng.random() < 0.3:
                continue
            clock += timedelta(seconds=rng.choice([20, 45, 90, 200, 599, 601, 3000, 90_000]))
            v = rng.choice(["pass", "pass", "fail"])
            verdicts[name][trial.id] = v
            Label.objects.create(trial=trial, reviewer=user, verdict=v, created_at=clock)
            version = 1
            LabelRevision.objects.create(
                trial=trial, reviewer=user, version=version, verdict=v, created_at=clock
            )
            saves[name].append(clock)
            if rng.random() < 0.2:  # an undo later, then the same save again: undos not timed
                clock += timedelta(seconds=5)
                LabelRevision.objects.create(
                    trial=trial, reviewer=user, version=2, verdict="", undoes=1, created_at=clock
                )
                clock += timedelta(seconds=7)
                LabelRevision.objects.create(
                    trial=trial, reviewer=user, version=3, verdict=v, created_at=clock
                )
                saves[name].append(clock)
    decided: dict[int, str] = {}
    for trial in trials:
        if rng.random() < 0.4:
            for version in range(1, rng.randint(1, 3) + 1):
                verdict = rng.choice(["pass", "fail"])
                Adjudication.objects.create(
                    trial=trial, decided_by=alice, verdict=verdict, reason="r", version=version
                )
            decided[trial.id] = verdict
    return users, verdicts, decided, saves, trials


def brute(name, verdicts, decided, saves, trials):
    mine = verdicts[name]
    adjudicated = [t for t in mine if t in decided]
    agree = sum(1 for t in adjudicated if mine[t] == decided[t])
    times = sorted(saves[name])
    gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
    gaps = [g for g in gaps if g <= SESSION_GAP_SECONDS]
    created = {
        t.id: lab.created_at for t in trials for lab in t.labels.filter(reviewer__username=name)
    }
    days: dict = {}
    for t, v in mine.items():
        day = created[t].date()
        row = days.setdefault(day, [0, 0, 0])
        row[0] += 1
        row[1] += t in decided
        row[2] += t in decided and decided[t] == v
    pairs = {}
    for other, theirs in verdicts.items():
        if other == name:
            continue
        both = sorted(set(mine) & set(theirs))
        if both:
            pairs[other] = ([mine[t] for t in both], [theirs[t] for t in both])
    return len(mine), (agree, len(adjudicated)), gaps, days, pairs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_record_matches_a_brute_force_computation(db, alice, seed):
    users, verdicts, decided, saves, trials = generate(seed, 40, alice)
    for name, user in users.items():
        record = reviewer_record_get(reviewer=user, viewer=alice)
        labeled, (agree, n_adj), gaps, days, pairs = brute(name, verdicts, decided, saves, trials)
        assert record.labeled == labeled
        assert (record.adjudication.numerator, record.adjudication.denominator) == (agree, n_adj)
        if n_adj:
            low, high = proportion_confint(agree, n_adj, method="wilson")
            assert record.adjudication.ci_low == pytest.approx(low, abs=1e-9)
            assert record.adjudication.ci_high == pytest.approx(high, abs=1e-9)
        assert record.n_timed == len(gaps)
        assert record.median_seconds == (statistics.median(gaps) if gaps else None)
        assert {d.day: [d.labeled, d.adjudicated, d.agreeing] for d in record.days} == days
        assert [p.other for p in record.pairs] == sorted(pairs)
        for p in record.pairs:
            a, b = pairs[p.other]
            assert p.n == len(a)
            assert p.agreement.numerator == sum(x == y for x, y in zip(a, b, strict=True))
            table = np.array(
                [
                    [
                        sum(1 for x, y in zip(a, b, strict=True) if x == i and y == j)
                        for j in ("pass", "fail")
                    ]
                    for i in ("pass", "fail")
                ]
            )
            expected = sm_kappa(table)
            if p.kappa.kappa is None:
                assert table.sum(axis=0).max() == len(a) and table.sum(axis=1).max() == len(a)
                continue
            assert p.kappa.kappa == pytest.approx(expected.kappa, abs=1e-9)
            if p.agreement.rate != 1.0:
                assert p.kappa.ci_low == pytest.approx(max(-1, expected.kappa_low), abs=1e-6)
                assert p.kappa.ci_high == pytest.approx(min(1, expected.kappa_upp), abs=1e-6)


def _count(user, viewer) -> int:
    with CaptureQueriesContext(connection) as queries:
        reviewer_record_get(reviewer=user, viewer=viewer)
    return len(queries)


def test_its_queries_do_not_grow_with_labels(db, alice):
    small_users, *_ = generate(7, 5, alice, names=("s1", "s2"))
    large_users, *_ = generate(8, 60, alice, names=("l1", "l2", "l3", "l4"))
    _count(small_users["s2"], alice)  # alice's roles, read once and cached on her
    # 3: the labels by day (with the decisions of record), the pairs' tables, the saves' times
    assert _count(small_users["s1"], alice) == _count(large_users["l1"], alice) == 3


def test_a_reviewer_reads_their_own_record_without_the_sets_they_have_not_finished(db, alice):
    run, version, trials = judged_run(4)
    cset = calibration_set(run, version, trials)
    bob = reviewer("bob")
    dave = reviewer("dave")
    for trial in trials[:2]:  # bob: 2 of 4 labeled, the set is still blind for him
        for user, verdict in ((bob, "pass"), (dave, "fail")):
            Label.objects.create(trial=trial, reviewer=user, verdict=verdict)
    assert reviewer_record_get(reviewer=bob, viewer=alice).labeled == 2
    own = reviewer_record_get(reviewer=bob, viewer=bob)
    assert own.labeled == 0 and own.pairs == []  # dave's verdicts not told through agreement
    for trial in trials[2:]:
        Label.objects.create(trial=trial, reviewer=bob, verdict="pass")
    own = reviewer_record_get(reviewer=bob, viewer=bob, calibration_set=cset)
    assert own.labeled == 4 and own.pairs[0].other == "dave" and own.pairs[0].n == 2


@pytest.fixture
def cast(db, alice, bob, carol, mallory):
    dave = reviewer("dave")
    _, _, trials = judged_run(2)
    Label.objects.create(trial=trials[0], reviewer=bob, verdict="pass")
    Label.objects.create(trial=trials[0], reviewer=dave, verdict="pass")
    return {"alice": alice, "bob": bob, "carol": carol, "mallory": mallory, "dave": dave}


@pytest.mark.parametrize(
    ("who", "whose", "status"),
    [
        ("alice", "bob", 200),
        ("alice", "dave", 200),
        ("bob", "bob", 200),
        ("bob", "dave", 404),
        ("dave", "bob", 404),
        ("bob", "nobody", 404),
        ("carol", "bob", 403),
        ("mallory", "bob", 403),
        ("anonymous", "bob", (302, 403)),
    ],
)
def test_who_reads_which_record(client, cast, who, whose, status):
    if who != "anonymous":
        assert client.login(username=who, password=PASSWORD)
    response = client.get(reverse("labeling:reviewer-record", kwargs={"username": whose}))
    assert response.status_code in (status if isinstance(status, tuple) else (status,))
    if response.status_code == 200:
        page = response.content.decode()
        assert 'id="record-labeled"' in page and 'id="record-pairs"' in page


@pytest.mark.parametrize(
    ("who", "status"), [("alice", 200), ("bob", 403), ("carol", 403), ("mallory", 403)]
)
def test_only_leads_list_the_reviewers(client, cast, who, status):
    assert client.login(username=who, password=PASSWORD)
    response = client.get(reverse("labeling:reviewer-list"))
    assert response.status_code == status
    if status == 200:
        assert b"dave" in response.content and b"bob" in response.content


def test_a_malformed_or_unknown_set_is_refused(client, cast):
    assert client.login(username="alice", password=PASSWORD)
    url = reverse("labeling:reviewer-record", kwargs={"username": "bob"})
    assert client.get(url + "?set=zzz").status_code == 400
    assert client.get(url + "?set=00000000-0000-0000-0000-000000000000").status_code == 404


@pytest.mark.parametrize(
    ("who", "link"), [("alice", "/reviewers/"), ("bob", "/reviewers/bob/"), ("carol", None)]
)
def test_the_set_list_links_to_the_records_a_user_may_read(client, cast, who, link):
    assert client.login(username=who, password=PASSWORD)
    page = client.get(reverse("labeling:set-list")).content.decode()
    if link is None:
        assert 'id="reviewer-records"' not in page
    else:
        assert f'href="{link}"' in page
