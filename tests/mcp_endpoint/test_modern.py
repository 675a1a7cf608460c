"""The stateless 2026-07-28 revision: `MCP-Protocol-Version: 2026-07-28`, a `_meta` envelope
on every request, routing headers that match the body, and `resultType` on results."""

from __future__ import annotations

import json

import pytest

from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.protocol import dispatch
from tests.mcp_endpoint.helpers import (
    BOTH,
    LOG_LEVEL_KEY,
    MODERN,
    SERVER_INFO_KEY,
    VERSION_KEY,
    envelope,
    modern,
    post,
    result,
    rpc_error,
    sse_messages,
)

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_NAMES = list(TOOLS)
HTTP_REQUEST = {"node_type": "ACTION", "subtype": "HTTP_REQUEST"}
CORRECTED = {"nodes": [{"node_type": "ACTION_NODE", "subtype": "HTTP_REQUEST"}]}
TEMPLATE_REF = {"type": "ref/resource", "uri": "nodespec://{node_type}/{subtype}"}


def call_tool(client, key, name, arguments, **options):
    return modern(client, "tools/call", {"name": name, "arguments": arguments}, key=key, **options)


def error_of(response, status: int, code: int) -> dict:
    assert response.status_code == status, response.content
    error = rpc_error(response)
    assert error["code"] == code, error
    return error


def tool_text(tool_result: dict) -> str:
    [block] = tool_result["content"]
    assert block["type"] == "text"
    return block["text"]


# server/discover.


def test_discover_lists_the_supported_versions_capabilities_and_instructions(client, key):
    answer = result(modern(client, "server/discover", key=key))
    assert answer["supportedVersions"] == [MODERN]
    assert set(answer["capabilities"]) >= {"tools", "resources", "prompts", "completions"}
    assert "logging" in answer["capabilities"]
    assert "search_nodes" in answer["instructions"]


def test_discover_carries_result_type_cache_hints_and_server_info(client, key):
    answer = result(modern(client, "server/discover", key=key))
    assert answer["resultType"] == "complete"
    assert isinstance(answer["ttlMs"], int)
    assert answer["ttlMs"] > 0
    assert answer["cacheScope"] in ("public", "private")
    assert answer["_meta"][SERVER_INFO_KEY]["name"] == "switchyard"
    assert answer["_meta"][SERVER_INFO_KEY]["version"]


def test_a_response_echoes_the_request_id(client, key):
    response = modern(client, "server/discover", key=key, request_id="abc-7")
    assert response.json()["id"] == "abc-7"
    assert response.json()["jsonrpc"] == "2.0"


# tools.


def test_tools_list_has_the_servers_own_tools_in_a_fixed_order(client, key):
    answer = result(modern(client, "tools/list", key=key))
    assert [tool["name"] for tool in answer["tools"]] == TOOL_NAMES
    assert "nextCursor" not in answer


def test_every_tool_has_schemas_and_says_whether_it_only_reads(client, key):
    changing = {"create_workflow", "update_workflow", "publish_workflow", "test_workflow"}
    for tool in result(modern(client, "tools/list", key=key))["tools"]:
        assert tool["inputSchema"]["type"] == "object", tool["name"]
        assert tool["outputSchema"]["type"] == "object", tool["name"]
        reads_only = tool["name"] not in changing
        assert tool["annotations"]["readOnlyHint"] is reads_only, tool["name"]
        assert tool["annotations"]["idempotentHint"] is reads_only, tool["name"]
        assert tool["description"]


def test_search_nodes_schema_requires_a_query(client, key):
    tools = {t["name"]: t for t in result(modern(client, "tools/list", key=key))["tools"]}
    schema = tools["search_nodes"]["inputSchema"]
    assert schema["required"] == ["query"]
    assert schema["properties"]["max_results"]["type"] == "integer"


def test_tools_list_carries_cache_hints_and_result_type(client, key):
    """Private: the list shows what the caller may call (test_tool_visibility.py)."""
    answer = result(modern(client, "tools/list", key=key))
    assert answer["resultType"] == "complete"
    assert isinstance(answer["ttlMs"], int)
    assert answer["cacheScope"] == "private"


@pytest.mark.parametrize(
    ("name", "arguments", "expected_key"),
    [
        ("get_node_types", {}, "ACTION"),
        ("get_node_details", {"nodes": [HTTP_REQUEST]}, "nodes"),
        ("search_nodes", {"query": "send an email"}, "results"),
    ],
)
def test_each_tool_returns_structured_content_and_the_same_json_as_text(
    client, key, loaded_catalog, name, arguments, expected_key
):
    answer = result(call_tool(client, key, name, arguments))
    assert answer["isError"] is False
    assert answer["resultType"] == "complete"
    assert expected_key in answer["structuredContent"]
    assert json.loads(tool_text(answer)) == answer["structuredContent"]


def test_get_node_details_describes_the_node_asked_for(client, key, loaded_catalog):
    answer = result(call_tool(client, key, "get_node_details", {"nodes": [HTTP_REQUEST]}))
    [node] = answer["structuredContent"]["nodes"]
    assert (node["node_type"], node["subtype"]) == ("ACTION", "HTTP_REQUEST")
    assert "warning" not in node


def test_search_nodes_finds_an_email_node(client, key, loaded_catalog):
    answer = result(call_tool(client, key, "search_nodes", {"query": "send an email"}))
    found = answer["structuredContent"]["results"]
    assert found
    assert any("EMAIL" in hit["subtype"] or "GMAIL" in hit["subtype"] for hit in found[:5])


def test_a_wrong_node_type_is_corrected_with_a_warning(client, key, loaded_catalog):
    answer = result(call_tool(client, key, "get_node_details", CORRECTED))
    [node] = answer["structuredContent"]["nodes"]
    assert node["node_type"] == "ACTION"
    assert "ACTION_NODE" in node["warning"]


def test_an_unknown_argument_is_a_tool_error_naming_it(client, key, loaded_catalog):
    response = call_tool(client, key, "search_nodes", {"query": "email", "querry": "x"})
    assert response.status_code == 200
    answer = result(response)
    assert answer["isError"] is True
    assert "querry" in tool_text(answer)
    assert "unknown argument" in tool_text(answer)


def test_an_argument_of_the_wrong_type_is_a_tool_error_naming_it(client, key, loaded_catalog):
    answer = result(call_tool(client, key, "search_nodes", {"query": "email", "max_results": "x"}))
    assert answer["isError"] is True
    assert "max_results" in tool_text(answer)


def test_a_missing_required_argument_is_a_tool_error_naming_it(client, key, loaded_catalog):
    answer = result(call_tool(client, key, "search_nodes", {}))
    assert answer["isError"] is True
    assert "query" in tool_text(answer)
    assert "required" in tool_text(answer)


def test_an_out_of_range_argument_is_a_tool_error(client, key, loaded_catalog):
    answer = result(call_tool(client, key, "get_node_details", {"nodes": []}))
    assert answer["isError"] is True
    assert "nodes" in tool_text(answer)


def test_an_unknown_tool_is_a_tool_error_listing_the_tools(client, key):
    answer = result(call_tool(client, key, "delete_everything", {}))
    assert answer["isError"] is True
    for name in TOOL_NAMES:
        assert name in tool_text(answer)


# resources.


def test_resources_list_has_a_nodespec_resource_per_catalog_node(client, key, loaded_catalog):
    answer = result(modern(client, "resources/list", key=key))
    uris = [resource["uri"] for resource in answer["resources"]]
    assert len(uris) == 63
    assert len(set(uris)) == 63
    assert all(uri.startswith("nodespec://") for uri in uris)
    assert "nodespec://ACTION/HTTP_REQUEST" in uris
    assert "nextCursor" not in answer  # 63 fit on one page of 100
    assert answer["resultType"] == "complete"
    assert answer["ttlMs"] > 0


def test_resources_list_pages_walk_every_resource(client, key, loaded_catalog, monkeypatch):
    everything = [r["uri"] for r in result(modern(client, "resources/list", key=key))["resources"]]
    monkeypatch.setattr(dispatch, "PAGE_SIZE", 10)
    seen, cursor, pages = [], None, 0
    while True:
        params = {"cursor": cursor} if cursor is not None else {}
        answer = result(modern(client, "resources/list", params, key=key))
        assert len(answer["resources"]) <= 10
        seen += [resource["uri"] for resource in answer["resources"]]
        pages += 1
        cursor = answer.get("nextCursor")
        if cursor is None:
            break
        assert isinstance(cursor, str)
        assert pages < 20
    assert pages == 7
    assert seen == everything


@pytest.mark.parametrize("cursor", ["bogus", "-1", "1000", ""])
def test_a_bogus_cursor_is_invalid_params(client, key, loaded_catalog, cursor):
    response = modern(client, "resources/list", {"cursor": cursor}, key=key)
    error = error_of(response, 400, -32602)
    assert "cursor" in error["message"]


def test_resource_templates_list_has_the_nodespec_template(client, key):
    answer = result(modern(client, "resources/templates/list", key=key))
    template, _run = answer["resourceTemplates"]  # the run template: test_run_tools.py
    assert template["uriTemplate"] == "nodespec://{node_type}/{subtype}"
    assert template["mimeType"] == "application/json"
    assert answer["resultType"] == "complete"


def test_reading_a_nodespec_resource_returns_its_json(client, key, loaded_catalog):
    uri = "nodespec://ACTION/HTTP_REQUEST"
    answer = result(modern(client, "resources/read", {"uri": uri}, key=key))
    [content] = answer["contents"]
    assert content["uri"] == uri
    assert content["mimeType"] == "application/json"
    spec = json.loads(content["text"])
    assert (spec["node_type"], spec["subtype"]) == ("ACTION", "HTTP_REQUEST")
    assert answer["resultType"] == "complete"


@pytest.mark.parametrize(
    "uri", ["nodespec://ACTION/NO_SUCH_NODE", "nodespec://ACTION", "https://example.com/x"]
)
def test_reading_an_unknown_resource_is_invalid_params_400(client, key, loaded_catalog, uri):
    error = error_of(modern(client, "resources/read", {"uri": uri}, key=key), 400, -32602)
    assert uri in error["message"]
    assert "nodespec://" in error["message"]


# prompts.


def test_prompts_list_has_the_two_prompts(client, key):
    answer = result(modern(client, "prompts/list", key=key))
    prompts = {prompt["name"]: prompt for prompt in answer["prompts"]}
    assert set(prompts) == {"design_workflow", "explain_node"}
    assert [a["name"] for a in prompts["explain_node"]["arguments"]] == ["node_type", "subtype"]
    assert answer["resultType"] == "complete"


def test_prompts_get_renders_the_prompt_with_its_arguments(client, key):
    arguments = {"node_type": "ACTION", "subtype": "HTTP_REQUEST"}
    params = {"name": "explain_node", "arguments": arguments}
    answer = result(modern(client, "prompts/get", params, key=key))
    [message] = answer["messages"]
    assert message["role"] == "user"
    assert "ACTION" in message["content"]["text"]
    assert "HTTP_REQUEST" in message["content"]["text"]


def test_prompts_get_without_a_required_argument_is_invalid_params(client, key):
    params = {"name": "explain_node", "arguments": {"node_type": "ACTION"}}
    error = error_of(modern(client, "prompts/get", params, key=key), 400, -32602)
    assert "subtype" in error["message"]


def test_prompts_get_of_an_unknown_prompt_is_invalid_params(client, key):
    error = error_of(modern(client, "prompts/get", {"name": "nope"}, key=key), 400, -32602)
    assert "design_workflow" in error["message"]


# completion/complete.


def complete(client, key, ref, name, value, context=None):
    params = {"ref": ref, "argument": {"name": name, "value": value}}
    if context:
        params["context"] = {"arguments": context}
    return result(modern(client, "completion/complete", params, key=key))["completion"]


def test_completion_of_the_template_node_type(client, key, loaded_catalog):
    completion = complete(client, key, TEMPLATE_REF, "node_type", "A")
    assert set(completion["values"]) == {"ACTION", "AI_AGENT"}
    assert completion["hasMore"] is False


def test_completion_of_the_template_subtype_uses_the_node_type(client, key, loaded_catalog):
    completion = complete(client, key, TEMPLATE_REF, "subtype", "HTTP", {"node_type": "ACTION"})
    assert completion["values"] == ["HTTP_REQUEST"]


def test_completion_of_the_explain_node_prompt_arguments(client, key, loaded_catalog):
    ref = {"type": "ref/prompt", "name": "explain_node"}
    assert "EXTERNAL_ACTION" in complete(client, key, ref, "node_type", "EX")["values"]
    values = complete(client, key, ref, "subtype", "SL", {"node_type": "EXTERNAL_ACTION"})
    assert values["values"] == ["SLACK"]


def test_completion_for_an_unknown_prompt_is_invalid_params(client, key):
    params = {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}}
    error_of(modern(client, "completion/complete", params, key=key), 400, -32602)


# Header and envelope rules.


def test_a_missing_mcp_method_header_is_a_header_mismatch(client, key):
    response = modern(client, "tools/list", key=key, headers={"Mcp-Method": None})
    error = error_of(response, 400, -32020)
    assert "mcp-method" in error["message"].lower()


def test_an_mcp_method_header_differing_from_the_body_is_a_header_mismatch(client, key):
    response = modern(client, "tools/list", key=key, headers={"Mcp-Method": "prompts/list"})
    error_of(response, 400, -32020)


def test_an_mcp_name_header_differing_from_the_tool_name_is_a_header_mismatch(client, key):
    params = {"name": "get_node_types", "arguments": {}}
    response = modern(client, "tools/call", params, key=key, headers={"Mcp-Name": "search_nodes"})
    error = error_of(response, 400, -32020)
    assert "mcp-name" in error["message"].lower()


def test_a_missing_mcp_name_header_for_tools_call_is_a_header_mismatch(client, key):
    params = {"name": "get_node_types", "arguments": {}}
    response = modern(client, "tools/call", params, key=key, headers={"Mcp-Name": None})
    error_of(response, 400, -32020)


def test_an_mcp_name_header_differing_from_the_resource_uri_is_a_header_mismatch(client, key):
    params = {"uri": "nodespec://ACTION/HTTP_REQUEST"}
    headers = {"Mcp-Name": "nodespec://FLOW/IF"}
    error_of(modern(client, "resources/read", params, key=key, headers=headers), 400, -32020)


def test_a_protocol_version_header_differing_from_the_envelope_is_a_header_mismatch(client, key):
    response = modern(client, "tools/list", key=key, meta={VERSION_KEY: "2026-01-01"})
    error_of(response, 400, -32020)


def test_a_request_without_meta_is_invalid_params(client, key):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    response = post(client, body, headers={**headers, "Authorization": f"Bearer {key}"})
    error = error_of(response, 400, -32602)
    assert "_meta" in error["message"]


def test_a_meta_without_client_capabilities_is_invalid_params(client, key):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    body["params"] = {"_meta": {VERSION_KEY: MODERN}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    response = post(client, body, headers={**headers, "Authorization": f"Bearer {key}"})
    error = error_of(response, 400, -32602)
    assert "clientCapabilities" in error["message"]


def test_an_unsupported_version_is_refused_naming_the_supported_ones(client, key):
    response = modern(
        client,
        "tools/list",
        key=key,
        meta={VERSION_KEY: "2099-01-01"},
        headers={"MCP-Protocol-Version": "2099-01-01"},
    )
    error = error_of(response, 400, -32022)
    assert MODERN in error["data"]["supported"]
    assert error["data"]["requested"] == "2099-01-01"


def test_an_unsupported_version_error_echoes_the_request_id(client, key):
    response = modern(
        client,
        "tools/list",
        key=key,
        request_id=41,
        meta={VERSION_KEY: "2099-01-01"},
        headers={"MCP-Protocol-Version": "2099-01-01"},
    )
    assert response.json()["id"] == 41


@pytest.mark.parametrize("method", ["ping", "initialize", "logging/setLevel", "no/such"])
def test_methods_this_revision_does_not_have_are_method_not_found_404(client, key, method):
    params = {"protocolVersion": MODERN, "capabilities": {}} if method == "initialize" else {}
    error = error_of(modern(client, method, params, key=key), 404, -32601)
    assert method in error["message"]


@pytest.mark.parametrize("version", ["1.0", "2.1", None])
def test_a_message_that_is_not_json_rpc_2_0_is_an_invalid_request(client, key, version):
    body = {"id": 1, "method": "tools/list", "params": {"_meta": envelope()}}
    if version is not None:
        body["jsonrpc"] = version
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    response = post(client, body, headers={**headers, "Authorization": f"Bearer {key}"})
    error_of(response, 400, -32600)


def test_a_notification_is_accepted_with_202_and_no_body(client, key):
    response = modern(client, "notifications/cancelled", {"requestId": 1}, key=key, request_id=None)
    assert response.status_code == 202
    assert response.content == b""


@pytest.mark.parametrize("verb", ["get", "delete", "put"])
def test_other_http_methods_are_405_allowing_post(client, key, verb):
    headers = {"MCP-Protocol-Version": MODERN, "Authorization": f"Bearer {key}"}
    response = getattr(client, verb)("/mcp", headers=headers)
    assert response.status_code == 405
    assert response["Allow"] == "POST"


def test_a_batch_is_an_invalid_request(client, key):
    body = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope()}}]
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    response = post(client, body, headers={**headers, "Authorization": f"Bearer {key}"})
    error = error_of(response, 400, -32600)
    assert "one JSON-RPC" in error["message"]


def test_an_accept_header_without_json_is_406(client, key):
    response = modern(client, "tools/list", key=key, accept="text/html")
    assert response.status_code == 406


# Progress, logging and subscriptions over server-sent events.


def test_a_progress_token_with_an_event_stream_accept_gets_progress_then_the_response(
    client, key, loaded_catalog
):
    response = call_tool(
        client, key, "get_node_types", {}, meta={"progressToken": "t-1"}, accept=BOTH
    )
    assert response.status_code == 200
    *notes, final = sse_messages(response)
    assert [note["method"] for note in notes] == ["notifications/progress"] * len(notes)
    assert len(notes) >= 2
    assert {note["params"]["progressToken"] for note in notes} == {"t-1"}
    progress = [note["params"]["progress"] for note in notes]
    assert progress == sorted(progress)
    assert final["id"] == 1
    assert "ACTION" in final["result"]["structuredContent"]


def test_a_progress_token_without_an_event_stream_accept_gets_plain_json(
    client, key, loaded_catalog
):
    response = call_tool(client, key, "get_node_types", {}, meta={"progressToken": 7})
    assert response["Content-Type"] == "application/json"
    assert result(response)["isError"] is False


def test_a_warning_log_level_and_a_corrected_name_send_a_log_message(client, key, loaded_catalog):
    response = call_tool(
        client, key, "get_node_details", CORRECTED, meta={LOG_LEVEL_KEY: "warning"}, accept=BOTH
    )
    *notes, final = sse_messages(response)
    [note] = notes
    assert note["method"] == "notifications/message"
    assert note["params"]["level"] == "warning"
    assert "ACTION_NODE" in note["params"]["data"]
    assert final["result"]["structuredContent"]["nodes"][0]["node_type"] == "ACTION"


def test_an_error_log_level_suppresses_the_warning(client, key, loaded_catalog):
    response = call_tool(
        client, key, "get_node_details", CORRECTED, meta={LOG_LEVEL_KEY: "error"}, accept=BOTH
    )
    assert response["Content-Type"] == "application/json"
    assert result(response)["structuredContent"]["nodes"][0]["warning"]


def test_no_log_level_sends_no_log_message(client, key, loaded_catalog):
    response = call_tool(client, key, "get_node_details", CORRECTED, accept=BOTH)
    assert response["Content-Type"] == "application/json"


def test_subscriptions_listen_without_an_event_stream_accept_is_406(client, key):
    params = {"notifications": {"resourcesListChanged": True}}
    response = modern(client, "subscriptions/listen", params, key=key)
    assert response.status_code == 406
    assert "text/event-stream" in rpc_error(response)["message"]


def test_subscriptions_listen_acknowledges_first_and_ends_with_the_response(client, key, settings):
    settings.MCP_LISTEN_SECONDS = 0
    params = {"notifications": {"resourcesListChanged": True}}
    response = modern(client, "subscriptions/listen", params, key=key, accept=BOTH, request_id=9)
    assert response.status_code == 200
    first, *_, last = sse_messages(response)
    assert first["method"] == "notifications/subscriptions/acknowledged"
    assert first["params"]["notifications"] == {"resourcesListChanged": True}
    assert first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 9
    assert last["id"] == 9
    assert last["result"]["resultType"] == "complete"


def test_subscriptions_listen_grants_nothing_it_was_not_asked_for(client, key, settings):
    settings.MCP_LISTEN_SECONDS = 0
    response = modern(client, "subscriptions/listen", {"notifications": {}}, key=key, accept=BOTH)
    first = sse_messages(response)[0]
    assert first["params"]["notifications"] == {}
