"""The HTTP/1.1 client of OpenAI-compatible calls (``JsonPoster``, aiohttp).

aiohttp, not httpx: about 0.25 against 1.0 CPU-ms per call at 64 in flight, with one
session per target and no shards (bench/bench_http_cpu.py, bench/README.md). A call keeps
httpx's behaviour:

- ``timeout_s`` to get a connection and between reads, no total; a 3xx is an answer, never
  followed; idle connections closed after 5 s; headers up to 100 KB; certifi's CA bundle;
- the body as httpx encodes ``json=`` (compact, UTF-8, NaN a ``ValueError`` before sending);
- the text as httpx decodes it (the charset if known, else UTF-8, bad bytes U+FFFD);
  gzip and deflate undone;
- the environment's proxy, read once per session; cookies sent back on later calls.

No answer raises ``HttpFailure``; an answer of any status is returned. A poster belongs to
one event loop. aiohttp is imported by the first call, not with the module (it costs a
command's start a few hundred ms; workers import it when ready)."""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import certifi
from yarl import URL

from core.egress import resolved_address_problem

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver, ResolveResult

# httpx's keep-alive expiry: an idle connection older than this is not reused.
KEEPALIVE_S = 5.0
# The longest answer head line or header httpx read (h11 holds up to 100 KB of an
# incomplete head in httpcore); aiohttp's default is 8,190 bytes.
MAX_HEADER_BYTES = 100 * 1024


@dataclass(frozen=True)
class HttpAnswer:
    """One HTTP answer: ``status``; ``headers`` (case-insensitive, as sent); ``text`` (the
    body decoded as in the module docstring)."""

    status: int
    headers: Mapping[str, str]
    text: str


class HttpFailure(Exception):
    """No answer: ``timeout`` (none within the time) or not (the connection failed);
    ``name`` is the underlying exception's class name, ``detail`` its message."""

    def __init__(self, *, timeout: bool, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.timeout = timeout
        self.name = name
        self.detail = detail


_SSL_CONTEXT: ssl.SSLContext | None = None


def ssl_context_shared() -> ssl.SSLContext:
    """One verifying SSL context per process (loading the bundle costs ~40 ms of CPU)."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = ssl.create_default_context(cafile=certifi.where())
    return _SSL_CONTEXT


def body_encode(body: Any) -> bytes:
    """``body`` as httpx 0.28 encodes ``json=``; raises ``ValueError`` for NaN or infinities."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def text_decode(content: bytes, charset: str | None) -> str:
    """Bytes as httpx's ``Response.text``: ``charset`` when known, else UTF-8, errors as U+FFFD."""
    encoding = "utf-8"
    if charset:
        with contextlib.suppress(LookupError):
            encoding = codecs.lookup(charset).name
    return content.decode(encoding, "replace")


_RESOLVER_CLASS: type[AbstractResolver] | None = None


def _endpoint_resolver() -> AbstractResolver:
    """aiohttp's resolver keeping only answers ``core.egress`` allows; none left: ``OSError``."""
    global _RESOLVER_CLASS  # noqa: PLW0603 - built once, after aiohttp is imported
    if _RESOLVER_CLASS is None:
        import aiohttp  # noqa: PLC0415 - see the module docstring

        # DefaultResolver is chosen when aiohttp is imported (AsyncResolver with aiodns,
        # else ThreadedResolver): a variable to the type checker, not a class.
        class EndpointResolver(aiohttp.DefaultResolver):  # type: ignore[misc, valid-type]
            async def resolve(
                self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
            ) -> list[ResolveResult]:
                answers: list[ResolveResult] = await super().resolve(host, port, family)
                kept = [a for a in answers if resolved_address_problem(host, a["host"]) is None]
                if not kept:
                    problem = resolved_address_problem(host, answers[0]["host"])
                    raise OSError(errno.EACCES, problem)  # aiohttp shows its strerror
                return kept

        _RESOLVER_CLASS = EndpointResolver
    return _RESOLVER_CLASS()


class JsonPoster:
    """POSTs JSON to ``url`` over at most ``max_connections`` kept-alive connections;
    ``timeout_s`` in seconds."""

    def __init__(
        self, url: str, *, headers: Mapping[str, str], timeout_s: float, max_connections: int
    ) -> None:
        # Parsed once: a URL given as text is parsed again on every request.
        self.url = URL(url)
        self.headers: Mapping[str, str] = MappingProxyType(dict(headers))
        self.max_connections = max_connections
        self.timeout_s = timeout_s
        self._proxy: URL | None = None
        self._proxy_auth: aiohttp.BasicAuth | None = None
        self._session: aiohttp.ClientSession | None = None
        # What a failed request raises besides a timeout (aiohttp's, set with the session).
        self._failures: tuple[type[BaseException], ...] = (OSError,)

    def _session_open(self) -> aiohttp.ClientSession:
        if self._session is None:
            import aiohttp  # noqa: PLC0415 - see the module docstring

            self._proxy, self._proxy_auth = _environment_proxy(self.url)
            self._failures = (aiohttp.ClientError, OSError)
            timeout = aiohttp.ClientTimeout(
                total=None,
                connect=self.timeout_s,
                sock_connect=self.timeout_s,
                sock_read=self.timeout_s,
            )
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self.max_connections,
                    limit_per_host=0,
                    keepalive_timeout=KEEPALIVE_S,
                    ssl=ssl_context_shared(),
                    resolver=_endpoint_resolver(),
                ),
                headers=dict(self.headers),
                timeout=timeout,
                max_line_size=MAX_HEADER_BYTES,
                max_field_size=MAX_HEADER_BYTES,
                trust_env=False,  # the proxy was read once, above
            )
        return self._session

    async def post(self, body: Any) -> HttpAnswer:
        """POST ``body`` and read the whole answer. Raises ``HttpFailure`` when none came,
        ``ValueError`` for a body JSON cannot hold (before sending)."""
        data = body_encode(body)
        session = self._session_open()
        try:
            async with session.post(
                self.url,
                data=data,
                allow_redirects=False,
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
            ) as response:
                content = await response.read()
                return HttpAnswer(
                    status=response.status,
                    headers=response.headers,
                    text=text_decode(content, response.charset),
                )
        except TimeoutError as exc:  # aiohttp's timeouts are TimeoutErrors (and OSErrors)
            raise HttpFailure(timeout=True, name=type(exc).__name__, detail=str(exc)) from exc
        except self._failures as exc:
            raise HttpFailure(timeout=False, name=type(exc).__name__, detail=str(exc)) from exc

    async def aclose(self) -> None:
        """Close the session and its connections (nothing when no call was made)."""
        if self._session is not None:
            await self._session.close()
            self._session = None


def _environment_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The environment's proxy for ``url`` and its credentials; (None, None) when none applies."""
    from aiohttp.helpers import get_env_proxy_for_url  # noqa: PLC0415 - see the module docstring

    try:
        return get_env_proxy_for_url(url)
    except LookupError:
        return None, None
