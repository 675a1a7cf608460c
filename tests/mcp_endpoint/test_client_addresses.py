"""Which client address the allow-lists read (issue 25, item 16): the request's own, or one
a proxy the operator named (FORWARDED_ALLOW_IPS) forwarded, never one any sender wrote in
X-Forwarded-For. The live server's side: tests/e2e/test_forwarded_addresses.py."""

from __future__ import annotations

import pytest

METRICS = "/metrics"
INTERNAL = "/api/v1/mcp/tools/internal"
FORWARDED = {"X-Forwarded-For": "10.1.2.3"}


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "refused"), [(METRICS, 401), (INTERNAL, 403)])
def test_an_address_from_the_forwarded_header_counts_only_behind_a_named_proxy(
    client, settings, path, refused
):
    settings.METRICS_ALLOWED_ADDRESSES = ["10.0.0.0/8"]
    settings.MCP_INTERNAL_NETWORKS = ["10.0.0.0/8"]
    settings.MCP_INTERNAL_TOKEN = ""

    # As uvicorn makes it by default: the address taken from the header of a peer on
    # 127.0.0.1, whoever wrote it.
    assert client.get(path, REMOTE_ADDR="10.1.2.3", headers=FORWARDED).status_code == refused
    # The same address without the header is the peer's own.
    assert client.get(path, REMOTE_ADDR="10.1.2.3").status_code == 200
    # The operator named the proxy that writes the header: uvicorn trusts only it.
    settings.FORWARDED_ALLOW_IPS = "127.0.0.1"
    assert client.get(path, REMOTE_ADDR="10.1.2.3", headers=FORWARDED).status_code == 200
    assert client.get(path, REMOTE_ADDR="192.168.1.1", headers=FORWARDED).status_code == refused
