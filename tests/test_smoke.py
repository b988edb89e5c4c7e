import pytest

from evals.models import Case, Suite


@pytest.mark.django_db
def test_it_redirects_anonymous_users_to_login(client):
    response = client.get("/runs/")
    assert response.status_code == 302
    assert response.url.startswith("/accounts/login/")


@pytest.mark.django_db
def test_it_serves_the_run_list_with_a_strict_csp(client, carol):
    client.force_login(carol)
    response = client.get("/runs/")
    assert response.status_code == 200
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


@pytest.mark.django_db
def test_a_case_content_hash_ignores_key_order():
    suite = Suite.objects.create(name="s")
    a = Case.objects.create(suite=suite, key="a", input={"x": 1, "y": 2}, expected="z")
    b = Case(suite=suite, key="b", input={"y": 2, "x": 1}, expected="z")
    b.save()
    assert a.content_hash == b.content_hash
    assert len(a.content_hash) == 64
