"""The Assay API client (httpx, bearer token).

    from assay_client import AssayClient
    with AssayClient("https://assay.example.com", token=os.environ["ASSAY_TOKEN"]) as assay:
        answer = assay.ingest({"suite": "checkout", "run": "nightly-42"}, trials)
        run = assay.run(answer["run"])                        # the run with its report
        rows = assay.trials(run=answer["run"], limit=250)     # 250 rows over 3 pages
        decision = assay.gate(head=answer["run"])             # against the suite's baseline
        sys.exit(decision["decision"]["exit_code"])  # 0 pass, 1 regression, 2 cannot decide

Every answer that is not a success raises ``AssayError`` with the API's error fields
(``status``, ``detail``, ``field``, ``record``). The API is documented in the Assay
repository's ``docs/api.md`` and at ``/api/schema/`` of a server.

``limit`` is a total across pages, never a page size: the client asks for pages of at most
``PAGE_SIZE`` rows and follows the ``next`` cursor until it has ``limit`` rows or the list
ends, so rows added while it walks are neither repeated nor make it skip any.
"""

from __future__ import annotations

import builtins
import json
import os
import time
import uuid
from collections.abc import Iterable
from typing import Any

import httpx

from assay_client.errors import AssayError

PAGE_SIZE = 100  # the API's largest page
RETRY_STATUSES = frozenset({502, 503, 504})  # a proxy or a restarting server: try again
NDJSON = "application/x-ndjson"


def json_line(value: Any) -> str:
    """``value`` as one line of strict JSON (no ``NaN``/``Infinity``: the API refuses them;
    ``ValueError`` here instead)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def is_uuid(text: str) -> bool:
    """True when ``text`` is a UUID (the API names runs, cases and trials by UUID)."""
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


class AssayClient:
    """Bearer-token client of ``<base_url>/api/``.

    ``base_url`` defaults to the environment's ``ASSAY_URL`` and ``token`` to
    ``ASSAY_TOKEN`` (``ValueError`` when neither is given); ``timeout`` is per request, in
    seconds; ``transport`` is httpx's (tests). Use it as a context manager or call
    ``close()``.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("ASSAY_URL")
        token = token or os.environ.get("ASSAY_TOKEN")
        if not base_url:
            raise ValueError("the Assay URL is missing: pass base_url or set ASSAY_URL")
        if not token:
            raise ValueError("the API token is missing: pass token or set ASSAY_TOKEN")
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )

    def __enter__(self) -> AssayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    # ---- reading ---------------------------------------------------------------------

    def list(self, resource: str, *, limit: int | None = None, **filters: str) -> list[dict]:
        """Rows of ``/api/<resource>/`` (``"suites"``, ``"runs"``, ``"trials"``, ...)
        matching ``filters`` (query parameters such as ``run=<uuid>``, ``tag=``,
        ``status=``), in the API's stable order, at most ``limit`` in all (None: every
        row). Raises ``AssayError`` (a 400 names the bad filter) and ``ValueError`` for a
        limit below 1."""
        if limit is not None and limit < 1:
            raise ValueError(f"limit: must be at least 1, got {limit}")
        rows: list[dict] = []
        url: str | None = f"/api/{resource.strip('/')}/"
        params: dict[str, Any] | None = {**filters, "page_size": PAGE_SIZE}
        while url and (limit is None or len(rows) < limit):
            page = self._answer(self._http.get(url, params=params))
            rows.extend(page["results"])
            url, params = page["next"], None  # the cursor URL carries every parameter
        return rows if limit is None else rows[:limit]

    def get(self, resource: str, key: str) -> dict:
        """One row: ``/api/<resource>/<key>/``. Raises ``AssayError`` (404 unknown)."""
        return self._answer(self._http.get(f"/api/{resource.strip('/')}/{key}/"))

    def run(self, run_id: str) -> dict:
        """The run ``run_id`` (UUID) with its target, grader set and report (pass rate with
        its 95% interval, pass@k, errors, tokens, latency, cost). Raises ``AssayError``."""
        return self.get("runs", run_id)

    # builtins.list: ``list`` in this class is the method above.
    def trials(self, *, limit: int | None = None, **filters: str) -> builtins.list[dict]:
        """Trials matching ``filters`` (``run``, ``case``, ``suite`` UUIDs, ``tag``,
        ``status``), at most ``limit``: ``list("trials", ...)``."""
        return self.list("trials", limit=limit, **filters)

    def run_find(self, *, suite: str, run: str) -> dict:
        """The run named ``run`` in the suite named ``suite`` (names as given at ingest or
        start). Raises ``AssayError`` with status 404 and field ``suite`` or ``run`` when
        there is none (a run name is unique in its suite)."""
        for row in self.list("suites"):
            if row["name"] == suite:
                for candidate in self.list("runs", suite=row["uuid"]):
                    if candidate["name"] == run:
                        return candidate
                raise AssayError(404, f"suite {suite!r} has no run named {run!r}", field="run")
        raise AssayError(404, f"no suite named {suite!r}", field="suite")

    # ---- writing -----------------------------------------------------------------------

    def ingest(
        self,
        run: dict,
        trials: Iterable[dict],
        *,
        idempotency_key: str | None = None,
        retries: int = 3,
        retry_wait_s: float = 1.0,
    ) -> dict:
        """``POST /api/ingest`` as NDJSON (docs/ingest.md): ``run`` is the header object
        (``suite``, ``run``, optional ``suite_kind``, ``model``, ``source_version``,
        ``threshold``, ``run_key``), ``trials`` the trial records (``case_id``, ``input``,
        ``output``, ``attempt``, ``passed``, ``score``, ...). Returns the 201 answer
        (``run`` UUID, ``counts``, ``url``, ``page``), or the stored answer of an earlier
        request with the same key and body.

        With a key (``idempotency_key`` or ``run["run_key"]``) a connection failure or a
        502/503/504 is retried up to ``retries`` times with the same bytes (waits of
        ``retry_wait_s``, doubling): the server writes the run once and replays its answer.
        Without a key nothing is retried. Raises ``AssayError`` (400 naming the record and
        field, nothing written; 409 the key was used with another body; 413 too large),
        ``httpx.TransportError`` when the server stays unreachable, and ``ValueError``
        for a ``NaN`` or ``Infinity`` number (strict JSON; a score that is not a number is
        sent as the string ``"NaN"``)."""
        if "trials" in run:
            raise ValueError("run: the header object holds no trials; pass them as trials")
        body = "\n".join([json_line(run), *(json_line(t) for t in trials)]).encode() + b"\n"
        headers = {"Content-Type": NDJSON}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        keyed = bool(idempotency_key or run.get("run_key"))
        attempt = 0
        while True:
            try:
                response = self._http.post("/api/ingest", content=body, headers=headers)
            except httpx.TransportError:
                if not keyed or attempt >= retries:
                    raise
            else:
                if not (keyed and response.status_code in RETRY_STATUSES and attempt < retries):
                    return self._answer(response)
            time.sleep(retry_wait_s * 2**attempt)
            attempt += 1

    def gate(
        self,
        *,
        head: str | None = None,
        head_file: dict | None = None,
        base: str | None = None,
        base_file: dict | None = None,
        **options: Any,
    ) -> dict:
        """``POST /api/gate``: the decision and figures of ``manage.py gate --json``
        (``["decision"]["exit_code"]``: 0 pass, 1 regression, 2 cannot decide). Head and
        base are run UUIDs (``head``, ``base``) or ``export_run`` documents (``head_file``,
        ``base_file``); without a base, the head suite's current baseline. ``options``:
        ``alpha``, ``max_errored_fraction``, ``allow_untrusted``, ``allow_incomparable``,
        ``top_up`` (then the answer may be a top-up to wait for: ``top_up_wait``),
        ``max_trials_per_case``, ``max_cost_usd``. Raises ``AssayError`` (400 bad input
        naming the field, 404 unknown run)."""
        body: dict[str, Any] = {}
        for name, value in (
            ("head", head),
            ("head_file", head_file),
            ("base", base),
            ("base_file", base_file),
        ):
            if value is not None:
                body[name] = value
        body.update(options)
        return self._answer(
            self._http.post(
                "/api/gate",
                content=json_line(body).encode(),
                headers={"Content-Type": "application/json"},
            )
        )

    def top_up_wait(
        self, top_up: dict, *, timeout_s: float = 3600.0, poll_s: float = 2.0
    ) -> dict | None:
        """Poll a top-up (the 202 answer of ``gate(top_up=True)``) until it has ended; its
        ``result`` (the gate's decision), or None after ``timeout_s`` seconds (it goes on
        on the server: ask again later). Raises ``AssayError``."""
        deadline = time.monotonic() + timeout_s
        while top_up.get("result") is None:
            if time.monotonic() >= deadline:
                return None
            time.sleep(poll_s)
            top_up = self._answer(self._http.get(top_up["url"]))
        return top_up["result"]

    def _answer(self, response: httpx.Response) -> Any:
        try:
            body = response.json()
        except ValueError:
            body = response.text
        if not response.is_success:
            raise AssayError.from_answer(response.status_code, body)
        return body
