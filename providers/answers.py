"""Reading a model endpoint's answer, whatever its protocol: a reply, a final error, or a
retryable failure (``Attempt``); each protocol reads its own 200 (``providers.openai.answers``,
``providers.anthropic.answers``).

Kinds: 429 ``rate_limited`` and 5xx ``server_error <status>`` are retried (at least
``retry_after``); a 400/422 naming a refused parameter is ``rejected_parameter``; other
non-200s ``client_error <status>``; a 200 without content ``malformed_response``. A stored
error body past ``MAX_ERROR_BODY_BYTES`` (2 KB) is an excerpt (``error_body_excerpt``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from providers.limiter.headers import retry_after_ms_seconds
from providers.limiter.rules import Outcome
from providers.reply import ProviderReply
from providers.transport import HttpAnswer
from providers.usage import Usage, usage_tokens

MAX_ERROR_BODY_BYTES = 2048  # an upstream error body is stored and shown as this excerpt
# The HTTP statuses whose answer may say a request parameter is refused.
REJECTED_PARAMETER_STATUSES = (400, 422)
_QUOTED = r"['\"`]([A-Za-z_][\w.\-\[\]]*)['\"`]"
_REJECTED_PARAMETER_MESSAGES = (
    # "Unsupported parameter: 'temperature' is not supported with this model."
    re.compile(
        r"\b(?:unsupported|unrecognized|unknown|unexpected|extra)\s+(?:request\s+)?"
        r"(?:parameter|argument|field|keyword|value)s?\b[^'\"`\n]{0,40}" + _QUOTED,
        re.IGNORECASE,
    ),
    # "'logprobs' is not supported with this model"
    re.compile(
        _QUOTED + r"\s+(?:is|are)\s+(?:not\s+supported|unsupported|not\s+permitted|"
        r"not\s+allowed|not\s+recognized)",
        re.IGNORECASE,
    ),
    # "Unrecognized request argument supplied: functions"
    re.compile(r"unrecognized request arguments? supplied:\s*([A-Za-z_][\w.\-]*)", re.IGNORECASE),
)
_REJECTED_WORDS = re.compile(
    r"unsupported (?:parameter|value)|unrecognized request argument|"
    r"extra inputs are not permitted|not supported with this model",
    re.IGNORECASE,
)


@dataclass
class Attempt:
    """An attempt's outcome: a final reply, or a retryable failure (kind, words, wait in seconds,
    what is stored)."""

    result: ProviderReply | None = None
    retry_kind: str | None = None
    retry_message: str = ""
    retry_after_s: float | None = None
    raw: Any = None
    outcome: Outcome | None = None  # what the answer teaches the limiter


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds from ``Retry-After`` (delta-seconds or HTTP-date, RFC 9110 §10.2.3); None when
    unreadable; never negative."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    return max(0.0, (when - now).total_seconds())


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait an answer asks for: ``retry-after-ms`` when sent, else ``Retry-After``."""
    from_ms = retry_after_ms_seconds(headers)
    return from_ms if from_ms is not None else retry_after_seconds(headers.get("Retry-After"))


def provider_message(body: Any, text: str) -> str:
    """The provider's error words (at most ``MAX_ERROR_BODY_BYTES`` of UTF-8): ``error.message``,
    ``error``, ``message``, ``detail[0].msg``, else the body text."""
    words = None
    if isinstance(body, dict):
        err = body.get("error")
        detail = body.get("detail")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            words = err["message"]
        elif isinstance(err, str):
            words = err
        elif isinstance(body.get("message"), str):
            words = body["message"]
        elif isinstance(detail, str):
            words = detail
        elif isinstance(detail, list) and detail and isinstance(detail[0], dict):
            words = str(detail[0].get("msg") or "") or None
    return utf8_prefix(words if words is not None else text) or "(empty body)"


def utf8_prefix(text: str, limit: int = MAX_ERROR_BODY_BYTES) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (never inside a character)."""
    if len(text) * 4 <= limit:
        return text
    return text.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")


def error_body_excerpt(body: Any, text: str) -> Any:
    """The parsed body when at most 2 KB of UTF-8, else ``{"excerpt", "truncated": true,
    "bytes"}``."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= MAX_ERROR_BODY_BYTES:
        return body if body is not None else text
    return {"excerpt": utf8_prefix(text), "truncated": True, "bytes": size}


def rejected_parameter_name(status: int, body: Any, message: str) -> str | None:
    """The parameter a 400/422 refuses, or None. From ``error.param``, a pydantic ``detail``
    with ``loc`` ``["body", name]`` saying extra or not permitted, or a name quoted in the
    message; ``""`` when unnamed. A name under ``messages`` is one case's content: None."""
    name = _rejected_parameter_name(status, body, message)
    return None if name is not None and name.startswith("messages") else name


def _rejected_parameter_name(status: int, body: Any, message: str) -> str | None:
    if status not in REJECTED_PARAMETER_STATUSES:
        return None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and isinstance(err.get("param"), str) and err["param"]:
        param: str = err["param"]
        return param
    detail = body.get("detail") if isinstance(body, dict) else None
    for item in detail if isinstance(detail, list) else []:
        if not isinstance(item, dict):
            continue
        loc, why = item.get("loc"), f"{item.get('msg', '')} {item.get('type', '')}".lower()
        extra = "extra" in why or "not permitted" in why or "forbidden" in why
        if extra and isinstance(loc, list) and len(loc) >= 2 and loc[0] == "body":
            return str(loc[1])
    for pattern in _REJECTED_PARAMETER_MESSAGES:
        match = pattern.search(message)
        if match:
            return match.group(1)
    return "" if _REJECTED_WORDS.search(message) else None


def answered(
    body: dict[str, Any], output: str, *, model: str, usage_read: Callable[[Any], Usage]
) -> ProviderReply:
    """A 200's reply: ``output``, the body kept whole, its ``usage`` read into token classes by
    the protocol's ``usage_read`` (``providers.usage``: None when unknown), and the model the
    body names (else ``model``)."""
    answered_by = body.get("model") if isinstance(body.get("model"), str) else model
    return ProviderReply(
        output=output,
        raw_response=body,
        model=answered_by,
        **usage_tokens(usage_read(body.get("usage"))),
    )


def malformed_raw(body: dict[str, Any], text: str) -> Any:
    """A malformed 200's stored body: itself up to 2 KB (the judge client reads refusals),
    else ``{"status": 200, "body": <excerpt>}``."""
    excerpt = error_body_excerpt(body, text)
    return body if excerpt is body else {"status": 200, "body": excerpt}


def errored(kind: str, message: str, raw: Any, model: str) -> ProviderReply:
    """A final error of kind ``kind``: ``error`` is ``"<kind>: <message>"``."""
    return ProviderReply(
        output="", raw_response=raw, error=f"{kind}: {message}", error_kind=kind, model=model
    )


def answer_read(
    response: HttpAnswer,
    *,
    model: str,
    reply_read: Callable[[Any, str], ProviderReply],
    parameter_name: Callable[[int, Any, str], str | None] = rejected_parameter_name,
) -> Attempt:
    """What ``response`` says, for any protocol: a non-200 as in the module docstring (the refused
    parameter named by ``parameter_name(status, body, message)``), a 200 as ``reply_read(body,
    text)`` says (``body`` the parsed JSON, None when it is not JSON)."""
    text = response.text
    try:
        body: Any = json.loads(text) if text else None
    except ValueError:
        body = None
    status = response.status
    if status != 200:
        message = provider_message(body, text)
        raw = {"status": status, "body": error_body_excerpt(body, text)}
        if status == 429:
            return Attempt(
                retry_kind="rate_limited",
                retry_message=message,
                retry_after_s=retry_after(response.headers),
                raw=raw,
            )
        if status >= 500:
            return Attempt(
                retry_kind=f"server_error {status}",
                retry_message=message,
                retry_after_s=retry_after(response.headers),
                raw=raw,
            )
        param = parameter_name(status, body, message)
        if param is not None:
            what = f"parameter {param!r}" if param else "a parameter"
            raw["rejected_parameter"] = param
            message = f"model {model!r} refuses {what}: {message}"
            return Attempt(result=errored("rejected_parameter", message, raw, model))
        kind = f"client_error {status}"
        return Attempt(result=errored(kind, message, raw, model))
    return Attempt(result=reply_read(body, text))
