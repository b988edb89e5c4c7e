"""pass@k and pass^k against brute-force binomial coefficients, and their monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import comb

from stats import pass_at_k, pass_hat_k

TRIPLES = [(n, c, k) for n in range(1, 13) for c in range(n + 1) for k in range(1, n + 1)]


@pytest.mark.parametrize(("n", "c", "k"), TRIPLES)
def test_it_matches_the_binomial_formulas(n, c, k):
    expected_at = 1 - comb(n - c, k, exact=True) / comb(n, k, exact=True)
    expected_hat = comb(c, k, exact=True) / comb(n, k, exact=True)
    assert pass_at_k(n, c, k) == pytest.approx(expected_at, abs=1e-12)
    assert pass_hat_k(n, c, k) == pytest.approx(expected_hat, abs=1e-12)


def test_it_is_stable_for_large_n():
    assert pass_at_k(2000, 3, 100) == pytest.approx(
        1 - comb(1997, 100, exact=True) / comb(2000, 100, exact=True), rel=1e-9
    )


def test_it_gives_known_values():
    assert pass_at_k(4, 2, 1) == 0.5
    assert pass_at_k(4, 2, 3) == 1.0
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat_k(5, 5, 5) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (0, 0, 1), (3, 1, 0), (3, 4, 1), (3, -1, 1)])
def test_it_refuses_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


triples = st.integers(2, 40).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n - 1))
)


@given(triples)
def test_it_is_monotone_in_k_and_c(triple):
    n, c, k = triple
    assert pass_at_k(n, c, k) <= pass_at_k(n, c, k + 1) + 1e-12
    assert pass_hat_k(n, c, k) >= pass_hat_k(n, c, k + 1) - 1e-12
    if c < n:
        assert pass_at_k(n, c, k) <= pass_at_k(n, c + 1, k) + 1e-12
        assert pass_hat_k(n, c, k) <= pass_hat_k(n, c + 1, k) + 1e-12
    assert 0.0 <= pass_hat_k(n, c, k) <= c / n + 1e-12 <= pass_at_k(n, c, k) + 2e-12
