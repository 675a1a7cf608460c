"""A real headless Chromium (Debian's package) driven by Playwright against a live server."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
# Chromium's own background traffic is refused on a closed network; these keep it quiet.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module: Playwright's sync API runs an event loop in this thread
    while it is open, which would stop the Django test client from calling async views."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(
                f"Chromium is not installed at {CHROMIUM}; .ci/run installs it with apt-get."
            )
        pytest.skip("Chromium is not installed: apt-get install chromium to run the browser tests.")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls
    # (fixtures, assertions) are still plain synchronous code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def screenshot_path(name: str) -> Path | None:
    """Where the screenshot `name` goes when SCREENSHOTS_DIR is set (see
    docs/screenshots/README.md), its folder made; None when it is not, and none is taken."""
    directory = os.environ.get("SCREENSHOTS_DIR")
    if not directory:
        return None
    Path(directory).mkdir(parents=True, exist_ok=True)
    return Path(directory) / f"{name}.png"


@pytest.fixture
def screenshot(page):
    """Save a screenshot of the whole page when SCREENSHOTS_DIR is set."""

    def take(name: str) -> None:
        if path := screenshot_path(name):
            page.screenshot(path=str(path), full_page=True)

    return take


PASSWORD = "correct-horse-battery"


@pytest.fixture
def signed_in(page, live_server, django_user_model):
    """The page, signed in to the admin as a superuser named `author`."""
    django_user_model.objects.create_superuser("author", password=PASSWORD)
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "author")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    return page
