"""Template context every page gets."""

from __future__ import annotations

from django.http import HttpRequest

from core.heartbeat import worker_missing


def worker_status(request: HttpRequest) -> dict[str, object]:
    """``worker_missing``: a signed-in user's page shows the "no worker" banner
    (``_base.html``) when no Celery worker has answered for a minute (core.heartbeat).
    Lazy: evaluated only when the template reads it."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"worker_missing": worker_missing}
