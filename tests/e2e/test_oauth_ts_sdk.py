"""The official TypeScript SDK's OAuth client (its transports' `authProvider`) against a live
server, over Streamable HTTP (the 2025 session era; this SDK speaks no 2026-07-28) and the
legacy HTTP+SSE transport (2024-11-05), with the person consenting in a real Chromium:
discovery from the 401, registration (RFC 7591), the code flow with PKCE, the calls, what it
does on a 403 for a missing scope, a refresh when the token expires, and a revocation.

tests/peers/ts_oauth_client.mjs is the Node side; the browser is driven from here, on the
authorization URL the script hands over. Registration is dynamic: the SDK's Client ID Metadata
Document (`clientMetadataUrl`) needs an HTTPS URL the server can fetch from a public address,
which a test on 127.0.0.1 cannot offer; tests/mcp_endpoint covers those documents."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from mcp_endpoint.features.tools import TOOLS
from tests.e2e.conftest import LiveServer
from tests.e2e.oauth_live import (
    CHALLENGE_SCOPES,
    STEP_UP_SCOPE,
    STEP_UP_TOOL,
    TOKEN_SECONDS,
    Person,
    oauth_server,
    person_at_chromium,
    require_chromium,
)
from tests.e2e.test_mcp_client import run
from tests.peers import PEERS_HOME, npm_package_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

SCRIPT = Path(__file__).parents[1] / "peers" / "ts_oauth_client.mjs"
SDK = "@modelcontextprotocol/sdk"


@dataclass(frozen=True)
class Transport:
    """Where a transport connects, which request meets the 401 first, where its calls go and
    the status of a call's POST (the legacy transport's answers come on its stream)."""

    endpoint: str
    first: tuple[str, str]
    calls: str
    answered: int


TRANSPORTS = {
    "streamable_http": Transport("/mcp", ("POST", "/mcp"), "/mcp", 200),
    "sse": Transport("/sse", ("GET", "/sse"), "/messages", 202),
}

# Longest a command may take, the person's part included.
COMMAND_SECONDS = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    require_chromium()
    npm_package_dir(SDK)  # fails the test, saying how to install it, when it is missing
    with oauth_server(tmp_path_factory.mktemp("oauth-ts")) as live:
        yield live


@dataclass(frozen=True)
class Exchange:
    """One HTTP request the SDK made and its answer's status; at the token endpoint the grant,
    on a refusal the challenge's error."""

    method: str
    path: str
    status: int
    grant: str | None
    error: str | None


class TsClient:
    """The Node script, one command at a time; when the SDK needs the person, the person
    authorizes in the browser and the script is given what the browser came back with."""

    def __init__(self, process: Process, person: Person, log: Path) -> None:
        self.process = process
        self.person = person
        self.log = log
        self.lines = BufferedByteReceiveStream(process.stdout)
        self.exchanges: list[Exchange] = []

    async def do(self, command: str, **fields: Any) -> dict[str, Any]:
        """The script's answer to `command`: {"done": …} or {"failed": message}."""
        with anyio.fail_after(COMMAND_SECONDS):
            await self._send({"do": command, **fields})
            while True:
                try:
                    line = await self.lines.receive_until(b"\n", 1 << 20)
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    pytest.fail(f"The Node client stopped: {self.log.read_text()[-3000:]}")
                message = json.loads(line)
                self.exchanges.extend(Exchange(*entry) for entry in message.pop("http"))
                if "authorize" not in message:
                    return message
                await self._send(await self.person.authorize(message["authorize"]))

    async def done(self, command: str, **fields: Any) -> dict[str, Any]:
        """What `command` gave, failing the test if it failed."""
        answer = await self.do(command, **fields)
        assert "done" in answer, answer
        return answer["done"]

    def since(self, start: int) -> list[tuple[str, str, int, str | None, str | None]]:
        """The exchanges from the `start`th on, but the metadata the SDK fetches again each
        time it authorizes (this provider keeps no discovery state)."""
        return [
            (e.method, e.path, e.status, e.grant, e.error)
            for e in self.exchanges[start:]
            if not e.path.startswith("/.well-known/")
        ]

    async def _send(self, message: dict[str, Any]) -> None:
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")


@asynccontextmanager
async def ts_client(
    server: LiveServer, person: Person, transport: str, name: str, log: Path
) -> AsyncIterator[TsClient]:
    """The script for `transport` as the client named `name`; its stderr goes to `log`."""
    node = shutil.which("node")
    assert node, "Node.js is not installed (the TypeScript client runs on it)"
    command = [node, str(SCRIPT), server.url, transport, person.redirect_uri, name]
    env = {**server.env, "MCP_PEERS_HOME": str(PEERS_HOME)}
    with log.open("wb") as stderr:
        process = await anyio.open_process(command, env=env, stderr=stderr)
        try:
            client = TsClient(process, person, log)
            yield client
            assert await client.do("close") == {"done": {}}
            with anyio.fail_after(10):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_typescript_sdk_signs_in_calls_refreshes_and_does_not_step_up(
    server, transport, tmp_path
):
    name = f"TypeScript SDK ({transport})"
    path = TRANSPORTS[transport].endpoint

    async def scenario():
        async with (
            person_at_chromium(server) as person,
            ts_client(server, person, transport, name, tmp_path / "node.log") as client,
        ):
            # Connecting: the 401 names the metadata; the SDK discovers, registers, and hands
            # the authorization URL over; the person signs in and allows; it finishes.
            connected = await client.done("connect")
            assert connected["server"] == "switchyard"
            flow = [(e.method, e.path, e.status) for e in client.exchanges]
            assert flow[0] == (*TRANSPORTS[transport].first, 401)
            assert ("GET", f"/.well-known/oauth-protected-resource{path}", 200) in flow
            assert ("GET", "/.well-known/oauth-authorization-server", 200) in flow
            assert ("POST", "/register", 201) in flow
            assert ("POST", "/token", 200, "authorization_code", None) in client.since(0)
            [first] = person.consents
            assert first.client == name
            assert first.scopes == CHALLENGE_SCOPES  # the challenge's, not all the server has
            assert first.resource == f"{server.url}{path}"

            listed = await client.done("list")
            assert listed["tools"] == [
                name for name, tool in TOOLS.items() if tool.scope in CHALLENGE_SCOPES
            ]
            types = await client.done("call", name="get_node_types")
            assert types["isError"] is False
            assert len(types["structuredContent"]) == 8

            # A tool whose scope the token lacks: the SDK does not get the person's consent
            # for the wider scope (each branch says what it does instead); the call fails.
            held = await client.done("tokens")
            start = len(client.exchanges)
            refused = await client.do("call", name=STEP_UP_TOOL)
            assert "failed" in refused, refused
            assert person.consents == [first]
            if transport == "streamable_http":
                # It "steps up" by refreshing the token it has (a refresh keeps the scopes),
                # meets the same 403, and gives up.
                assert "403 after trying upscoping" in refused["failed"]
                assert client.since(start) == [
                    ("POST", "/mcp", 403, None, "insufficient_scope"),
                    ("POST", "/token", 200, "refresh_token", None),
                    ("POST", "/mcp", 403, None, "insufficient_scope"),
                ]
            else:
                # The legacy transport's answers come on its stream: the refusal is the call's
                # JSON-RPC error there, with no challenge to step up from.
                assert f"needs the scope {STEP_UP_SCOPE}" in refused["failed"]
                assert client.since(start) == [("POST", "/messages", 202, None, None)]
            assert (await client.done("tokens"))["scope"] == held["scope"]

            # Refresh: the expired token's 401 makes the SDK refresh it, without the person,
            # and send the call again.
            before = await client.done("tokens")
            await anyio.sleep(TOKEN_SECONDS + 0.5)
            start = len(client.exchanges)
            types = await client.done("call", name="get_node_types")
            assert types["isError"] is False
            calls = TRANSPORTS[transport].calls
            assert client.since(start) == [
                ("POST", calls, 401, None, "invalid_token"),
                ("POST", "/token", 200, "refresh_token", None),
                ("POST", calls, TRANSPORTS[transport].answered, None, None),
            ]
            after = await client.done("tokens")
            assert after["access"] != before["access"]
            assert after["refresh"] != before["refresh"]
            assert after["scope"] == before["scope"]
            assert person.consents == [first]

    run(scenario)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_after_a_revocation_the_typescript_sdk_is_refused_and_asks_the_person_again(
    server, transport, tmp_path
):
    name = f"TypeScript SDK, revoked ({transport})"
    calls = TRANSPORTS[transport].calls

    async def scenario():
        async with (
            person_at_chromium(server) as person,
            ts_client(server, person, transport, name, tmp_path / "node.log") as client,
        ):
            await client.done("connect")
            assert (await client.done("call", name="get_node_types"))["isError"] is False
            revoked = await client.done("tokens")

            # The app revokes its refresh token (RFC 7009), which revokes the access token
            # with it: the next call is refused (401), and so is the refresh the SDK tries.
            assert await client.done("revoke") == {"status": 200}
            start = len(client.exchanges)
            answer = await client.do("call", name="get_node_types")
            assert client.since(start)[:2] == [
                ("POST", calls, 401, None, "invalid_token"),
                ("POST", "/token", 400, "refresh_token", None),
            ]
            # Then the person is asked again, for the scopes the challenge names; they allow,
            # and the call goes through.
            assert len(person.consents) == 2
            assert person.consents[1].scopes == CHALLENGE_SCOPES
            assert answer.get("done", {}).get("isError") is False, answer
            assert (await client.done("tokens"))["access"] != revoked["access"]

    run(scenario)
