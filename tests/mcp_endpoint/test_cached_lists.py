"""tools/list (and the other fixed lists) answered from a cache of encoded results."""

from __future__ import annotations

import json

import orjson
import pytest
from mcp import types

from mcp_endpoint.features import extensions
from mcp_endpoint.features.extensions import ExtraTool
from mcp_endpoint.jsonrpc.encoding import encode_json
from tests.mcp_endpoint.helpers import legacy, legacy_session, modern, result


@pytest.mark.parametrize("request_id", [7, -1, 2**70, "abc", 'q"u\\ote', "héllo ✓", "\ud800", ""])
def test_a_cached_answer_carries_the_request_id_as_json_would(client, key, request_id):
    """The cached result is spliced into the response: the bytes must be those of encoding
    the whole message, whatever the id."""
    modern(client, "tools/list", key=key)  # fills the cache
    response = modern(client, "tools/list", key=key, request_id=request_id)
    assert response.status_code == 200
    message = json.loads(response.content)
    assert message["id"] == request_id
    try:
        orjson.dumps(request_id)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits
        # orjson refuses it: the id alone is encoded by the standard library.
        assert b'"id":' + json.dumps(request_id).encode() + b"," in response.content
    else:
        assert response.content == encode_json(message)
    assert response["Content-Type"] == "application/json"


def test_a_cached_answer_is_the_same_in_a_session(client, key):
    session = legacy_session(client, key)
    first = legacy(client, session, "tools/list", key=key, request_id="a")
    second = legacy(client, session, "tools/list", key=key, request_id="b")
    assert json.loads(first.content)["result"] == json.loads(second.content)["result"]
    assert json.loads(second.content)["id"] == "b"
    assert second["Mcp-Session-Id"] == session


def test_a_new_tools_generation_is_served_at_once(client, key, monkeypatch):
    """Tools that change at run time bump `tools_generation()`; the cached list follows."""
    before = [tool["name"] for tool in result(modern(client, "tools/list", key=key))["tools"]]
    tool = types.Tool(name="late_tool", input_schema={"type": "object"})
    monkeypatch.setitem(extensions.installed().tools, "late_tool", ExtraTool(tool, dict))
    after = [tool["name"] for tool in result(modern(client, "tools/list", key=key))["tools"]]
    assert after == [*before, "late_tool"]
