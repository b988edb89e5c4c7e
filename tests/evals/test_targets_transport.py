"""The OpenAI target's HTTP/1.1 client (``providers.transport``) against a real local
server scripted byte by byte: what it keeps of the httpx client it replaced (timeouts,
redirects, decoding, the body's bytes, proxies, kept-alive connections) and how its failures
become the target's error kinds."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest

from evals.runner.targets import CaseInput
from evals.runner.targets.openai import OpenAITarget
from providers.transport import HttpFailure, JsonPoster, body_encode, text_decode

COMPLETION = json.dumps(
    {"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 3}}
).encode()


def _answer(status: int = 200, body: bytes = COMPLETION, headers: tuple = ()) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers]
    if not any(name.lower() == "content-type" for name, _ in headers):
        head.append("Content-Type: application/json")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


Script = Callable[[asyncio.StreamWriter, int, "Server"], Awaitable[bool]]


@dataclass
class Server:
    """What the scripted server saw: connections opened, and each request's line, headers
    (names lower-cased) and body."""

    port: int = 0
    connections: int = 0
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"


async def _serve(script: Script) -> tuple[Server, asyncio.AbstractServer]:
    """A server answering each request with ``script(writer, n, server)`` (n counts requests
    from 1; ``server.release`` is set at the end of the test); the connection is kept while
    the script returns True."""
    seen = Server()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name:
                        headers[name.lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                seen.requests.append((lines[0], headers, body))
                keep = await script(writer, len(seen.requests), seen)
                await writer.drain()
                if not keep:
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    seen.port = server.sockets[0].getsockname()[1]
    return seen, server


def _run(script: Script, go: Callable[[Server], Awaitable]) -> tuple[Server, object]:
    async def main():
        seen, server = await _serve(script)
        try:
            return seen, await go(seen)
        finally:
            seen.release.set()
            server.close()

    return asyncio.run(main())


async def _post(url: str, body, *, timeout_s: float = 5.0, max_connections: int = 4, n: int = 1):
    poster = JsonPoster(
        url, headers={"Content-Type": "application/json"}, timeout_s=timeout_s,
        max_connections=max_connections,
    )  # fmt: skip
    try:
        return [await poster.post(body) for _ in range(n)]
    finally:
        await poster.aclose()


def _target_call(url: str, **config) -> object:
    async def go():
        target = OpenAITarget.from_config(
            {
                "kind": "openai",
                "base_url": url.removesuffix("/chat/completions"),
                "model": "m",
                "prompt_template": "$input",
                "backoff_base_s": 0.0,
                "backoff_max_s": 0.0,
                **config,
            },
            rng=random.Random(1),
        )
        try:
            return await target.call(CaseInput(key="c1", input="hi"))
        finally:
            await target.aclose()

    return go()


def test_it_sends_the_body_as_compact_utf8_json_and_refuses_nan_before_sending():
    async def script(writer, n, server):
        writer.write(_answer())
        return True

    async def go(server):
        await _post(server.url, {"messages": [{"content": "café ✓"}], "temperature": 0.5})
        with pytest.raises(ValueError):
            await _post(server.url, {"temperature": float("nan")})

    seen, _ = _run(script, go)

    assert len(seen.requests) == 1
    line, headers, body = seen.requests[0]
    assert line == "POST /v1/chat/completions HTTP/1.1"
    assert body == '{"messages":[{"content":"café ✓"}],"temperature":0.5}'.encode()
    assert body == body_encode({"messages": [{"content": "café ✓"}], "temperature": 0.5})
    assert headers["content-type"] == "application/json"


def test_it_keeps_one_connection_alive_for_calls_one_after_another():
    async def script(writer, n, server):
        writer.write(_answer())
        return True

    seen, answers = _run(script, lambda server: _post(server.url, {"a": 1}, n=3))

    assert [answer.status for answer in answers] == [200, 200, 200]
    assert len(seen.requests) == 3
    assert seen.connections == 1


def test_it_does_not_follow_a_redirect_which_is_a_client_error():
    async def script(writer, n, server):
        writer.write(_answer(302, b"", headers=(("Location", "/elsewhere"),)))
        return True

    seen, result = _run(script, lambda server: _target_call(server.url))

    assert result.error_kind == "client_error 302"
    assert result.attempts == 1
    assert len(seen.requests) == 1


def test_it_decodes_the_answer_by_its_charset_else_utf8_replacing_bad_bytes():
    latin = '{"x": "café"}'.encode("latin-1")
    bad = b'{"x": "caf\xe9 \xff"}'

    async def script(writer, n, server):
        if n == 1:
            writer.write(
                _answer(body=latin, headers=(("Content-Type", "text/plain; charset=latin-1"),))
            )
        elif n == 2:
            writer.write(_answer(body=bad))
        else:
            writer.write(_answer(body=bad, headers=(("Content-Type", "text/plain; charset=nope"),)))
        return True

    _, answers = _run(script, lambda server: _post(server.url, {}, n=3))

    assert answers[0].text == '{"x": "café"}'
    assert answers[1].text == '{"x": "caf\ufffd \ufffd"}'
    assert answers[2].text == answers[1].text
    assert text_decode(b"", None) == ""


def test_it_undoes_gzip_and_reads_headers_case_insensitively_however_long():
    async def script(writer, n, server):
        headers = (
            ("Content-Encoding", "gzip"),
            ("X-RateLimit-Remaining-Requests", "7"),
            ("Set-Cookie", "c=" + "x" * 20_000),  # past aiohttp's default 8,190 bytes
        )
        writer.write(_answer(body=gzip.compress(COMPLETION), headers=headers))
        return True

    seen, answers = _run(script, lambda server: _post(server.url, {}))

    assert json.loads(answers[0].text)["choices"][0]["message"]["content"] == "ok"
    assert answers[0].headers.get("x-ratelimit-remaining-requests") == "7"
    assert "gzip" in seen.requests[0][1]["accept-encoding"]


def test_an_answer_that_stalls_mid_body_is_a_timeout_and_is_retried():
    async def script(writer, n, server):
        writer.write(_answer()[:-5])  # the head and most of the body, then nothing
        await writer.drain()
        await server.release.wait()
        return False

    seen, result = _run(
        script, lambda server: _target_call(server.url, timeout_s=0.3, max_attempts=2)
    )

    assert result.error_kind == "timeout"
    assert result.error.startswith("timeout after 2 attempts: no response within 0.3 s (")
    assert len(seen.requests) == 2


def test_waiting_longer_than_the_timeout_for_a_free_connection_is_a_timeout():
    async def script(writer, n, server):
        await server.release.wait()
        return False

    async def go(server):
        poster = JsonPoster(server.url, headers={}, timeout_s=0.3, max_connections=1)
        try:
            return await asyncio.gather(poster.post({}), poster.post({}), return_exceptions=True)
        finally:
            await poster.aclose()

    seen, outcomes = _run(script, go)

    assert all(isinstance(o, HttpFailure) and o.timeout for o in outcomes)
    assert len(seen.requests) == 1  # the second never had a connection to be sent on


def test_a_connection_closed_mid_answer_is_a_connection_error_and_is_retried():
    async def script(writer, n, server):
        if n == 1:
            writer.write(_answer()[:-5])
            return False  # closed with the body unfinished
        writer.write(_answer())
        return True

    seen, result = _run(script, lambda server: _target_call(server.url, max_attempts=3))

    assert result.ok
    assert result.output == "ok"
    assert result.attempts == 2


def test_a_connection_closed_before_any_answer_every_time_errors_as_connection_error():
    async def script(writer, n, server):
        return False

    seen, result = _run(script, lambda server: _target_call(server.url, max_attempts=2))

    assert result.error_kind == "connection_error"
    assert result.error.startswith("connection_error after 2 attempts: ")
    assert result.raw_response["error"] == "connection_error"
    assert len(seen.requests) == 2


def test_it_goes_through_the_proxy_the_environment_names_unless_no_proxy_exempts(monkeypatch):
    async def script(writer, n, server):
        writer.write(_answer())
        return True

    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)

    async def go(server):
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
        proxied = await _post("http://llm.invalid/v1/chat/completions", {})
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = await _post(server.url, {})
        return proxied + direct

    seen, answers = _run(script, go)

    assert [answer.status for answer in answers] == [200, 200]
    assert seen.requests[0][0] == "POST http://llm.invalid/v1/chat/completions HTTP/1.1"
    assert seen.requests[1][0] == "POST /v1/chat/completions HTTP/1.1"
