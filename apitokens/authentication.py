"""DRF authentication by ``Authorization: Bearer <token>``."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from apitokens.tokens import token_user


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """No header: None (not this scheme); a malformed header or a dead token: 401."""

    keyword = "Bearer"

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization: expected 'Bearer <token>'")
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Authorization: token is not ASCII") from exc
        user = token_user(token=token)
        if user is None:
            raise exceptions.AuthenticationFailed("invalid or revoked token")
        return user, None

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="api"'
