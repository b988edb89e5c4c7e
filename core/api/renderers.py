"""The strict JSON renderer: no NaN or Infinity in any response."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

from core.decimals import decimal_plain
from core.strict_json import json_safe

# Dates and times (and dataclasses) go to DRF's encoder, for its forms ("Z" for UTC,
# a zone-aware time refused), not orjson's own.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_DRF = JSONEncoder()


def _default(value: Any) -> Any:
    """What orjson cannot write itself, as ``json_safe`` and DRF's encoder make it."""
    if isinstance(value, Decimal):
        return decimal_plain(value) if value.is_finite() else None
    if isinstance(value, np.generic):
        return json_safe(value.item())
    return _DRF.default(value)


class StrictJSONRenderer(JSONRenderer):
    """JSON by orjson (~20x faster than ``json`` with ``json_safe`` on a page of 100 trials),
    non-finite numbers as null; other types as ``json_safe`` makes them (``_default``). What
    orjson refuses goes through ``json_safe`` and ``json.dumps(allow_nan=False)``."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        try:
            return orjson.dumps(data, default=_default, option=_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            return json.dumps(
                json_safe(data),
                cls=JSONEncoder,
                allow_nan=False,
                ensure_ascii=False,
                separators=(",", ":"),
            ).encode("utf-8")
