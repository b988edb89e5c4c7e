"""Every page: no markup bypass anywhere (fault I1), and the 403 page of an outsider."""

from __future__ import annotations

import re

import pytest

from tests.conftest import PRODUCTION_PACKAGES, PROJECT_DIR

# No markup bypass anywhere ------------------------------------------------------------------

UNSAFE = re.compile(r"\|\s*safe\b|mark_safe|autoescape\s+off|\|\s*safeseq\b")
# The one reviewed exception, with the test that holds it to escaping every user text:
# the grid of runs writes up to 20,000 cells in one pass (a template per cell was most of the
# page's time); case keys and tags go through html.escape, every other value is a number or a
# fixed string (tests/evals/test_grid.py::test_case_keys_and_tags_are_escaped_in_the_grid).
REVIEWED = {"evals/templatetags/grid.py"}


def test_no_template_or_module_turns_off_escaping():
    """Fault I1: untrusted text reaches HTML only through autoescaping."""
    files = [
        *PROJECT_DIR.glob("templates/**/*.html"),
        *[p for app in PRODUCTION_PACKAGES for p in (PROJECT_DIR / app).rglob("*.py")],
    ]
    assert len(files) > 10
    offenders = [
        str(p.relative_to(PROJECT_DIR))
        for p in files
        if UNSAFE.search(p.read_text(encoding="utf-8"))
    ]
    assert sorted(set(offenders) - REVIEWED) == []


@pytest.mark.django_db
def test_an_outsider_gets_a_403_page_with_the_layout_and_a_way_out(client, mallory):
    client.force_login(mallory)
    response = client.get("/runs/")
    body = response.content.decode()
    assert response.status_code == 403
    assert "Not allowed" in body and "Log out" in body
