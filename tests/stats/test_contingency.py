import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import fisher_exact as scipy_fisher

from stats.contingency import fisher_exact

cells = st.integers(min_value=0, max_value=40)


@given(cells, cells, cells, cells, st.sampled_from(["two-sided", "greater", "less"]))
def test_it_matches_scipy(a, b, c, d, alternative):
    ours = fisher_exact([[a, b], [c, d]], alternative=alternative)
    reference = scipy_fisher([[a, b], [c, d]], alternative=alternative).pvalue
    assert ours == pytest.approx(reference, rel=1e-9, abs=1e-15)
    assert 0 < ours <= 1


def test_the_tea_tasting_table():
    # Fisher (1935): 3 of 4 cups right each way; one-sided p = 17/70.
    assert fisher_exact([[3, 1], [1, 3]], alternative="greater") == pytest.approx(17 / 70)


@pytest.mark.parametrize(
    "table", [[[1, 2]], [[1, -1], [0, 0]], [[1.5, 1], [1, 1]], [[True, 1], [1, 1]]]
)
def test_it_refuses_a_malformed_table(table):
    with pytest.raises(ValueError):
        fisher_exact(table)
