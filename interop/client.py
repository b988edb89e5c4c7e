"""A small Python client of the Assay API for CI scripts (httpx).

    from interop.client import AssayClient
    with AssayClient("https://assay.example.com", token=os.environ["ASSAY_TOKEN"]) as assay:
        trials = assay.list("trials", run=run_uuid, limit=250)   # 250 rows over 3 pages
        decision = assay.gate(head=head_uuid)                     # the gate's JSON
        sys.exit(decision["decision"]["exit_code"])

``limit`` is a total across pages, never a page size (fault L1): the client asks for pages
of at most ``PAGE_SIZE`` rows and follows the ``next`` cursor until it has ``limit`` rows or
the list ends, so rows added while it walks are neither repeated nor make it skip any.
"""

from __future__ import annotations

from typing import Any

import httpx

PAGE_SIZE = 100  # the API's maximum page size (core.api.pagination.IdCursorPagination)


class AssayApiError(RuntimeError):
    """A non-2xx answer: ``status`` (HTTP status code) and ``body`` (decoded JSON, or the
    text when it is not JSON)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class AssayClient:
    """Bearer-token client of ``<base_url>/api/``. ``transport`` is for tests (e.g.
    ``httpx.WSGITransport``); ``timeout`` in seconds. Use as a context manager or call
    ``close()``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {token}"},
        )

    def __enter__(self) -> AssayClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def _json(self, response: httpx.Response) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if not response.is_success:
            raise AssayApiError(response.status_code, body)
        return body

    def list(self, resource: str, *, limit: int | None = None, **filters: str) -> list[dict]:
        """Rows of ``/api/<resource>/`` (e.g. ``"trials"``) matching ``filters`` (query
        parameters such as ``run=<uuid>``, ``tag=``, ``status=``), in the API's stable order,
        at most ``limit`` in all (None: every row). Raises ``AssayApiError`` (a 400 names the
        bad filter) and ``ValueError`` for a limit below 1."""
        if limit is not None and limit < 1:
            raise ValueError(f"limit: must be at least 1, got {limit}")
        rows: list[dict] = []
        url: str | None = f"/api/{resource.strip('/')}/"
        params: dict[str, Any] | None = {**filters, "page_size": PAGE_SIZE}
        while url and (limit is None or len(rows) < limit):
            page = self._json(self._http.get(url, params=params))
            rows.extend(page["results"])
            url, params = page["next"], None  # the cursor URL carries every parameter
        return rows if limit is None else rows[:limit]

    def get(self, resource: str, key: str) -> dict:
        """One row: ``/api/<resource>/<key>/``. Raises ``AssayApiError`` (404 unknown)."""
        return self._json(self._http.get(f"/api/{resource.strip('/')}/{key}/"))

    def gate(self, *, head: str, base: str | None = None, **options: Any) -> dict:
        """``POST /api/gate``: the decision and figures, the JSON of ``manage.py gate
        --json`` (``["decision"]["exit_code"]``: 0 pass, 1 regression, 2 cannot decide).
        ``options``: ``alpha``, ``max_errored_fraction``, ``allow_untrusted``,
        ``allow_incomparable``. Raises ``AssayApiError`` (400 bad input, 404 unknown run)."""
        body = {"head": head, **({"base": base} if base else {}), **options}
        return self._json(self._http.post("/api/gate", json=body))

    def ingest(self, body: dict, *, idempotency_key: str | None = None) -> dict:
        """``POST /api/ingest`` with a JSON body (docs/ingest.md); the 201 (or replayed)
        answer. Raises ``AssayApiError`` (400 names the record and field, 409 key reused
        with another body, 413 too large)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        return self._json(self._http.post("/api/ingest", json=body, headers=headers))
