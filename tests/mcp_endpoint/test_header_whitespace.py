"""Header values with whitespace around them (RFC 9110, 5.5; MCP's SEP-2243): the whitespace
is not part of the value, so routing headers padded with it still match the body."""

from __future__ import annotations

import pytest

from tests.mcp_endpoint.helpers import MODERN, modern, result

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("pad", [" ", "\t", "  \t "])
def test_padded_routing_headers_match_the_body(client, key, pad):
    headers = {
        "MCP-Protocol-Version": f"{pad}{MODERN}{pad}",
        "Mcp-Method": f"{pad}tools/call{pad}",
        "Mcp-Name": f"{pad}get_node_types{pad}",
    }
    answer = modern(client, "tools/call", {"name": "get_node_types"}, key=key, headers=headers)

    assert answer.status_code == 200, answer.content
    assert "FLOW" in result(answer)["structuredContent"]


def test_whitespace_inside_a_value_still_makes_it_another_value(client, key):
    headers = {"Mcp-Name": "get_node _types"}
    answer = modern(client, "tools/call", {"name": "get_node_types"}, key=key, headers=headers)

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32020
