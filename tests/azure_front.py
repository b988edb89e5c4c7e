"""A test-side Azure OpenAI front for the shared mock, which serves no Azure path.

``AzureFront(upstream, deployments={"name": "model it serves"}, api_key="k")`` runs an aiohttp
app on 127.0.0.1 (a free port) in its own thread and answers
``POST /openai/deployments/<deployment>/chat/completions?api-version=<version>`` as Azure does:

In the order Azure checks them:

- ``api-key`` header missing or not ``api_key`` (None: not checked): 401 ``{"error": {"code":
  "401", "message": "Access denied due to invalid subscription key..."}}``;
- no ``api-version`` query: 400 ``{"error": {"code": "MissingApiVersionParameter", ...}}``;
- an ``api-version`` not in ``api_versions``: 404 ``{"error": {"code": "404", "message":
  "Resource not found"}}``;
- an unknown deployment: 404 ``{"error": {"code": "DeploymentNotFound", ...}}``;
- otherwise the body is forwarded to ``<upstream>/chat/completions`` with ``model`` set to the
  deployment's (Azure ignores the body's ``model``: the deployment decides; a header
  ``X-Mock-Fault`` passed on), and the mock's status, body and rate-limit headers returned.

``base_url`` is the resource's root (``http://127.0.0.1:<port>``, like
``https://<resource>.openai.azure.com``). ``requests`` holds each request's path, query, headers
(lower-cased) and body, in order; ``stop()`` (or leaving the ``with``) shuts it down.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp
from aiohttp import web

API_VERSIONS = ("2024-10-21", "2025-01-01-preview")
UNAUTHORIZED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
    "valid key for an active subscription and use a correct regional API endpoint for your "
    "resource."
)
NO_API_VERSION = "The api-version query parameter (?api-version=) is required for all requests."
NO_DEPLOYMENT = (
    "The API deployment for this resource does not exist. If you created the deployment within "
    "the last 5 minutes, please wait a moment and try again."
)
# The answer headers passed back from the mock.
_PASSED_HEADERS = ("retry-after", "retry-after-ms")


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


class AzureFront:
    """The front; see the module docstring."""

    def __init__(
        self,
        upstream: str,
        *,
        deployments: dict[str, str],
        api_key: str | None = "azure-test-key",
        api_versions: tuple[str, ...] = API_VERSIONS,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.deployments = deployments
        self.api_key = api_key
        self.api_versions = api_versions
        self.requests: list[dict[str, Any]] = []
        self.port: int | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def base_url(self) -> str:
        assert self.port is not None, "call start() first"
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> AzureFront:
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

        self._thread = threading.Thread(target=serve, name="azure-front", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(15)
        assert not self._thread.is_alive(), "azure front thread did not stop"
        self._thread = None

    def __enter__(self) -> AzureFront:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _open(self) -> None:
        app = web.Application()
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._session = aiohttp.ClientSession()

    async def _close(self) -> None:
        await self._session.close()
        await self._runner.cleanup()

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.requests.append(
                {
                    "path": request.path,
                    "query": dict(request.query),
                    "headers": {k.lower(): v for k, v in request.headers.items()},
                    "body": body,
                }
            )
        if self.api_key is not None and request.headers.get("api-key") != self.api_key:
            return _error(401, "401", UNAUTHORIZED)
        version = request.query.get("api-version")
        if version is None:
            return _error(400, "MissingApiVersionParameter", NO_API_VERSION)
        if version not in self.api_versions:
            return _error(404, "404", "Resource not found")
        model = self.deployments.get(request.match_info["deployment"])
        if model is None:
            return _error(404, "DeploymentNotFound", NO_DEPLOYMENT)
        headers = (
            {"X-Mock-Fault": request.headers["X-Mock-Fault"]}
            if ("X-Mock-Fault" in request.headers)
            else {}
        )
        async with self._session.post(
            f"{self.upstream}/chat/completions", json={**body, "model": model}, headers=headers
        ) as answer:
            text = await answer.read()
            passed = {
                name: value
                for name, value in answer.headers.items()
                if name.lower().startswith("x-ratelimit-") or name.lower() in _PASSED_HEADERS
            }
            return web.Response(
                status=answer.status, body=text, headers=passed, content_type="application/json"
            )
