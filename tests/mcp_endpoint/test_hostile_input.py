"""Generated hostile input at /mcp (hypothesis): whatever arrives, the answer is a well-formed
JSON-RPC result or error with a fitting HTTP status; never a 500, a stack trace or a hang."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mcp_endpoint.helpers import (
    MODERN,
    NAME_FIELDS,
    VERSION_KEY,
    legacy_session,
    post,
    sse_messages,
)

pytestmark = pytest.mark.django_db(transaction=True)

# The deadline and, in CI, the fixed seed come from the profile in tests/conftest.py.
EXAMPLES = settings(
    max_examples=120,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
params = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.sampled_from(["get_node_types", "search_nodes", "nope"]) | json_values,
            "arguments": json_values,
            "uri": st.sampled_from(["nodespec://ACTION/HTTP_REQUEST", "x://"]) | json_values,
            "cursor": json_values,
            "level": json_values,
            "_meta": st.fixed_dictionaries(
                {}, optional={VERSION_KEY: st.sampled_from([MODERN, "1999-01-01"]) | json_values}
            ),
        },
    ),
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values,
        "id": st.integers() | st.text(max_size=10) | json_values,
        "method": st.sampled_from(METHODS) | json_values,
        "params": params,
    },
)
# Well-formed envelopes with generated params: these reach the methods themselves.
ENVELOPE = {VERSION_KEY: MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
requests = st.builds(
    lambda request_id, method, fields: {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**fields, "_meta": ENVELOPE},
    },
    st.integers(0, 10**6) | st.text(min_size=1, max_size=8),
    st.sampled_from(METHODS),
    st.dictionaries(
        st.sampled_from(["name", "arguments", "uri", "cursor", "level", "ref", "argument"]),
        json_values,
        max_size=3,
    ),
)
bodies = st.one_of(
    requests.map(json.dumps),
    messages.map(json.dumps),
    st.lists(messages, max_size=3).map(json.dumps),
    json_values.map(json.dumps),
    messages.map(json.dumps).flatmap(
        lambda text: st.integers(0, max(len(text) - 1, 0)).map(lambda cut: text[:cut])
    ),
)


def assert_well_formed(response) -> None:
    """A fitting status, and a body that is JSON-RPC (or empty for 202/204/405)."""
    assert response.status_code < 500, response.content[:500]
    content_type = response.get("Content-Type", "")
    if content_type.startswith("text/event-stream"):
        found = sse_messages(response)
    elif response.status_code in (202, 204) or not response.content:
        return
    else:
        assert content_type.startswith("application/json"), content_type
        found = [response.json()]
    for message in found:
        assert_rpc(message)


def assert_rpc(message: Any) -> None:
    assert isinstance(message, dict)
    assert message.get("jsonrpc") == "2.0"
    if "method" in message:  # a notification or request the server sent on a stream
        return
    assert ("result" in message) != ("error" in message), message
    if "error" in message:
        error = message["error"]
        assert isinstance(error["code"], int)
        assert isinstance(error["message"], str)
        assert "Traceback" not in error["message"]


@pytest.fixture(autouse=True)
def _short_listen(settings):
    """A generated `subscriptions/listen` is answered with a stream that stays open for
    MCP_LISTEN_SECONDS (300 by default): these tests check the answer's form, which a stream
    that ends at once has too (acknowledgement, then the result)."""
    settings.MCP_LISTEN_SECONDS = 0


@pytest.fixture
def modern_headers(key) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": MODERN}


@pytest.fixture
def legacy_headers(client, key) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Mcp-Session-Id": legacy_session(client, key)}


def routing_headers(body: str) -> dict[str, str]:
    """The Mcp-Method and Mcp-Name headers a 2026-07-28 client sends for this body, so a
    well-formed request gets past the header checks to the method itself."""
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return {}
    headers = {"Mcp-Method": message["method"]}
    field = NAME_FIELDS.get(message["method"])
    params = message.get("params")
    if field and isinstance(params, dict) and isinstance(params.get(field), str):
        headers["Mcp-Name"] = params[field]
    return {name: value for name, value in headers.items() if value.isascii()}


@EXAMPLES
@given(body=bodies)
def test_generated_bodies_in_the_stateless_era_get_json_rpc_answers(client, modern_headers, body):
    headers = {**modern_headers, **routing_headers(body)}
    assert_well_formed(post(client, body, raw=True, headers=headers))


@EXAMPLES
@given(body=bodies)
def test_generated_bodies_in_a_session_get_json_rpc_answers(client, legacy_headers, body):
    headers = {**legacy_headers, "Accept": "application/json, text/event-stream"}
    assert_well_formed(post(client, body, raw=True, headers=headers))


@EXAMPLES
@given(body=st.binary(max_size=300))
def test_arbitrary_bytes_including_invalid_utf8_get_json_rpc_answers(client, modern_headers, body):
    assert_well_formed(post(client, body, raw=True, headers=modern_headers))


@EXAMPLES
@given(body=bodies, version=st.text(max_size=20), method=st.text(max_size=20))
def test_generated_headers_get_json_rpc_answers(client, key, body, version, method):
    headers = {"Authorization": f"Bearer {key}"}
    if version.isprintable() and version.isascii():
        headers["MCP-Protocol-Version"] = version
    if method.isprintable() and method.isascii():
        headers["Mcp-Method"] = method
    assert_well_formed(post(client, body, raw=True, headers=headers))


@pytest.mark.parametrize("depth", [100, 1_000, 100_000])
def test_deep_nesting_is_refused_cleanly(client, modern_headers, depth):
    body = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": ' + "[" * depth
    body += "]" * depth + "}"
    response = post(client, body, raw=True, headers=modern_headers)
    assert_well_formed(response)


def test_a_huge_string_under_the_size_limit_is_answered(client, modern_headers):
    query = "notify my team " * 60_000  # about 900 KB
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "search_nodes",
            "arguments": {"query": query, "max_results": 1},
            "_meta": {VERSION_KEY: MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
        },
    }
    response = post(
        client,
        body,
        headers={**modern_headers, "Mcp-Method": "tools/call", "Mcp-Name": "search_nodes"},
    )
    assert_well_formed(response)
    assert response.status_code == 200
