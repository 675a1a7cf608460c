"""The refusals' challenges (RFC 6750, section 3): a missing key gets the realm alone, a bad
key `invalid_token` with its reason, a missing scope a 403 with `insufficient_scope` and the
scope, over Streamable HTTP in both eras, REST and `/metrics`; every header value is a valid
quoted-string whatever the message holds."""

from __future__ import annotations

import re

import pytest

from mcp_endpoint.access import challenges
from mcp_endpoint.models import Scope
from tests.mcp_endpoint.helpers import (
    BOTH,
    initialize,
    legacy,
    legacy_session,
    make_key,
    modern,
    rpc_error,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

TOOL_CALL = {"name": "get_node_types", "arguments": {}}
METADATA = "http://testserver/.well-known/oauth-protected-resource/mcp"

# RFC 9110's grammar of a challenge whose parameters are tokens or quoted-strings.
TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
PARAMETER = rf"({TOKEN})=({TOKEN}|{QUOTED})"
CHALLENGE = re.compile(rf"Bearer {PARAMETER}(?:, {PARAMETER})*")


def challenge(response) -> dict[str, str]:
    """The parameters of the response's Bearer challenge, checked against the grammar."""
    header = response["WWW-Authenticate"]
    assert CHALLENGE.fullmatch(header), header
    found = {}
    for name, value in re.findall(PARAMETER, header):
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        found[name] = value
    return found


# 401: no key, a bad key.


@pytest.mark.parametrize(
    "send",
    [lambda c, key: modern(c, "tools/list", key=key), lambda c, key: initialize(c, key)],
    ids=["2026-07-28", "2025"],
)
def test_401_challenges_no_key_with_the_metadata_and_a_bad_key_as_invalid_token(client, send):
    missing = send(client, None)
    assert missing.status_code == 401
    # RFC 6750, 3.1: a request without credentials gets no error code; RFC 9728, 5.1: where
    # the endpoint's metadata is, and the scopes to ask for.
    assert challenge(missing) == {
        "realm": "switchyard",
        "resource_metadata": METADATA,
        "scope": "tools:read tools:execute resources:read",
    }
    assert "'Authorization: Bearer KEY'" in rpc_error(missing)["message"]
    assert METADATA in rpc_error(missing)["message"]

    wrong = send(client, make_key()[:-4] + "abcd")
    assert wrong.status_code == 401
    assert challenge(wrong) == {
        "realm": "switchyard",
        "resource_metadata": METADATA,
        "error": "invalid_token",
        "error_description": "The API key is not valid.",
    }
    assert rpc_error(wrong)["message"] == "Unauthorized: The API key is not valid."

    malformed = send(client, "not-a-key")
    assert challenge(malformed)["error"] == "invalid_token"
    assert "sy_<prefix>_<secret>" in challenge(malformed)["error_description"]


@pytest.mark.parametrize(
    "send",
    [lambda c, key: modern(c, "tools/list", key=key), lambda c, key: initialize(c, key)],
    ids=["2026-07-28", "2025"],
)
def test_with_oauth_off_a_missing_key_gets_the_realm_alone(client, send, settings):
    settings.OAUTH_ENABLED = False
    missing = send(client, None)
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="switchyard"'
    wrong = send(client, "not-a-key")
    assert challenge(wrong)["error"] == "invalid_token"
    assert "resource_metadata" not in challenge(wrong)


def test_rest_and_metrics_answer_a_bad_key_with_the_same_challenge(client):
    for path in ("/api/v1/mcp/tools", "/metrics"):
        response = client.get(path, headers={"X-API-Key": "sy_abcdefgh_wrong"})
        assert response.status_code == 401, (path, response.content)
        assert challenge(response)["error"] == "invalid_token"


# 403: a missing scope.


def assert_insufficient_scope(response, scope: str) -> None:
    assert response.status_code == 403, response.content
    found = challenge(response)
    assert found["error"] == "insufficient_scope"
    assert found["scope"] == scope
    assert scope in found["error_description"]


def test_a_tool_call_without_its_scope_is_403_naming_the_scope_in_both_eras(client):
    key = make_key([Scope.TOOLS_READ])
    modern_call = modern(client, "tools/call", TOOL_CALL, key=key)
    assert_insufficient_scope(modern_call, "tools:execute")
    error = rpc_error(modern_call)  # the JSON-RPC error the server sent before, unchanged
    assert error["code"] == -32600
    assert error["message"].startswith("Forbidden: tools/call of get_node_types needs the scope")

    session = legacy_session(client, key)
    session_call = legacy(client, session, "tools/call", TOOL_CALL, key=key)
    assert_insufficient_scope(session_call, "tools:execute")
    assert rpc_error(session_call) == error


def test_each_scope_refusal_over_streamable_http_names_its_own_scope(client):
    builder = make_key([Scope.TOOLS_READ, Scope.TOOLS_EXECUTE, Scope.RESOURCES_READ])
    publish = {"name": "publish_workflow", "arguments": {"name": "x"}}
    assert_insufficient_scope(
        modern(client, "tools/call", publish, key=builder), "workflows:publish"
    )
    run = {"uri": "run://1"}
    assert_insufficient_scope(modern(client, "resources/read", run, key=builder), "runs:read")
    health = make_key([Scope.HEALTH_CHECK])
    assert_insufficient_scope(modern(client, "tools/list", key=health), "tools:read")
    session = legacy_session(client, health)
    stream = client.get(
        "/mcp",
        headers={"Authorization": f"Bearer {health}", "Mcp-Session-Id": session, "Accept": BOTH},
    )
    assert_insufficient_scope(stream, "tools:read")


def test_rest_and_metrics_refuse_a_missing_scope_with_the_challenge(client):
    key = make_key([Scope.TOOLS_EXECUTE])
    headers = {"Authorization": f"Bearer {key}"}
    assert_insufficient_scope(client.get("/api/v1/runs", headers=headers), "runs:read")
    assert_insufficient_scope(client.get("/metrics", headers=headers), "metrics:read")
    invoked = client.post(
        "/api/v1/mcp/invoke",
        {"name": "publish_workflow", "arguments": {"name": "x"}},
        content_type="application/json",
        headers=headers,
    )
    assert_insufficient_scope(invoked, "workflows:publish")
    assert "workflows:publish" in invoked.json()["error"]


def test_a_challenge_is_a_valid_header_whatever_its_message_holds():
    message = 'Forbidden: "quoted" \\ back\r\nnew line, über ' + "x" * 400
    header = challenges.scope_challenge("tools:execute", message)["WWW-Authenticate"]
    assert CHALLENGE.fullmatch(header), header
    assert header.isascii()
    assert "\n" not in header
    assert "\r" not in header
    description = re.search(r'error_description="([^"]*)"', header)
    assert description is not None
    assert description.group(1).startswith("Forbidden: 'quoted' / back  new line, ")
    assert len(description.group(1)) == challenges.DESCRIPTION_CHARACTERS
