"""Calls whose cost grows with their arguments (issue 13): capped with errors that name the
limit, the same over /mcp and REST, and never answered in the event loop."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.conf import settings
from django.core.exceptions import SynchronousOnlyOperation

from graphs.execution.toolset import refresh_workflow_tools
from mcp_endpoint.access.auth import authenticate
from mcp_endpoint.transports import admission, asgi
from nodespecs.knowledge.registry import refresh_registry
from nodespecs.knowledge.service import (
    EVENT_LOOP_NODES,
    MAX_NAME_CHARACTERS,
    KnowledgeError,
    get_node_details,
    get_node_types,
    search_nodes,
)
from tests.graph_files import import_file
from tests.mcp_endpoint.helpers import auth_headers, envelope, make_key, modern
from tests.mcp_endpoint.test_asgi import answer_in_app

MAX_QUERY_CHARACTERS = settings.KNOWLEDGE_MAX_QUERY_CHARACTERS
MAX_QUERY_TERMS = settings.KNOWLEDGE_MAX_QUERY_TERMS


def query_of(characters: int) -> str:
    """A query of exactly `characters` characters and three terms."""
    return "send email " + "x" * (characters - len("send email "))


def query_with(terms: int) -> str:
    return " ".join(f"w{n}" for n in range(terms))


# The caps, in the knowledge service (which MCP and REST share).


def test_a_query_at_the_length_limit_is_searched_and_one_longer_is_refused(registry):
    assert search_nodes(query_of(MAX_QUERY_CHARACTERS), registry=registry)
    with pytest.raises(KnowledgeError) as caught:
        search_nodes(query_of(MAX_QUERY_CHARACTERS + 1), registry=registry)
    assert f"query has {MAX_QUERY_CHARACTERS + 1} characters" in str(caught.value)
    assert f"the limit is {MAX_QUERY_CHARACTERS} (KNOWLEDGE_MAX_QUERY_CHARACTERS)" in str(
        caught.value
    )


def test_a_query_at_the_term_limit_is_searched_and_one_with_more_is_refused(registry):
    assert len(query_with(MAX_QUERY_TERMS + 1)) <= MAX_QUERY_CHARACTERS
    search_nodes(query_with(MAX_QUERY_TERMS), registry=registry)
    with pytest.raises(KnowledgeError) as caught:
        search_nodes(query_with(MAX_QUERY_TERMS + 1), registry=registry)
    assert f"query has {MAX_QUERY_TERMS + 1} terms" in str(caught.value)
    assert f"the limit is {MAX_QUERY_TERMS} (KNOWLEDGE_MAX_QUERY_TERMS)" in str(caught.value)


def test_the_query_limits_are_settings(registry, settings):
    settings.KNOWLEDGE_MAX_QUERY_CHARACTERS = 20
    settings.KNOWLEDGE_MAX_QUERY_TERMS = 2
    search_nodes("send email", registry=registry)
    with pytest.raises(KnowledgeError, match="the limit is 2 "):
        search_nodes("send an email", registry=registry)
    with pytest.raises(KnowledgeError, match="the limit is 20 "):
        search_nodes("send " + "e" * 20, registry=registry)


@pytest.mark.parametrize("field", ["node_type", "subtype"])
def test_a_node_name_at_the_length_limit_is_looked_up_and_one_longer_is_refused(registry, field):
    node = {"node_type": "ACTION", "subtype": "HTTP_REQUEST"}
    [entry] = get_node_details([{**node, field: "X" * MAX_NAME_CHARACTERS}], registry=registry)
    assert "not found" in entry["error"]
    with pytest.raises(KnowledgeError) as caught:
        get_node_details(
            [node, {**node, field: "X" * (MAX_NAME_CHARACTERS + 1)}], registry=registry
        )
    assert f"nodes[1].{field} has {MAX_NAME_CHARACTERS + 1} characters" in str(caught.value)
    assert f"the limit is {MAX_NAME_CHARACTERS}" in str(caught.value)


def test_a_type_filter_over_the_name_limit_is_refused(registry):
    with pytest.raises(
        KnowledgeError, match=f"type_filter has .* the limit is {MAX_NAME_CHARACTERS}"
    ):
        get_node_types("A" * (MAX_NAME_CHARACTERS + 1), registry=registry)
    with pytest.raises(KnowledgeError, match=f"the limit is {MAX_NAME_CHARACTERS}"):
        search_nodes("send", type_filter="A" * (MAX_NAME_CHARACTERS + 1), registry=registry)
    with pytest.raises(KnowledgeError, match="not a node type"):
        get_node_types("A" * MAX_NAME_CHARACTERS, registry=registry)


# The caps as callers see them: a tool error (isError) over /mcp and REST, never a 500.


def call(client, key, name, arguments):
    response = modern(client, "tools/call", {"name": name, "arguments": arguments}, key=key)
    assert response.status_code == 200, response.content
    return json.loads(response.content)["result"]


@pytest.mark.usefixtures("loaded_catalog")
def test_over_mcp_a_query_of_120000_words_is_a_tool_error_naming_the_limit(client, key):
    query = " ".join(f"t{n}s" for n in range(120_000))
    started = time.perf_counter()
    result = call(client, key, "search_nodes", {"query": query})
    assert time.perf_counter() - started < 2
    assert result["isError"] is True
    assert f"the limit is {MAX_QUERY_CHARACTERS}" in result["content"][0]["text"]
    result = call(client, key, "search_nodes", {"query": query_with(MAX_QUERY_TERMS + 1)})
    assert result["isError"] is True
    assert f"the limit is {MAX_QUERY_TERMS}" in result["content"][0]["text"]


@pytest.mark.usefixtures("loaded_catalog")
def test_over_mcp_a_long_node_name_is_a_tool_error_naming_the_limit(client, key):
    node = {"node_type": "ACTION", "subtype": "S" * (MAX_NAME_CHARACTERS + 1)}
    result = call(client, key, "get_node_details", {"nodes": [node]})
    assert result["isError"] is True
    assert f"the limit is {MAX_NAME_CHARACTERS}" in result["content"][0]["text"]


@pytest.mark.usefixtures("loaded_catalog")
def test_over_mcp_a_resource_with_a_long_name_is_invalid_params(client, key):
    uri = "nodespec://ACTION/" + "S" * 5000
    response = modern(client, "resources/read", {"uri": uri}, key=key)
    error = json.loads(response.content)["error"]
    assert error["code"] == -32602
    assert f"at most {MAX_NAME_CHARACTERS} characters" in error["message"]


@pytest.mark.usefixtures("loaded_catalog")
def test_over_rest_the_same_caps_are_tool_errors(client, key):
    for arguments, limit in [
        ({"query": query_of(MAX_QUERY_CHARACTERS + 1)}, MAX_QUERY_CHARACTERS),
        ({"query": query_with(MAX_QUERY_TERMS + 1)}, MAX_QUERY_TERMS),
    ]:
        response = client.post(
            "/api/v1/mcp/invoke",
            {"name": "search_nodes", "arguments": arguments},
            content_type="application/json",
            headers=auth_headers(key),
        )
        assert response.status_code == 200
        result = response.json()["result"]
        assert result["isError"] is True
        assert f"the limit is {limit}" in result["content"][0]["text"]


def test_the_input_schemas_show_the_length_limits():
    from mcp_endpoint.features.tools import TOOLS

    search = TOOLS["search_nodes"].input_schema()["properties"]["query"]
    assert search["maxLength"] == MAX_QUERY_CHARACTERS
    assert str(MAX_QUERY_TERMS) in search["description"]
    node = TOOLS["get_node_details"].input_schema()["$defs"]["NodeRef"]["properties"]
    assert node["subtype"]["maxLength"] == node["node_type"]["maxLength"] == MAX_NAME_CHARACTERS


# Which requests the ASGI app answers in the event loop.


def tools_call(name: str, arguments: dict, **extra) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": envelope(), **extra}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})


@pytest.mark.parametrize(
    "body",
    [
        tools_call("get_node_types", {}),
        tools_call("get_node_types", {"type_filter": "ACTION"}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
        "",
    ],
)
def test_fixed_cost_requests_are_answered_in_the_loop(body):
    assert asgi._fixed_cost(body.encode(), body.encode())


@pytest.mark.parametrize(
    "body",
    [
        tools_call("search_nodes", {"query": "send an email"}),
        tools_call("some_workflow", {}),
        # A second name, or a name written with escapes, is not taken for get_node_types.
        tools_call("get_node_types", {}, name2="x").replace("name2", "name"),
        '{"method": "tools/call", "params": {"name": "search\\u005fnodes"}}',
        '{"method": "tools\\/call", "params": {"name": "search_nodes"}}',
        json.dumps({"method": "resources/read", "params": {"uri": "nodespec://ACTION/IF"}}),
        # Parsing and validating grows with the body, whatever it calls.
        json.dumps({"method": "ping", "params": {"pad": "x" * asgi.INLINE_BODY_BYTES}}),
    ],
)
def test_requests_whose_cost_grows_with_the_caller_go_to_a_thread(db, body):
    assert not asgi._fixed_cost(body.encode(), body.encode())


def test_node_details_decline_costly_work_in_an_event_loop_and_do_it_on_a_thread(registry):
    """get_node_details may start in the loop (a few exact names are lookups), but refuses a
    misspelt name, or more than a few nodes, there; the ASGI app then answers on a thread."""
    exact = [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]
    misspelt = [{"node_type": "ACTION", "subtype": "HTTP_REQEST"}]
    many = exact * (EVENT_LOOP_NODES + 1)

    async def in_the_loop(nodes):
        return get_node_details(nodes, registry=registry)

    assert asyncio.run(in_the_loop(exact))[0]["subtype"] == "HTTP_REQUEST"
    for nodes in (misspelt, many):
        with pytest.raises(SynchronousOnlyOperation):
            asyncio.run(in_the_loop(nodes))
    corrected = get_node_details(misspelt, registry=registry)[0]
    assert corrected["subtype"] == "HTTP_REQUEST"
    assert len(get_node_details(many, registry=registry)) == EVENT_LOOP_NODES + 1


def test_over_the_asgi_app_a_misspelt_name_is_answered_on_a_thread_counted_once(
    transactional_db, loaded_catalog, worker_thread
):
    """Admitted in the loop, answered on a thread as the caller admitted there: with a limit
    of one request a minute, counting it again on the thread would refuse it (429)."""
    key = make_key(rate_limit_per_minute=1)
    authenticate(
        {"authorization": f"Bearer {key}"}, "127.0.0.1"
    )  # remembered: admitted in the loop
    body = tools_call(
        "get_node_details", {"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQEST"}]}
    ).encode()
    headers = {
        "host": "localhost",
        "content-type": "application/json",
        "accept": "application/json",
        "authorization": f"Bearer {key}",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "get_node_details",
    }
    arguments = {
        "method": "POST",
        "headers": headers,
        "raw_headers": list(headers.items()),
        "body": body,
        "client_address": "127.0.0.1",
        "scheme": "http",
        "path": "/mcp",
    }
    refresh_registry()
    refresh_workflow_tools()
    assert asgi._fixed_cost(body, body)
    assert admission.answers_without_database("POST", headers, body)

    outbound = asyncio.run(answer_in_app(arguments))
    assert outbound.status == 200, outbound.body
    result = json.loads(outbound.body)["result"]
    assert result["structuredContent"]["nodes"][0]["subtype"] == "HTTP_REQUEST"
    assert "HTTP_REQEST" in result["structuredContent"]["nodes"][0]["warning"]


def test_a_small_workflow_call_starts_in_the_loop(db):
    """Its run goes on the reply's threads (graphs/execution/follow.py): answering the request
    itself only wraps the call. A large body still goes to a thread."""
    import_file("loops.yaml")
    small = tools_call("sum_to", {"n": 3})
    large = tools_call("sum_to", {"n": 3, "pad": "x" * asgi.INLINE_BODY_BYTES})

    assert asgi._fixed_cost(small.encode(), small.encode())
    assert not asgi._fixed_cost(large.encode(), large.encode())


def test_a_legacy_sse_post_is_admitted_in_the_loop_only_when_small():
    small, large = b'{"method": "ping"}', b'{"method": "ping", "pad": "%s"}' % (b"x" * 5000)
    assert asgi._fixed_cost(small, None)
    assert not asgi._fixed_cost(large, None)
