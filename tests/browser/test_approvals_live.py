"""Issue 27, must show (a), end to end: the official MCP client calls a workflow on a real
server (uvicorn, in each protocol era) and waits, while a reviewer signs in to the Approvals
page in chromium and clicks Approve; the client's call then answers the run's result, along
the approved route, with the reviewer named as who decided."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD
from tests.e2e.conftest import LiveServer, _database_url, start_server
from tests.e2e.test_approvals import connect

pytestmark = pytest.mark.timeout(180)

FILES = Path(__file__).parent.parent / "graphs" / "files"
ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]
MAKE_REVIEWER = f"""
from django.contrib.auth.models import Permission, User
user = User.objects.create_user("rita", password={PASSWORD!r}, is_staff=True)
user.user_permissions.add(Permission.objects.get(codename="decide_approval"))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("approvals_browser")
    database = _database_url(tmp, "approvals_browser")
    # DEBUG=true: the admin's sign-in page reads its static files from the apps (a production
    # start runs collectstatic first, which would write into the checkout).
    commands = [("import_graph", str(FILES / "approvals.yaml")), ("shell", "-c", MAKE_REVIEWER)]
    with contextmanager(start_server)(tmp, commands, DATABASE_URL=database, DEBUG="true") as live:
        yield live


def _call(server: LiveServer, mode: str, customer: str) -> tuple[str, object]:
    async def scenario():
        async with connect(server, mode) as client:
            result = await client.call_tool("refund", {"amount": 70, "customer": customer})
            return client.protocol_version, result

    return anyio.run(scenario)


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_a_reviewer_clicks_approve_while_the_official_client_waits(server, page, mode, version):
    customer = f"browser-{mode}"
    with ThreadPoolExecutor(max_workers=1) as pool:
        calling = pool.submit(_call, server, mode, customer)
        page.goto(f"{server.url}/approvals/")
        page.fill("#id_username", "rita")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        expect(page).to_have_url(f"{server.url}/approvals/")
        card = page.locator("section.approval", has_text=f"Refund 70 to {customer}?")
        for _ in range(50):  # the call's run reaches its approval node within moments
            if card.count():
                break
            page.wait_for_timeout(200)
            page.reload()
        card.locator("textarea[name=field-reason]").fill("receipt checked")
        card.locator("textarea[name=comment]").fill(f"approved in the browser ({mode})")
        card.locator("button.approve").click()
        expect(page.locator(".messages")).to_contain_text("approved by rita (user)")
        protocol, result = calling.result(timeout=60)
    assert protocol == version
    assert not result.is_error, result
    assert json.loads(result.content[0].text) == {
        "refunded": 70,
        "by": "rita",
        "reason": "receipt checked",
    }
    run_id = result.meta["io.switchyard/runId"]
    page.goto(f"{server.url}/runs/{run_id}/")
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    expect(page.locator("#run-waits .comment")).to_have_text(f"approved in the browser ({mode})")
