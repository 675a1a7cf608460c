"""The lean ASGI app's choice between the event loop and its worker threads."""

from __future__ import annotations

import json
import time

from mcp_endpoint import asgi
from nodespecs import registry, snapshots
from tests.mcp_endpoint.helpers import CAPABILITIES_KEY, MODERN, VERSION_KEY


def tools_list_arguments(key: str) -> dict:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}}},
        }
    ).encode()
    headers = {
        "host": "localhost",
        "content-type": "application/json",
        "accept": "application/json",
        "authorization": f"Bearer {key}",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/list",
    }
    return {
        "method": "POST",
        "headers": headers,
        "raw_headers": list(headers.items()),
        "body": body,
        "client_address": "127.0.0.1",
    }


def test_a_request_on_a_worker_thread_brings_the_registry_up_to_date(key, monkeypatch):
    """tools/list never reads the registry; once one such request has run on a thread because
    the registry's check was due, the next ones may run in the event loop again."""
    registry.current_registry()
    # Due for needs_database(), not yet for current_registry(): the thread must check anyway.
    due = snapshots.TABLE_CHECK_SECONDS - snapshots.CHECK_MARGIN_SECONDS / 2
    monkeypatch.setattr(registry._snapshot, "_checked_at", time.monotonic() - due)
    assert registry.needs_database()
    assert asgi._work(tools_list_arguments(key)).status == 200
    assert not registry.needs_database()


def test_the_host_check_follows_allowed_hosts(key, settings):
    """The ASGI path checks Host itself (Django does not see the request)."""
    arguments = tools_list_arguments(key)
    arguments["headers"]["host"] = "evil.example"
    assert asgi._work(arguments).status == 400
    settings.ALLOWED_HOSTS = ["evil.example"]
    assert asgi._work(arguments).status == 200
    settings.ALLOWED_HOSTS = ["localhost"]
    assert asgi._work(arguments).status == 400
