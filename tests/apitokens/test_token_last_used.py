"""apitokens.tokens.token_user: last_used_at is written on first use and then at most
once per LAST_USED_RESOLUTION (not once per request)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apitokens.models import ApiToken
from apitokens.tokens import LAST_USED_RESOLUTION, token_create, token_user

pytestmark = pytest.mark.django_db


def _updates(ctx) -> int:
    return sum(q["sql"].lstrip().upper().startswith("UPDATE") for q in ctx.captured_queries)


def test_last_used_is_written_once_a_minute_not_per_request():
    user = User.objects.create_user("tok")
    row, token = token_create(user=user, name="ci")
    assert row.last_used_at is None
    with CaptureQueriesContext(connection) as first:
        assert token_user(token=token) == user
    assert _updates(first) == 1
    stamped = ApiToken.objects.get(id=row.id).last_used_at
    assert stamped is not None
    with CaptureQueriesContext(connection) as again:
        for _ in range(5):
            assert token_user(token=token) == user
    assert _updates(again) == 0
    assert ApiToken.objects.get(id=row.id).last_used_at == stamped
    old = timezone.now() - LAST_USED_RESOLUTION - timedelta(seconds=1)
    ApiToken.objects.filter(id=row.id).update(last_used_at=old)
    assert token_user(token=token) == user
    assert ApiToken.objects.get(id=row.id).last_used_at > old
