"""Writing an ingest: the suite and run, then every record, in one transaction; the
idempotency key replays the first answer, and another body under it is a conflict."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction

from core.errors import DomainError
from core.gc_pause import gc_paused_call
from evals.models import IngestKey, Run, Suite
from interop.importers.context import ImportContext, ImportSummary
from interop.importers.trial_row import CaseMemo
from interop.importers.trials_writer import TrialsWriter
from interop.ingest.records import (
    BATCH_SIZE,
    IngestHeader,
    IngestOutcome,
    header_parse,
    record_parse,
)
from interop.ingest.sources import IngestSource


def _run_write(*, header: IngestHeader, source: IngestSource, user: Any) -> ImportSummary:
    """Create the suite (if absent) and the run, then write every record; inside the
    caller's transaction. Raises ``DomainError``."""
    header_record = 1 if source.fmt == "ndjson" else None
    suite, _ = Suite.objects.get_or_create(
        name=header.suite, defaults={"kind": header.suite_kind or Suite.Kind.REGRESSION}
    )
    suite = Suite.objects.select_for_update().get(pk=suite.pk)
    if header.suite_kind is not None and suite.kind != header.suite_kind:
        raise DomainError(
            detail=f"header: field suite_kind: suite {suite.name!r} exists with kind "
            f"{suite.kind!r}, not {header.suite_kind!r}",
            record=header_record,
            field="suite_kind",
        )
    if Run.objects.filter(suite=suite, name=header.run).exists():
        raise DomainError(
            detail=f"header: field run: run {header.run!r} already exists in suite "
            f"{suite.name!r}; choose a new name",
            record=header_record,
            field="run",
        )
    summary = ImportSummary(suite=suite, format=f"ingest-{source.fmt}")
    ctx = ImportContext(suite=suite, run_name=header.run, filename="", summary=summary, user=user)
    run = ctx.run_create(
        name=header.run,
        fmt=f"ingest-{source.fmt}",
        model=header.model,
        source_version=header.source_version,
        extra={"via": "POST /api/ingest"},
    )
    writer = TrialsWriter(ctx=ctx, run=run, batch_size=BATCH_SIZE)
    cases = CaseMemo()  # the attempts of a case repeat its content: checked once
    try:
        for record, where, obj, non_finite in source.records():
            writer.add(
                record_parse(
                    obj,
                    where=where,
                    record=record,
                    threshold=header.threshold,
                    needs_scan=non_finite,
                    cases=cases,
                )
            )
        if writer.added == 0:
            raise DomainError(
                detail="field trials: at least one trial record is required", field="trials"
            )
        writer.finish()
    except RecursionError:
        raise DomainError(detail="a record is nested too deeply to be checked") from None
    return summary


class _KeyTaken(Exception):
    """Another request holds (or committed) the idempotency key."""


def _replay(*, key: str, field: str, source: IngestSource) -> IngestOutcome:
    stored = IngestKey.objects.get(key=key)
    source.finish()
    if stored.body_sha256 != source.sha256():
        raise DomainError(
            detail=f"{field} {key!r} was already used with a different request body; "
            "use a new key for a new run",
            field=field,
            code="conflict",
            key=key,
        )
    return IngestOutcome(status=stored.status_code, body=json.loads(stored.response), replayed=True)


@gc_paused_call
def ingest_submit(
    *,
    source: IngestSource,
    user: Any,
    idempotency_key: str | None,
    respond: Callable[[Run, ImportSummary], dict[str, Any]],
) -> IngestOutcome:
    """Store one posted run all or nothing, idempotent under a key (``interop.ingest.records``).
    ``source`` from ``source_open``; ``idempotency_key`` the header or None;
    ``respond(run, summary)`` builds the 201 body stored for replays. Returns ``IngestOutcome``.
    Raises ``DomainError``: 400, "too_large" (413), "conflict" (409). Runs with the cyclic GC
    paused (``core.gc_pause``): a batch's tens of thousands of live containers made
    old-generation collections ~30% of the CPU at 50,000 trials."""
    record = 1 if source.fmt == "ndjson" else None
    header = header_parse(source.header, record=record)
    key, field = idempotency_key, "Idempotency-Key"
    if key is not None and header.run_key is not None and key != header.run_key:
        raise DomainError(
            detail="header: field run_key: differs from the Idempotency-Key header "
            "(send one, or the same value in both)",
            record=record,
            field="run_key",
        )
    if key is None and header.run_key is not None:
        key, field = header.run_key, "run_key"
    if key is not None and IngestKey.objects.filter(key=key).exists():
        return _replay(key=key, field=field, source=source)
    try:
        with transaction.atomic():
            claim = None
            if key is not None:
                try:
                    with transaction.atomic():
                        claim = IngestKey.objects.create(
                            key=key,
                            user=user if getattr(user, "is_authenticated", False) else None,
                            body_sha256="",
                            status_code=0,
                            response="",
                        )
                except IntegrityError:
                    raise _KeyTaken from None
            summary = _run_write(header=header, source=source, user=user)
            source.finish()
            run = summary.runs[0]
            body = respond(run, summary)
            if claim is not None:
                claim.body_sha256, claim.run, claim.status_code = source.sha256(), run, 201
                claim.response = json.dumps(body, ensure_ascii=False, allow_nan=False)
                claim.save(update_fields=["body_sha256", "run", "status_code", "response"])
    except _KeyTaken:
        assert key is not None  # _KeyTaken is raised only when claiming a key
        return _replay(key=key, field=field, source=source)
    return IngestOutcome(status=201, body=body)
