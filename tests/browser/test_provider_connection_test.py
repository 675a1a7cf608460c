"""Test connection on a provider's page, in a real browser: the echo peer's tools and latency,
and a server that hangs, cut off while the page stays usable."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from nodespecs.downstream import client
from tests.nodespecs.providers_helpers import echo_provider, http_provider
from tests.peers.not_mcp import silent_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture(autouse=True)
def _servers():
    yield
    client.close_all()


def test_the_echo_peers_tools_server_and_latency_are_shown(signed_in, live_server, screenshot):
    provider = echo_provider()
    page = signed_in
    page.goto(f"{live_server.url}/admin/nodespecs/provider/{provider.pk}/change/")

    page.get_by_role("button", name="Test connection").click()

    expect(page.locator(".verdict.ok")).to_contain_text(
        re.compile(r"Connected: 6 tools listed in \d+ ms\.")
    )
    expect(page.locator("#server-name")).to_have_text("echo")
    expect(page.locator("#latency")).to_contain_text(re.compile(r"\d+ ms to connect"))
    names = page.locator("#tools tbody td:first-child").all_inner_texts()
    assert names == ["echo", "add", "sleep", "pid", "crash", "fail"]
    screenshot("admin-provider-connection-test")

    page.get_by_role("link", name="Back to echo").click()
    expect(page).to_have_url(re.compile(rf"/provider/{provider.pk}/change/$"))


def test_a_server_that_hangs_is_cut_off_and_the_page_answers(signed_in, live_server):
    page = signed_in
    with silent_server() as port:
        provider = http_provider(f"http://127.0.0.1:{port}/mcp", timeout_seconds=2)
        page.goto(f"{live_server.url}/admin/nodespecs/provider/{provider.pk}/change/")
        started = time.monotonic()
        page.get_by_role("button", name="Test connection").click()
        expect(page.locator(".verdict.failed")).to_have_text("Timed out.")
        assert time.monotonic() - started < 6

    expect(page.locator("#problem")).to_contain_text("did not answer within 2 s")
    page.get_by_role("button", name="Test again").is_visible()
