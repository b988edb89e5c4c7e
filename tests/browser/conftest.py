"""Browser tests: a real Chromium (Debian's /usr/bin/chromium) driven by Playwright's sync API
against pytest-django's live server. ``browser_page`` is the page fixture; ``log_in`` signs
a user of the cast in.

Where /usr/bin/chromium is missing the tests skip with the reason, except under CI=true,
where they fail: CI must exercise the browser.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.db import connections
from playwright.sync_api import sync_playwright

from tests.conftest import PASSWORD

# Playwright's sync API runs an event loop in this thread; Django's ORM refuses to run inside
# one unless told it is safe (the test drives the browser and the ORM in turn, never at once).
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HOSTILE_OUTPUT = "<img src=x onerror=alert(1)>"
HOSTILE_RUN_NAME = "<b onclick=alert(4)>R4</b>"
INJECTED = "img[onerror], b[onclick], svg, script:not([src])"
TIMEOUT_MS = 15_000


def _chromium_required() -> None:
    if not CHROMIUM.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing under CI: install Debian's chromium")
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium to run browser tests")


def _watched(page):
    """``page`` recording its dialogs (dismissed, or accepted while ``page.accept_dialogs``
    is true), console errors and page errors."""
    page.set_default_timeout(TIMEOUT_MS)
    page.dialogs, page.console_errors = [], []
    page.accept_dialogs = False

    def on_dialog(dialog):
        page.dialogs.append(dialog.message)
        if page.accept_dialogs:
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.on("pageerror", lambda exc: page.console_errors.append(str(exc)))
    return page


@pytest.fixture
def browser_page():
    """A fresh Chromium page; records dialogs, console errors and page errors."""
    _chromium_required()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield _watched(browser.new_page())
        finally:
            browser.close()
            # Playwright's sync API runs in greenlets, each with its own context, so a
            # connection opened here is not the one pytest-django closes: close it now.

            connections.close_all()


@pytest.fixture
def browser_pages():
    """A factory of pages, each in its own browser context (its own cookies: two tabs of
    one user, or two users), all in one Chromium; each page watched like ``browser_page``."""
    _chromium_required()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield lambda: _watched(browser.new_context().new_page())
        finally:
            browser.close()
            connections.close_all()


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/$"))
