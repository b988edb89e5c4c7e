"""What every HTML view shares: htmx requests, the role decorator, query parameters, and a
``DomainError`` on its form field."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection
from functools import wraps
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, RequestDataTooBig
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template.loader import render_to_string
from django_htmx.middleware import HtmxDetails

from core.errors import DomainError
from core.ids import uuid_parse
from core.roles import ENGINEER, LEAD, REVIEWER, user_has_role

VIEWER_ROLES = (REVIEWER, ENGINEER, LEAD)
RUNNER_ROLES = (ENGINEER, LEAD)


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


# A view function: the request, then the URL's arguments.
View = Callable[..., HttpResponse]


def role_required(*roles: str) -> Callable[[View], View]:
    """View decorator: 403 unless the signed-in user has one of ``roles``."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not user_has_role(request.user, *roles):
                raise PermissionDenied(f"this page needs the role {' or '.join(roles)}")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def uuid_or_404(raw: object, noun: str = "object") -> uuid.UUID:
    """``raw`` as a UUID (``core.ids.uuid_parse``); a 404 naming ``noun`` otherwise."""
    value = uuid_parse(raw)
    if value is None:
        raise Http404(f"No such {noun}.")
    return value


def query_uuid(request: HttpRequest, name: str) -> uuid.UUID | None:
    """``?<name>=`` as a UUID; None when absent or empty; malformed: ``BadRequest`` (400)."""
    raw = request.GET.get(name)
    if not raw:
        return None
    value = uuid_parse(raw)
    if value is None:
        raise BadRequest(f"{name}: expected a UUID, got {raw[:100]!r}")
    return value


def query_object(request: HttpRequest, name: str, queryset: QuerySet[Any], noun: str = "") -> Any:
    """The row of ``queryset`` whose ``uuid`` is ``?<name>=``; None when absent or empty. Malformed:
    400; a UUID naming no row: 404 naming the parameter."""
    value = query_uuid(request, name)
    if value is None:
        return None
    row = queryset.filter(uuid=value).first()
    if row is None:
        raise Http404(f"{name}: no {noun or name} with id {value}")
    return row


def query_choice(
    request: HttpRequest, name: str, choices: Collection[str], default: str = ""
) -> str:
    """``?<name>=`` in ``choices``; ``default`` when absent or empty; else a 400 listing them."""
    raw = request.GET.get(name)
    if not raw:
        return default
    if raw not in choices:
        raise BadRequest(f"{name}: expected one of {', '.join(choices)}, got {raw[:100]!r}")
    return raw


def query_page(request: HttpRequest) -> int:
    """``?page=`` >= 1 (default 1; past the end shows the last); else a 400."""
    raw = request.GET.get("page")
    if not raw:
        return 1
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        raise BadRequest(f"page: expected a page number (1, 2, ...), got {raw[:100]!r}")
    return int(raw)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: the request's fault as text (a too-large form post names the limit)."""
    message = str(exception) if isinstance(exception, BadRequest) else ""
    too_large = isinstance(exception, RequestDataTooBig)
    if too_large:
        message = (
            f"The form post is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes, the "
            "limit of a form; nothing was saved. Go back (your browser keeps what you typed) "
            "and shorten the longest field."
        )
    context = {"message": message, "too_large": too_large}
    html = render_to_string("400.html", context, request=request)
    return HttpResponseBadRequest(html)


def form_error(form: forms.Form, error: DomainError) -> None:
    """``error`` on the form field named by the first part of its path (``graders[2].kind`` ->
    ``graders``), else as a non-field error."""
    name = error.field.split(".")[0].split("[")[0]
    form.add_error(name if name in form.fields else None, str(error))


def content_length(request: HttpRequest) -> int | None:
    """``Content-Length`` in bytes; None when absent or not digits. 20 or more digits read as
    10**19 without ``int()`` (which refuses thousands of digits)."""
    raw = request.META.get("CONTENT_LENGTH") or ""
    if not (raw.isascii() and raw.isdigit()):
        return None
    return int(raw) if len(raw) < 20 else 10**19
