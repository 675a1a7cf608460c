"""Address allow-lists against a live uvicorn (issue 25, item 16): uvicorn takes a client's
address from `X-Forwarded-For` when the peer is 127.0.0.1 unless told otherwise, so a caller
on the host wrote itself into METRICS_ALLOWED_ADDRESSES and MCP_INTERNAL_NETWORKS. The
header counts only when the operator names the proxy that writes it (FORWARDED_ALLOW_IPS:
tests/mcp_endpoint/test_client_addresses.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import LiveServer, start_server

pytestmark = pytest.mark.timeout(120)

ALLOWED = "10.0.0.0/8"
FORGED = {"X-Forwarded-For": "10.1.2.3"}
INVOKE = {"name": "get_node_types", "arguments": {}}


@pytest.fixture(scope="module")
def no_proxy(tmp_path_factory) -> Iterator[LiveServer]:
    """uvicorn as the tests and the old README started it: no `--forwarded-allow-ips`."""
    yield from start_server(
        tmp_path_factory.mktemp("no-proxy"),
        METRICS_ALLOWED_ADDRESSES=ALLOWED,
        MCP_INTERNAL_NETWORKS=ALLOWED,
    )


def _status(url: str, headers: dict[str, str], body: dict | None = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as refused:
        return refused.code


def test_a_forged_forwarded_address_does_not_open_the_metrics(no_proxy):
    assert _status(f"{no_proxy.url}/metrics", {}) == 401
    assert _status(f"{no_proxy.url}/metrics", FORGED) == 401


def test_a_forged_forwarded_address_does_not_open_the_internal_invoke(no_proxy):
    url = f"{no_proxy.url}/api/v1/mcp/invoke/internal"

    assert _status(url, {}, INVOKE) == 403
    assert _status(url, FORGED, INVOKE) == 403
