"""A real local OpenAI-compatible chat-completions server for tests, scripted by prompt markers.

Usage::

    from tests.fakellm import FakeLLM, fake_llm  # fake_llm is a pytest fixture

    with FakeLLM(retry_after="2") as llm:          # or the ``fake_llm`` fixture
        target = OpenAITarget.from_config({"kind": "openai", "base_url": llm.base_url, ...})
        ...
        assert llm.calls["429"] == 4
        assert llm.max_in_flight > 16

It runs an aiohttp server on 127.0.0.1 (random free port) in its own thread and event
loop; ``stop()`` (or leaving the ``with``) shuts it down and joins the thread.

Markers anywhere in the request's messages (the first ``[fault=...]`` decides):

| marker | reply |
|---|---|
| none | 200, content ``[answer=TEXT]``'s TEXT if given, else ``fake answer`` |
| ``[fault=429]`` | always 429 ``rate_limit_error``, header ``Retry-After: <retry_after>`` |
| ``[fault=429-date]`` | always 429 with ``Retry-After`` as an HTTP-date ``retry_after`` s ahead |
| ``[fault=500]`` ``[fault=502]`` ``[fault=503]`` | always that status, ``server_error`` body |
| ``[fault=timeout]`` | holds the request ``hang_s`` seconds (or until ``stop()``), then 504 |
| ``[fault=400-temperature]`` | 400, ``TEMPERATURE_MESSAGE`` (OpenAI's rejected-parameter body) |
| ``[fault=malformed]`` | 200 with a body that is not JSON |
| ``[fault=no-choices]`` / ``[fault=empty]`` | 200 with ``choices: []`` / empty content |
| ``[fault=refusal]`` | 200 with ``content: null`` and ``message.refusal`` set |
| ``[fault=<any above>x<N>]`` | that fault for the first N calls of this exact prompt, then 200 |
| ``[latency=MS]`` | wait MS milliseconds before answering (any reply) |

A ``responder`` (``FakeLLM(responder=fn)``) scripts replies: ``fn(body) -> str | None``
is called for every request without an active fault; a string is the reply content, bytes
are the whole 200 body as sent (hostile bytes: a raw NUL, invalid UTF-8), a ``(status,
bytes)`` pair that status with that body (a 422, a 200 KB error page), a dict the assistant
``message`` itself (an agent's turn: ``{"content": None, "tool_calls": [...]}``, see
``tool_calls_message``), None falls back to the markers above (a scripted judge, e.g. one
that always answers ``A``). The prompt text the markers are read from is every message's
string content (a tool call's turn has none).

Counters (read from the test thread): ``calls[marker]`` (``"ok"`` for no fault marker,
else the marker's fault text as written, e.g. ``"429x1"``), ``requests`` (total),
``bodies`` (request JSON, in arrival order), ``headers`` (each request's headers, names
lower-cased, in the same order), ``in_flight``, ``max_in_flight``.
``reset()`` clears counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from aiohttp import web

FAULT_RE = re.compile(r"\[fault=([a-z0-9-]+?)(?:x(\d+))?\]")
ANSWER_RE = re.compile(r"\[answer=([^\]]*)\]")
LATENCY_RE = re.compile(r"\[latency=(\d+)\]")
TEMPERATURE_MESSAGE = "Unsupported parameter: 'temperature' is not supported with this model."


class FakeLLM:
    """The server; see the module docstring for markers and counters."""

    def __init__(self, *, retry_after: str = "1", hang_s: float = 10.0, responder=None) -> None:
        self.retry_after = retry_after
        self.responder = responder
        self.hang_s = hang_s
        self.port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._lock = threading.Lock()
        self.reset()

    # -- lifecycle -----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self.port is not None, "call start() first"
        return f"http://127.0.0.1:{self.port}/v1"

    def target(self, **extra: object) -> dict:
        """An ``openai`` target calling this server: model ``target-model``, prompt
        ``$input``, one attempt, a 5 s timeout; ``extra`` keys added or replacing those."""
        return {
            "kind": "openai",
            "base_url": self.base_url,
            "model": "target-model",
            "prompt_template": "$input",
            "max_attempts": 1,
            "timeout_s": 5,
            **extra,
        }

    def start(self) -> FakeLLM:
        """Start serving in a background thread; returns self once the port is bound."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._open())
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._close())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fakellm", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop the server, end held requests, and join its thread."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(15)
        assert not self._thread.is_alive(), "fakellm thread did not stop"
        self._thread = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        with self._lock:
            self.calls: Counter[str] = Counter()
            self.per_prompt: Counter[str] = Counter()
            self.bodies: list[dict] = []
            self.headers: list[dict[str, str]] = []
            self.requests = 0
            self.in_flight = 0
            self.max_in_flight = 0

    async def _open(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        await self._runner.cleanup()

    # -- the endpoint --------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        text = "\n".join(
            m.get("content") if isinstance(m.get("content"), str) else ""
            for m in body.get("messages", [])
            if isinstance(m, dict)
        )
        fault_match = FAULT_RE.search(text)
        marker = fault_match.group(0)[len("[fault=") : -1] if fault_match else "ok"
        with self._lock:
            self.bodies.append(body)
            self.headers.append({name.lower(): value for name, value in request.headers.items()})
            self.calls[marker] += 1
            self.per_prompt[text] += 1
            nth = self.per_prompt[text]
        latency = LATENCY_RE.search(text)
        if latency:
            await asyncio.sleep(int(latency.group(1)) / 1000)
        fault = None
        if fault_match:
            times = fault_match.group(2)
            if times is None or nth <= int(times):
                fault = fault_match.group(1)
        if fault is not None:
            return await self._fault(fault)
        answer = ANSWER_RE.search(text)
        content = answer.group(1) if answer else "fake answer"
        message = None
        if self.responder is not None:
            scripted = self.responder(body)
            if isinstance(scripted, bytes):
                return web.Response(body=scripted, content_type="application/json")
            if isinstance(scripted, tuple):
                status, raw = scripted
                return web.Response(status=status, body=raw, content_type="application/json")
            if isinstance(scripted, dict):
                message = {"role": "assistant", **scripted}
                content = scripted.get("content") or ""
            elif scripted is not None:
                content = scripted
        if message is None:
            message = {"role": "assistant", "content": content}
        return web.json_response(
            {
                "id": f"chatcmpl-fake-{self.requests}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": max(1, len(text) // 4),
                    "completion_tokens": max(1, len(content) // 4),
                    "total_tokens": max(1, len(text) // 4) + max(1, len(content) // 4),
                    # As OpenAI reports them: parts of the counts above (providers.usage).
                    "prompt_tokens_details": {"cached_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0},
                },
            }
        )

    async def _fault(self, fault: str) -> web.StreamResponse:
        if fault in ("429", "429-date"):
            if fault == "429":
                retry_after = self.retry_after
            else:
                when = datetime.now(UTC) + timedelta(seconds=float(self.retry_after))
                retry_after = format_datetime(when, usegmt=True)
            return web.json_response(
                {
                    "error": {
                        "type": "rate_limit_error",
                        "message": "Rate limit reached for requests",
                    }
                },
                status=429,
                headers={"Retry-After": retry_after},
            )
        if fault in ("500", "502", "503"):
            return web.json_response(
                {
                    "error": {
                        "type": "server_error",
                        "message": f"The server had an error ({fault})",
                    }
                },
                status=int(fault),
            )
        if fault == "timeout":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.hang_s)
            return web.json_response({"error": {"message": "gateway timeout"}}, status=504)
        if fault == "400-temperature":
            return web.json_response(
                {
                    "error": {
                        "message": TEMPERATURE_MESSAGE,
                        "type": "invalid_request_error",
                        "param": "temperature",
                        "code": "unsupported_parameter",
                    }
                },
                status=400,
            )
        if fault == "malformed":
            return web.Response(text='{"choices": [ {"message": ', content_type="application/json")
        if fault == "refusal":
            return web.json_response(
                {
                    "id": "x",
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": None,
                                "refusal": "I can't help with that.",
                            },
                            "finish_reason": "stop",
                        }
                    ],
                }
            )
        if fault == "no-choices":
            return web.json_response({"id": "x", "choices": [], "usage": {}})
        if fault == "empty":
            return web.json_response(
                {
                    "id": "x",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}],
                }
            )
        return web.json_response(
            {"error": {"message": f"fakellm: unknown fault {fault}"}}, status=418
        )


@pytest.fixture
def fake_llm():
    """A started ``FakeLLM`` (Retry-After: 1), stopped after the test."""
    server = FakeLLM()
    server.start()
    yield server
    server.stop()


def body_text(body: dict) -> str:
    """All message contents of a recorded request body, joined by newlines."""
    return "\n".join(m.get("content") or "" for m in body.get("messages", []))


__all__ = ["FakeLLM", "TEMPERATURE_MESSAGE", "body_text", "fake_llm", "tool_calls_message"]


def tool_calls_message(*calls: tuple[str, dict | str], content: str | None = None) -> dict:
    """An assistant turn calling tools, for a ``responder``: ``calls`` are ``(name,
    arguments)``, arguments a dict (sent as a JSON string, as OpenAI does) or a raw string
    (malformed arguments); ids are ``call_<n>`` in order."""
    return {
        "content": content,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for i, (name, arguments) in enumerate(calls)
        ],
    }
