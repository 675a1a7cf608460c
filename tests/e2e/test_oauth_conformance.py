"""The MCP conformance suite's authorization-server scenarios against the live server: its
RFC 8414 metadata, and the authorization code grant with PKCE S256 and a resource, the person
consenting in Chromium (docs/conformance.md)."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request

import pytest

from tests.e2e.conftest import _free_port
from tests.e2e.oauth_live import oauth_server, person_at_chromium, require_chromium
from tests.e2e.test_conformance import SCRIPT
from tests.e2e.test_mcp_client import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

# The page the suite's callback listener answers the browser with.
SUITE_CALLBACK_PAGE = 'body:has-text("You can close this page")'


def register(server_url: str, redirect_uri: str) -> str:
    """A public client registered by RFC 7591, as the suite's settings expect one; its id."""
    body = {
        "client_name": "MCP conformance suite",
        "redirect_uris": [redirect_uri],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
    }
    request = urllib.request.Request(
        f"{server_url}/register",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)["client_id"]


def test_the_authorization_server_scenarios_pass(tmp_path_factory, tmp_path):
    require_chromium()
    with oauth_server(tmp_path_factory.mktemp("oauth-conformance")) as server:
        port = _free_port()
        client_id = register(server.url, f"http://127.0.0.1:{port}/callback")
        suite = subprocess.Popen(
            ["bash", str(SCRIPT), server.url, "0.2.0", "authorization", "--",
             "--client-id", client_id, "--resource", f"{server.url}/mcp", "-p", str(port)],
            env={**os.environ, "CONFORMANCE_NO_INSTALL": "1", "CONFORMANCE_OUT": str(tmp_path)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        printed: list[str] = []
        try:
            url = _authorization_url(suite, printed, f"{server.url}/authorize?")
            if url is None and "not installed" in "".join(printed):
                message = f"conformance suite not installed: {''.join(printed)[-500:]}"
                if os.environ.get("CI"):
                    pytest.fail(message + " (.ci/run installs it)")
                pytest.skip(message + "; run: bash .ci/run-conformance.sh --install 0.1.16 0.2.0")
            assert url is not None, "".join(printed)

            async def consent() -> None:
                async with person_at_chromium(server) as person:
                    await person.allow(url, back=SUITE_CALLBACK_PAGE)
                    assert person.consents[0].client == "MCP conformance suite"

            run(consent)
            printed.extend(suite.stdout)  # type: ignore[arg-type]
            assert suite.wait(timeout=60) == 0, "".join(printed)[-3000:]
        finally:
            suite.kill()
            suite.wait(timeout=10)
            suite.stdout.close()  # type: ignore[union-attr]
    output = "".join(printed)
    assert "authorization-server-metadata-endpoint: 2 passed, 0 failed" in output, output[-3000:]
    assert "authorization-code-grant: 1 passed, 0 failed" in output, output[-3000:]
    assert "Total: 3 passed, 0 failed" in output


def _authorization_url(suite: subprocess.Popen, printed: list[str], prefix: str) -> str | None:
    """The authorization URL the suite prints for the person to open; None when it ended
    first (the suite not installed, the server not reachable)."""
    assert suite.stdout is not None
    for line in suite.stdout:
        printed.append(line)
        if line.startswith(prefix):
            return line.strip()
    return None
