"""The lead's API token page: list every token, create one (shown once), revoke one."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from apitokens.forms import TokenCreateForm
from apitokens.models import ApiToken
from apitokens.tokens import token_create, token_revoke
from core.forms import unstorable_shown_on_form
from core.http import role_required
from core.roles import LEAD


def _page(
    request: HttpRequest,
    form: TokenCreateForm,
    *,
    new_token: str | None = None,
    created: ApiToken | None = None,
    status: int = 200,
) -> HttpResponse:
    tokens = ApiToken.objects.select_related("user", "created_by").order_by("-created_at", "-id")
    return render(
        request,
        "apitokens/token_list.html",
        {
            "form": form,
            "tokens": tokens,
            "new_token": new_token,
            "created": created,
        },
        status=status,
    )


@unstorable_shown_on_form
@never_cache
@require_http_methods(["GET", "POST"])
@role_required(LEAD)
def token_list(request: HttpRequest) -> HttpResponse:
    """GET: every token and the create form. POST: create a token (``token_create``) and show it
    in this response only (201). ``never_cache``: Back never shows the token again.
    """
    if request.method == "POST":
        form = TokenCreateForm(request.POST, by=request.user)
        if form.is_valid():
            row, token = token_create(
                user=form.cleaned_data["user"], name=form.cleaned_data["name"], by=request.user
            )
            return _page(
                request, TokenCreateForm(by=request.user), new_token=token, created=row, status=201
            )
        return _page(request, form, status=400)
    return _page(request, TokenCreateForm(by=request.user))


@require_POST
@role_required(LEAD)
def token_revoke_view(request: HttpRequest, token_id) -> HttpResponse:
    """Revoke a token (compare-and-set; revoking twice says so); back to the list."""
    token = get_object_or_404(ApiToken.objects.select_related("user"), uuid=token_id)
    if token_revoke(token=token, by=request.user):
        messages.success(request, f"Token {token.name!r} of {token.user} revoked.")
    else:
        messages.info(request, f"Token {token.name!r} of {token.user} was already revoked.")
    return redirect("apitokens:token-list")
