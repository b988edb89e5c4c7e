"""The pass@k / pass^k table: one case set for every k, so it never contradicts itself."""

import itertools

import numpy as np

from evals.report.figures import pass_k_table


def test_a_case_with_errored_trials_leaves_every_row_not_only_the_high_ks():
    # Four cases of 3 trials; two lost a trial to a pipeline error. Per-k case sets gave
    # pass^2 = 1/3... then pass^3 = 50% on the two full cases: rising with k.
    passed = np.array([3, 0, 1, 2])
    graded = np.array([3, 3, 2, 2])
    table = pass_k_table(passed, graded, 3)
    assert [(p.k, p.n_cases, p.cases_left_out) for p in table] == [(1, 2, 2), (2, 2, 2), (3, 2, 2)]
    assert [p.pass_hat_k for p in table] == [0.5, 0.5, 0.5]


def test_pass_hat_k_never_rises_and_pass_at_k_never_falls_with_k_on_small_runs():
    # Every run of 3 cases with 0..3 graded and 0..graded passed: monotone in k.
    shapes = [(c, n) for n in range(4) for c in range(n + 1)]
    for cases in itertools.product(shapes, repeat=3):
        passed = np.array([c for c, _ in cases])
        graded = np.array([n for _, n in cases])
        table = pass_k_table(passed, graded, 3)
        hats = [p.pass_hat_k for p in table if p.pass_hat_k is not None]
        ats = [p.pass_at_k for p in table if p.pass_at_k is not None]
        assert all(b <= a + 1e-12 for a, b in itertools.pairwise(hats)), cases
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(ats)), cases
        assert len({p.n_cases for p in table}) == 1, cases
