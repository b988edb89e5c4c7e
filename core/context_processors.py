"""Template context every page gets."""

from __future__ import annotations

from django.http import HttpRequest

from core.heartbeat import worker_missing


def worker_status(request: HttpRequest) -> dict[str, object]:
    """``worker_missing`` for the "no worker" banner (``core.heartbeat``), evaluated lazily."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"worker_missing": worker_missing}
