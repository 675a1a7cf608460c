"""The official `mcp` Python SDK's OAuth client (`OAuthClientProvider`) against a live server,
in both protocol eras, with the person consenting in a real Chromium: discovery from the 401,
registration (RFC 7591), the code flow with PKCE, the calls, a step-up for a scope the token
lacks, a refresh when the token expires, and the person revoking the client.

The other way to register: the SDK names itself by the HTTPS URL of its Client ID Metadata
Document (`client_metadata_url=`), which the server fetches instead of taking a registration.
The document is served over HTTPS from 127.0.0.1 (tests/oauth_documents.py); the server trusts
its throwaway CA through SSL_CERT_FILE and may reach it because EGRESS_ALLOWED_NETWORKS opens
127.0.0.1/32, as an operator would open a private network. Neither changes what the other tests
here meet."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.types import Implementation

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
from tests.oauth_documents import DocumentServer, serving_documents

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]
ERAS = [("auto", "2026-07-28"), ("legacy", "2025-11-25")]
# The tools a token with the challenge's scopes lists.
CHALLENGE_TOOLS = [name for name, tool in TOOLS.items() if tool.scope in CHALLENGE_SCOPES]


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> Iterator[DocumentServer]:
    """Where the clients' metadata documents are, over HTTPS on 127.0.0.1."""
    with serving_documents(tmp_path_factory.mktemp("documents")) as documents:
        yield documents


@pytest.fixture(scope="module")
def server(tmp_path_factory, documents) -> Iterator[LiveServer]:
    require_chromium()
    exemption = {"EGRESS_ALLOWED_NETWORKS": "127.0.0.1/32", "SSL_CERT_FILE": str(documents.ca)}
    with oauth_server(tmp_path_factory.mktemp("oauth-python"), **exemption) as live:
        yield live


@dataclass
class Storage:
    """The client's token storage, in memory (an app keeps it on disk)."""

    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@dataclass(frozen=True)
class Exchange:
    """One HTTP request the client made and its answer's status; at the token endpoint the
    grant, on a refusal the challenge's error."""

    method: str
    path: str
    status: int
    grant: str | None = None
    error: str | None = None


@dataclass
class Session:
    """A connected client, what it stores, and every HTTP exchange it made (its own requests
    and those of its OAuth flow)."""

    client: Client
    storage: Storage
    exchanges: list[Exchange] = field(default_factory=list)

    def paths(self, start: int = 0) -> list[tuple[str, str, int]]:
        return [(e.method, e.path, e.status) for e in self.exchanges[start:]]


@asynccontextmanager
async def connected(
    server: LiveServer,
    person: Person,
    mode: str,
    name: str,
    client_metadata_url: str | None = None,
) -> AsyncIterator[Session]:
    """The SDK's client named `name`, connecting to /mcp with OAuth (registering, or known by
    its metadata document at `client_metadata_url`): its redirect handler has the person open
    the authorization URL and allow; its callback handler returns what the browser brought back
    to the loopback listener."""
    returned: dict[str, str] = {}

    async def redirect(url: str) -> None:
        returned.clear()
        returned.update(await person.authorize(url))

    async def callback() -> AuthorizationCodeResult:
        assert "code" in returned, f"the server sent the client back without a code: {returned}"
        return AuthorizationCodeResult(
            code=returned["code"], state=returned.get("state"), iss=returned.get("iss")
        )

    storage = Storage()
    provider = OAuthClientProvider(
        server_url=f"{server.url}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=name,
            redirect_uris=[person.redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
        client_metadata_url=client_metadata_url,
    )
    exchanges: list[Exchange] = []

    async def note(response: httpx2.Response) -> None:
        request = response.request
        form = parse_qs(request.content.decode()) if request.url.path == "/token" else {}
        challenge = response.headers.get("www-authenticate", "")
        error = re.search(r'error="([^"]*)"', challenge)
        grant = form.get("grant_type", [None])[0]
        exchanges.append(
            Exchange(
                request.method,
                request.url.path,
                response.status_code,
                grant,
                error[1] if error else None,
            )
        )

    async with (
        httpx2.AsyncClient(auth=provider, timeout=10, event_hooks={"response": [note]}) as http,
        Client(
            streamable_http_client(f"{server.url}/mcp", http_client=http),
            mode=mode,
            client_info=Implementation(name="switchyard-oauth-tests", version="1"),
        ) as client,
    ):  # fmt: skip
        yield Session(client, storage, exchanges)


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_the_python_sdk_signs_in_calls_steps_up_and_refreshes(server, mode, version):
    name = f"Python SDK ({mode})"

    async def scenario():
        async with (
            person_at_chromium(server) as person,
            connected(server, person, mode, name) as session,
        ):
            client, storage = session.client, session.storage
            # Connecting: the first request's 401 names the metadata; the SDK discovers,
            # registers, has the person sign in and allow, and exchanges the code.
            assert client.protocol_version == version
            flow = session.paths()
            assert flow[0][1:] == ("/mcp", 401)
            assert flow[1:5] == [
                ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
                ("GET", "/.well-known/oauth-authorization-server", 200),
                ("POST", "/register", 201),
                ("POST", "/token", 200),
            ]
            assert session.exchanges[4].grant == "authorization_code"
            [first] = person.consents
            assert first.client == name
            assert first.scopes == CHALLENGE_SCOPES  # the challenge's, not all the server has
            assert first.resource == f"{server.url}/mcp"
            assert person.sign_ins == 1

            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == CHALLENGE_TOOLS
            types = await client.call_tool("get_node_types", {})
            assert not types.is_error
            assert len(types.structured_content) == 8

            # Step-up: a tool whose scope the token lacks is a 403 naming that scope; the SDK
            # asks the person again for what it had plus that scope, then retries the call.
            start = len(session.exchanges)
            runs = await client.call_tool(STEP_UP_TOOL, {})
            assert not runs.is_error, runs.content
            refused = session.exchanges[start]
            assert (refused.path, refused.status, refused.error) == (
                "/mcp",
                403,
                "insufficient_scope",
            )
            assert len(person.consents) == 2
            assert person.consents[1].scopes == [*CHALLENGE_SCOPES, STEP_UP_SCOPE]
            assert storage.tokens.scope.split() == [*CHALLENGE_SCOPES, STEP_UP_SCOPE]
            assert person.sign_ins == 1  # still signed in: asked only to allow

            # Refresh: once the token has expired by the SDK's clock, it refreshes before the
            # next call, without the person; the refresh token rotates.
            before = storage.tokens
            await anyio.sleep(TOKEN_SECONDS + 0.5)
            start = len(session.exchanges)
            types = await client.call_tool("get_node_types", {})
            assert not types.is_error
            assert session.paths(start)[0] == ("POST", "/token", 200)
            assert session.exchanges[start].grant == "refresh_token"
            assert storage.tokens.access_token != before.access_token
            assert storage.tokens.refresh_token != before.refresh_token
            assert storage.tokens.scope == before.scope
            assert len(person.consents) == 2

    run(scenario)


@pytest.mark.parametrize("mode", [mode for mode, _ in ERAS])
def test_after_a_revocation_the_python_sdk_is_refused_and_asks_the_person_again(server, mode):
    name = f"Python SDK, revoked ({mode})"

    async def scenario():
        async with (
            person_at_chromium(server, screenshots=mode == "auto") as person,
            connected(server, person, mode, name) as session,
        ):
            types = await session.client.call_tool("get_node_types", {})
            assert not types.is_error
            revoked = session.storage.tokens

            # The person revokes the client on their page: its next call is refused, 401
            # invalid_token (the SDK's clock still holds the token valid, so it does not try to
            # refresh first; had it expired by then, the refresh would be refused: 400).
            await person.revoke(name)
            start = len(session.exchanges)
            with anyio.fail_after(30):
                types = await session.client.call_tool("get_node_types", {})
            cut_off = session.exchanges[start]
            assert (cut_off.path, cut_off.status, cut_off.error) in (
                ("/mcp", 401, "invalid_token"),
                ("/token", 400, None),
            )
            # The SDK's only way on is the person: a new authorization, for the scopes the
            # challenge names, which the person allows; then the call goes through.
            assert len(person.consents) == 2
            assert person.consents[1].scopes == CHALLENGE_SCOPES
            assert not types.is_error
            assert session.storage.tokens.access_token != revoked.access_token

    run(scenario)


@pytest.mark.parametrize(("mode", "version"), ERAS)
def test_the_python_sdk_signs_in_with_its_metadata_document_instead_of_registering(
    server, documents, mode, version
):
    path = f"/clients/python-sdk-{mode}.json"

    async def scenario():
        async with person_at_chromium(server) as person:
            # The document lists the listener's redirect URI and the name the person sees; the
            # name the SDK holds itself is another, which the server never receives.
            url = documents.document(
                path,
                client_name=f"Python SDK by its document ({mode})",
                redirect_uris=[person.redirect_uri],
            )
            async with connected(server, person, mode, "A name never sent", url) as session:
                client = session.client
                assert client.protocol_version == version
                flow = session.paths()
                assert flow[0][1:] == ("/mcp", 401)
                assert flow[1:4] == [
                    ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
                    ("GET", "/.well-known/oauth-authorization-server", 200),
                    ("POST", "/token", 200),
                ]
                assert session.storage.client.client_id == url
                assert documents.hits[path] == 1  # at /authorize; /token used what it kept

                [consent] = person.consents
                assert consent.client == f"Python SDK by its document ({mode})"
                assert f"identified by its metadata document at {url}" in consent.text
                assert consent.scopes == CHALLENGE_SCOPES

                tools = await client.list_tools()
                assert [tool.name for tool in tools.tools] == CHALLENGE_TOOLS
                types = await client.call_tool("get_node_types", {})
                assert not types.is_error
                assert len(types.structured_content) == 8
                assert "/register" not in {exchange.path for exchange in session.exchanges}
                assert documents.hits[path] == 1

    run(scenario)
