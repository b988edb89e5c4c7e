"""The one chunking helper (core.chunks.chunked)."""

import pytest

from core.chunks import chunked


def test_it_cuts_a_list_into_chunks_with_a_shorter_last_one():
    assert chunked([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert chunked([], 3) == []


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "2"])
def test_it_refuses_a_chunk_size_that_is_not_a_positive_integer(size):
    with pytest.raises(ValueError, match="positive integer"):
        chunked([1, 2], size)
