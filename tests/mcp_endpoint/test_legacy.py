"""The 2025 revisions: `initialize` opens a session (`Mcp-Session-Id`), later requests name
it, `DELETE` ends it; JSON-RPC errors travel with HTTP 200."""

from __future__ import annotations

import re

import pytest

from mcp_endpoint.features.tools import TOOLS
from tests.mcp_endpoint.helpers import (
    JSON,
    LATEST_LEGACY,
    MODERN,
    initialize,
    legacy,
    legacy_session,
    post,
    result,
    rpc_error,
    sse_messages,
)

pytestmark = pytest.mark.django_db(transaction=True)

LEGACY_VERSIONS = ["2025-03-26", "2025-06-18", "2025-11-25"]
CORRECTED = {
    "name": "get_node_details",
    "arguments": {"nodes": [{"node_type": "ACTION_NODE", "subtype": "HTTP_REQUEST"}]},
}


def delete(client, session_id, key):
    return client.delete(
        "/mcp", headers={"Mcp-Session-Id": session_id, "Authorization": f"Bearer {key}"}
    )


# initialize.


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_initialize_echoes_a_version_it_speaks(client, key, version):
    assert result(initialize(client, key, version))["protocolVersion"] == version


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", "latest"])
def test_initialize_with_a_version_it_does_not_negotiate_answers_the_latest_2025_one(
    client, key, version
):
    assert result(initialize(client, key, version))["protocolVersion"] == LATEST_LEGACY


def test_initialize_result_has_server_info_capabilities_and_instructions(client, key):
    answer = result(initialize(client, key))
    assert answer["serverInfo"]["name"] == "switchyard"
    assert answer["serverInfo"]["version"]
    assert set(answer["capabilities"]) >= {"tools", "resources", "prompts", "logging"}
    assert "search_nodes" in answer["instructions"]


def test_initialize_result_has_none_of_the_2026_fields(client, key):
    answer = result(initialize(client, key))
    for field in ("resultType", "ttlMs", "cacheScope", "supportedVersions"):
        assert field not in answer


def test_initialize_issues_a_visible_ascii_session_id(client, key):
    response = initialize(client, key)
    session_id = response["Mcp-Session-Id"]
    assert re.fullmatch(r"[\x21-\x7e]+", session_id)
    assert len(session_id) >= 16


def test_each_initialize_opens_a_new_session(client, key):
    assert initialize(client, key)["Mcp-Session-Id"] != initialize(client, key)["Mcp-Session-Id"]


def test_initialize_without_params_is_invalid_params(client, key):
    body = {"jsonrpc": "2.0", "id": 3, "method": "initialize"}
    response = post(client, body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 400
    error = rpc_error(response)
    assert error["code"] == -32602
    assert response.json()["id"] == 3
    assert "Mcp-Session-Id" not in response


def test_notifications_initialized_is_accepted_with_202(client, key):
    session = legacy_session(client, key, initialized=False)
    response = legacy(client, session, "notifications/initialized", key=key, request_id=None)
    assert response.status_code == 202
    assert response.content == b""


# The session.


def test_a_request_without_a_session_is_400_saying_to_initialize(client, key):
    response = legacy(client, None, "tools/list", key=key)
    assert response.status_code == 400
    error = rpc_error(response)
    assert error["code"] == -32600
    assert "Mcp-Session-Id" in error["message"]
    assert "initialize" in error["message"]


def test_an_unknown_session_is_404(client, key):
    response = legacy(client, "no-such-session", "tools/list", key=key)
    assert response.status_code == 404
    assert "initialize" in rpc_error(response)["message"]


def test_an_overlong_session_id_is_404(client, key):
    assert legacy(client, "x" * 1000, "ping", key=key).status_code == 404


def test_delete_ends_the_session(client, key):
    session = legacy_session(client, key)
    assert result(legacy(client, session, "ping", key=key)) == {}
    assert delete(client, session, key).status_code == 200
    assert legacy(client, session, "ping", key=key).status_code == 404
    assert delete(client, session, key).status_code == 404


def test_delete_without_a_session_is_400(client, key):
    response = client.delete("/mcp", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 400


def test_get_on_a_session_opens_its_stream_of_list_changes(client, key, settings):
    settings.MCP_LISTEN_SECONDS = 0  # the stream ends at once, so the test can read it
    session = legacy_session(client, key)
    headers = {"Mcp-Session-Id": session, "Authorization": f"Bearer {key}"}
    response = client.get("/mcp", headers={**headers, "Accept": "text/event-stream"})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["Mcp-Session-Id"] == session
    assert sse_messages(response) == []


def test_get_on_a_session_that_does_not_accept_an_event_stream_is_406(client, key):
    session = legacy_session(client, key)
    headers = {"Mcp-Session-Id": session, "Authorization": f"Bearer {key}"}
    response = client.get("/mcp", headers={**headers, "Accept": "application/json"})
    assert response.status_code == 406
    assert "text/event-stream" in response.json()["error"]["message"]


def test_responses_in_a_session_carry_its_id(client, key):
    session = legacy_session(client, key)
    assert legacy(client, session, "ping", key=key)["Mcp-Session-Id"] == session


# MCP-Protocol-Version on session requests.


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_2025_version_header_matching_or_not_is_accepted_as_the_sdk_does(client, key, version):
    # Product choice (see streamable_http._handle_session_era): the official SDK accepts any 2025
    # revision here; the session's negotiated version shapes the answers.
    session = legacy_session(client, key, "2025-06-18")
    assert result(legacy(client, session, "ping", key=key, version=version)) == {}


def test_the_2026_version_header_on_a_session_request_is_400(client, key):
    session = legacy_session(client, key)
    response = legacy(client, session, "tools/list", key=key, version=MODERN)
    assert response.status_code == 400


@pytest.mark.parametrize("version", ["2025-13-45", "1.0", "garbage"])
def test_an_unknown_version_header_is_400_naming_the_supported_ones(client, key, version):
    session = legacy_session(client, key)
    response = legacy(client, session, "ping", key=key, version=version)
    assert response.status_code == 400
    error = rpc_error(response)
    assert version in error["message"]
    assert LATEST_LEGACY in error["message"]


# Methods.


def test_ping_answers_an_empty_result(client, key):
    session = legacy_session(client, key)
    response = legacy(client, session, "ping", key=key, request_id="p1")
    assert response.json() == {"jsonrpc": "2.0", "id": "p1", "result": {}}


def test_an_unknown_method_is_method_not_found_with_http_200(client, key):
    session = legacy_session(client, key)
    response = legacy(client, session, "tools/destroy", key=key)
    assert response.status_code == 200
    error = rpc_error(response)
    assert error["code"] == -32601
    assert "tools/destroy" in error["message"]


def test_tools_list_has_the_tools_and_none_of_the_2026_fields(client, key):
    session = legacy_session(client, key)
    answer = result(legacy(client, session, "tools/list", key=key))
    assert [t["name"] for t in answer["tools"]] == list(TOOLS)
    for field in ("resultType", "ttlMs", "cacheScope"):
        assert field not in answer
    assert "_meta" not in answer or "io.modelcontextprotocol/serverInfo" not in answer["_meta"]


def test_a_tool_call_in_a_session_returns_structured_content(client, key, loaded_catalog):
    session = legacy_session(client, key)
    params = {"name": "search_nodes", "arguments": {"query": "send a slack message"}}
    answer = result(legacy(client, session, "tools/call", params, key=key))
    assert answer["isError"] is False
    assert answer["structuredContent"]["results"]
    assert "resultType" not in answer


def test_reading_an_unknown_resource_is_invalid_params_with_http_200(client, key, loaded_catalog):
    session = legacy_session(client, key)
    params = {"uri": "nodespec://ACTION/NO_SUCH_NODE"}
    response = legacy(client, session, "resources/read", params, key=key)
    assert response.status_code == 200
    assert rpc_error(response)["code"] == -32602


def test_a_batch_is_400_invalid_request(client, key):
    session = legacy_session(client, key)
    body = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
    headers = {"Mcp-Session-Id": session, "Authorization": f"Bearer {key}"}
    response = post(client, body, headers=headers)
    assert response.status_code == 400
    error = rpc_error(response)
    assert error["code"] == -32600
    assert "batch" in error["message"]


# Logging over server-sent events.


def test_set_level_then_a_corrected_call_sends_a_log_message_event(client, key, loaded_catalog):
    session = legacy_session(client, key)
    assert result(legacy(client, session, "logging/setLevel", {"level": "warning"}, key=key)) == {}
    response = legacy(client, session, "tools/call", CORRECTED, key=key, request_id=5)
    assert response.status_code == 200
    assert response["Mcp-Session-Id"] == session
    *notes, final = sse_messages(response)
    [note] = notes
    assert note["method"] == "notifications/message"
    assert note["params"]["level"] == "warning"
    assert "ACTION_NODE" in note["params"]["data"]
    assert final["id"] == 5
    assert final["result"]["structuredContent"]["nodes"][0]["node_type"] == "ACTION"


def test_a_level_above_warning_sends_no_log_message(client, key, loaded_catalog):
    session = legacy_session(client, key)
    result(legacy(client, session, "logging/setLevel", {"level": "error"}, key=key))
    response = legacy(client, session, "tools/call", CORRECTED, key=key)
    assert response["Content-Type"] == JSON
    assert result(response)["structuredContent"]["nodes"][0]["warning"]


def test_an_accept_without_event_stream_gets_plain_json_without_the_log(
    client, key, loaded_catalog
):
    session = legacy_session(client, key)
    result(legacy(client, session, "logging/setLevel", {"level": "debug"}, key=key))
    response = legacy(client, session, "tools/call", CORRECTED, key=key, accept=JSON)
    assert response["Content-Type"] == JSON
    assert result(response)["isError"] is False


def test_set_level_with_an_unknown_level_is_invalid_params(client, key):
    session = legacy_session(client, key)
    response = legacy(client, session, "logging/setLevel", {"level": "loud"}, key=key)
    assert response.status_code == 200
    assert rpc_error(response)["code"] == -32602
