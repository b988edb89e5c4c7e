"""core.ids.uuid4_many / uuid4_from: version-4 UUIDs in bulk, equal to the standard ones."""

from __future__ import annotations

import os
import pickle
import uuid

import pytest

from core.ids import uuid4_from, uuid4_many


def test_each_slice_gives_the_uuid_the_standard_constructor_gives():
    data = os.urandom(16 * 64) + b"\xff" * 16 + b"\x00" * 16  # all bits set, none set
    got = uuid4_from(data)
    want = [uuid.UUID(bytes=data[i : i + 16], version=4) for i in range(0, len(data), 16)]
    assert got == want
    for a, b in zip(got, want, strict=True):
        assert (a.int, str(a), hash(a), a.version, a.variant) == (
            b.int,
            str(b),
            hash(b),
            4,
            uuid.RFC_4122,
        )
        assert a.is_safe is uuid.SafeUUID.unknown
        assert pickle.loads(pickle.dumps(a)) == b
        assert uuid.UUID(str(a)) == a


def test_many_are_version_4_distinct_and_of_the_count_asked():
    got = uuid4_many(10_000)
    assert len(got) == 10_000
    assert len(set(got)) == 10_000
    assert {u.version for u in got} == {4}
    assert uuid4_many(0) == []


def test_a_length_not_a_multiple_of_16_is_refused():
    with pytest.raises(ValueError, match="multiple of 16"):
        uuid4_from(b"\x00" * 17)


def test_the_value_is_read_only_like_any_uuid():
    (value,) = uuid4_many(1)
    with pytest.raises(TypeError):
        value.int = 1
