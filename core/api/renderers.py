"""The strict JSON renderer: no NaN or Infinity in any response (fault C1)."""

from __future__ import annotations

import json

from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

from core.strict_json import json_safe


class StrictJSONRenderer(JSONRenderer):
    """JSON with non-finite numbers as null (``json_safe``), dumped with allow_nan=False
    (fault C1): a response never holds NaN or Infinity."""

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if data is None:
            return b""
        return json.dumps(
            json_safe(data),
            cls=JSONEncoder,
            allow_nan=False,
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode("utf-8")
