"""On a live uvicorn: what the official `mcp` client and an OAuth-minded client meet when a key
is missing, wrong or lacks a scope, and at the OAuth discovery URLs of a server whose operator
turned OAuth off (tests/e2e/test_oauth_*_sdk.py sign in where it is on, the default)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation

from tests.e2e.conftest import LiveServer, start_server
from tests.e2e.test_mcp_client import run
from tests.mcp_endpoint.test_auth_challenges import CHALLENGE
from tests.mcp_endpoint.test_oauth_absent import OAUTH_WORDS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def keys_only(tmp_path_factory) -> Iterator[LiveServer]:
    """A live server started with OAUTH_ENABLED=false, as an operator who wants API keys alone
    would start it."""
    tmp = tmp_path_factory.mktemp("keys-only")
    with contextmanager(start_server)(tmp, OAUTH_ENABLED="false") as live:
        yield live


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_tool_call_without_its_scope_is_a_403_challenge_naming_the_scope(live_mcp, mode):
    """The official client, with a key holding tools:read alone, in both eras: the call is
    refused, and the HTTP answer it got is the 403 a client could step up from."""
    refusals: list[httpx2.Response] = []

    async def note(response: httpx2.Response) -> None:
        if response.status_code == 403:
            refusals.append(response)

    async def scenario():
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {live_mcp.read_only_key}"},
                timeout=10,
                event_hooks={"response": [note]},
            ) as http,
            Client(
                streamable_http_client(f"{live_mcp.url}/mcp", http_client=http),
                mode=mode,
                client_info=Implementation(name="switchyard-tests", version="1"),
            ) as client,
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("get_node_types", {})
            assert "tools:execute" in str(refused.value)

    run(scenario)
    assert len(refusals) == 1
    header = refusals[0].headers["www-authenticate"]
    assert CHALLENGE.fullmatch(header), header
    assert 'error="insufficient_scope"' in header
    assert 'scope="tools:execute"' in header


def test_with_oauth_off_an_oauth_client_is_told_this_server_takes_api_keys(keys_only):
    """What mcp-remote or the Inspector without a key fetch, in the order they fetch it."""

    async def scenario():
        async with httpx2.AsyncClient(timeout=10) as http:
            started = await http.post(f"{keys_only.url}/mcp", json={})
            assert started.status_code == 401
            assert started.headers["www-authenticate"] == 'Bearer realm="switchyard"'
            wrong = await http.post(
                f"{keys_only.url}/mcp", json={}, headers={"Authorization": "Bearer sy_x_y"}
            )
            assert wrong.status_code == 401
            assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
            for path in (
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-authorization-server",
                "/.well-known/openid-configuration",
            ):
                found = await http.get(f"{keys_only.url}{path}")
                assert found.status_code == 404
                assert found.headers["content-type"] == "application/json"
                for words in OAUTH_WORDS:
                    assert words in found.json()["error_description"]
            registered = await http.post(
                f"{keys_only.url}/register", json={"redirect_uris": ["http://127.0.0.1:1/cb"]}
            )
            assert registered.status_code == 404
            assert registered.json()["error"] == "oauth_not_offered"
            unknown = await http.get(f"{keys_only.url}/sse/x")
            assert unknown.status_code == 404
            assert unknown.headers["content-type"] == "application/json"

    run(scenario)
