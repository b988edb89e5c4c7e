import pytest
from django.core.management import call_command

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


def test_production_collectstatic_succeeds_with_the_manifest_storage(tmp_path, settings):
    """The production storage (hashed names, compressed) rewrites every url() and source
    map reference; a vendored file pointing at a missing .map used to fail here."""

    settings.STATIC_ROOT = tmp_path
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    call_command("collectstatic", "--noinput", verbosity=0)
    assert (tmp_path / "staticfiles.json").is_file()
    assert list(tmp_path.glob("vendor/chart-4.5.1.umd.min.*.js"))
