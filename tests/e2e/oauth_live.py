"""What the end-to-end tests of the SDKs' OAuth clients share: a live server whose access
tokens live a few seconds (so that a test sees a client refresh one), a person who may connect
clients, and that person at a real Chromium, signing in and allowing (or revoking) a client.

The clients send the person to the consent page with a loopback redirect URI, as native
apps do (RFC 8252): a small listener on 127.0.0.1 receives the browser coming back and hands
its query (code, state, iss) to the client.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.async_api import BrowserContext, Page, async_playwright, expect

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, screenshot_path
from tests.e2e.conftest import LiveServer, start_server

# How long an access token lives on the server of these tests: long enough for a client to
# sign in and make its calls, short enough that a test waits for one to expire.
TOKEN_SECONDS = 4
PERSON = "olive"
PASSWORD = "olive-correct-horse-battery"
# The scopes a 401 challenge asks for (mcp_endpoint/access/oauth_discovery.py, CHALLENGE_SCOPE).
CHALLENGE_SCOPES = ["tools:read", "tools:execute", "resources:read"]
# The tool a token with the challenge's scopes may not call: list_runs needs runs:read, which
# the person may give (they hold graphs.view_run). Calling it is the step-up.
STEP_UP_TOOL, STEP_UP_SCOPE = "list_runs", "runs:read"
MAKE_PERSON = f"""
from django.contrib.auth.models import Permission, User
person = User.objects.create_user({PERSON!r}, password={PASSWORD!r})
for app_label, codename in [("mcp_endpoint", "connect_oauth_clients"), ("graphs", "view_run")]:
    person.user_permissions.add(
        Permission.objects.get(content_type__app_label=app_label, codename=codename)
    )
"""


@contextmanager
def oauth_server(tmp: Path, **settings: str) -> Iterator[LiveServer]:
    """A live server with OAuth on (the default), tokens of TOKEN_SECONDS, the person, and
    `settings` (environment variables) besides. DEBUG=true: the sign-in and consent pages read
    their static files from the apps (a production start runs collectstatic first, which would
    write into the checkout)."""
    settings = {"OAUTH_ACCESS_TOKEN_SECONDS": str(TOKEN_SECONDS), "DEBUG": "true", **settings}
    with contextmanager(start_server)(tmp, [("shell", "-c", MAKE_PERSON)], **settings) as live:
        yield live


def require_chromium() -> None:
    """Fail in CI, skip elsewhere, when Chromium is not installed (as the browser tests do)."""
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"Chromium is not installed at {CHROMIUM}; .ci/run installs it with apt-get.")
    pytest.skip("Chromium is not installed: apt-get install chromium to run the OAuth tests.")


@dataclass(frozen=True)
class Consent:
    """What the consent page showed the person before they allowed the client: the client's
    name, the scopes, the resource, and all its words."""

    client: str
    scopes: list[str]
    resource: str
    text: str


class Listener:
    """The client's loopback listener (RFC 8252, 7.3), where the person's browser comes back
    with the answer to an authorization request: it keeps each query and tells the person
    they may close the tab."""

    def __init__(self) -> None:
        received: list[dict[str, str]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                address = urlsplit(self.path)
                if address.path != "/callback":  # the browser asking for a favicon
                    self.send_error(404)
                    return
                received.append(dict(parse_qsl(address.query)))
                body = b'<p id="returned">Signed in. You may close this tab.</p>'
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                """Quiet: the test says what went wrong."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.redirect_uri = f"http://127.0.0.1:{self.server.server_port}/callback"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@dataclass
class Person:
    """The person at the browser: signs in when asked, reads the consent page, allows. With
    `screenshots`, and SCREENSHOTS_DIR set, they save their first consent page
    (oauth-consent.png) and the Connected clients page before they revoke (oauth-connections.png),
    for docs/screenshots."""

    server: LiveServer
    context: BrowserContext
    listener: Listener
    screenshots: bool = False
    consents: list[Consent] = field(default_factory=list)
    sign_ins: int = 0

    @property
    def redirect_uri(self) -> str:
        """The redirect URI a client registers: its loopback listener's."""
        return self.listener.redirect_uri

    async def authorize(self, url: str) -> dict[str, str]:
        """Open the authorization `url` a client gave, sign in if asked, and allow what the
        consent page shows; the query the browser came back to the client's listener with (a
        code, state and iss; or the error, when the server refused before asking)."""
        await self.allow(url, back="#returned")
        return self.listener.received[-1]

    async def allow(self, url: str, back: str) -> None:
        """Open the authorization `url`, sign in if asked, allow what the consent page shows,
        and wait for the page the client's redirect URI answers (`back`, a selector)."""
        assert url.startswith(f"{self.server.url}/authorize?"), url
        page = await self.context.new_page()
        try:
            await page.goto(url)
            if urlsplit(page.url).path == "/oauth/sign-in":
                self.sign_ins += 1
                await page.fill("#id_username", PERSON)
                await page.fill("#id_password", PASSWORD)
                await page.click("button[type=submit]")
            # The consent page, the client's page (a refusal sent back at once), or the
            # consent page's own error (a client it cannot send back to).
            await page.locator(f"#allow, {back}, .error").first.wait_for()
            if await page.locator("#allow").count():
                if not self.consents:
                    await self.screenshot(page, "oauth-consent")
                self.consents.append(
                    Consent(
                        client=await page.inner_text("#client-name"),
                        scopes=await page.locator("#scopes code").all_inner_texts(),
                        resource=await page.inner_text("#resource"),
                        text=await page.inner_text("main"),
                    )
                )
                await page.click("#allow")
                await page.locator(f"{back}, .error").first.wait_for()
            assert await page.locator(back).count(), await page.inner_text("body")
        finally:
            await page.close()

    async def revoke(self, client: str) -> None:
        """Revoke `client` on the person's Connected clients page, as they would."""
        page = await self.context.new_page()
        try:
            await page.goto(f"{self.server.url}/oauth/connections")
            row = page.locator("#connections tbody tr", has_text=client)
            await row.wait_for()
            await self.screenshot(page, "oauth-connections")
            await row.get_by_role("button", name="Revoke").click()
            await expect(row).to_have_count(0)
        finally:
            await page.close()

    async def screenshot(self, page: Page, name: str) -> None:
        """Save the whole `page` as `name` (tests/browser/conftest.py's convention) if this
        person takes screenshots and SCREENSHOTS_DIR is set."""
        if self.screenshots and (path := screenshot_path(name)):
            await page.screenshot(path=str(path), full_page=True)


@asynccontextmanager
async def person_at_chromium(
    server: LiveServer, screenshots: bool = False
) -> AsyncIterator[Person]:
    """The person at a fresh Chromium (not signed in yet), and the client's listener, for one
    scenario; with `screenshots`, a person who saves the pages docs/screenshots shows.
    Playwright's async API, so that the browser runs in the scenario's own event loop beside
    the client."""
    listener = Listener()
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                context = await browser.new_context()
                context.set_default_timeout(10_000)
                yield Person(server, context, listener, screenshots)
            finally:
                await browser.close()
    finally:
        listener.close()
