"""core.api.renderers.StrictJSONRenderer: orjson writes what ``json_safe`` + ``json.dumps``
wrote (the same JSON values), never NaN or Infinity, and falls back to them for what orjson
refuses."""

import datetime as dt
import json
import uuid
from decimal import Decimal

import numpy as np
import pytest
from django.utils.translation import gettext_lazy
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.utils.encoders import JSONEncoder

from core.api.renderers import StrictJSONRenderer
from core.strict_json import json_safe


def _before(data) -> bytes:
    """The renderer as it was: json_safe, then json.dumps with DRF's encoder."""
    return json.dumps(
        json_safe(data), cls=JSONEncoder, allow_nan=False, ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")


def _render(data) -> bytes:
    return StrictJSONRenderer().render(data)


VALUES = {
    "decimal": Decimal("0.00000051"),
    "decimal zero": Decimal("0E-8"),
    "decimal negative zero": Decimal("-0.00"),
    "decimal nan": Decimal("NaN"),
    "decimal infinity": Decimal("-Infinity"),
    "nan": float("nan"),
    "infinity": float("inf"),
    "numpy float": np.float64(0.25),
    "numpy nan": np.float64("nan"),
    "numpy float32": np.float32(1.5),
    "numpy int": np.int64(7),
    "numpy bool": np.bool_(True),
    "utc time": dt.datetime(2026, 12, 2, 6, 30, 15, 123456, tzinfo=dt.UTC),
    "zoned time": dt.datetime(2026, 12, 2, 6, 30, tzinfo=dt.timezone(dt.timedelta(hours=5.5))),
    "date": dt.date(2026, 12, 2),
    "time": dt.time(6, 30, 15, 500000),
    "duration": dt.timedelta(seconds=90.5),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "tuple": (1, "a", None, 2.5),
    "set": {3},
    "lazy text": gettext_lazy("Not found."),
    "bytes": b"abc",
    "text": 'quote " backslash \\ newline \n tab \t control \x01 é 雪 \u2028',
    "nested": {"a": [{"b": (Decimal("1.5"), float("-inf"))}], "c": None, "d": True},
    "big float": 1e300,
    "small float": 1e-7,
}


@pytest.mark.parametrize("name", VALUES)
def test_it_writes_the_same_json_value_as_before(name):
    data = {"value": VALUES[name], "list": [VALUES[name]]}
    assert json.loads(_render(data)) == json.loads(_before(data))


def test_non_finite_numbers_are_null():
    body = _render({"a": float("nan"), "b": [float("inf"), Decimal("NaN"), np.float64("-inf")]})
    assert json.loads(body) == {"a": None, "b": [None, None, None]}
    assert b"NaN" not in body and b"Infinity" not in body


def test_times_keep_drf_s_form():
    body = _render({"at": VALUES["utc time"]})
    assert body == b'{"at":"2026-12-02T06:30:15.123456Z"}'  # DRF: isoformat, "Z" for UTC


@pytest.mark.parametrize(
    "data",
    [
        {1: "a", None: "b", 2.5: "c"},  # keys that are not strings: json_safe's str(key)
        {"big": 2**70},  # past 64 bits
    ],
)
def test_what_orjson_refuses_is_written_as_before(data):
    assert _render(data) == _before(data)


def test_nothing_renders_as_an_empty_body():
    assert _render(None) == b""


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**63 - 1)
        | st.floats()
        | st.text()
        | st.decimals(places=8),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=5), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_any_json_like_value_reads_back_as_before(value):
    data = {"value": value}  # a body of None is no body (test_nothing_renders_...)
    try:
        before = json.loads(_before(data))
    except UnicodeEncodeError:  # a lone surrogate: not writable either way
        with pytest.raises(UnicodeEncodeError):
            _render(data)
        return
    assert json.loads(_render(data)) == before
