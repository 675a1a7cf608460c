"""tools/list shows each caller the tools it may call, and says how long it may keep the list:
never shared between callers, and not at all by a builder, who changes it (issue 25, items 2
and 8). The REST API lists the same way and refuses a missing scope with 403."""

from __future__ import annotations

import pytest

from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.models import Scope
from tests.mcp_endpoint.helpers import (
    auth_headers,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
)

pytestmark = pytest.mark.django_db(transaction=True)

LOOPS = ["classify", "is_zero", "sum_to"]
READ = [Scope.TOOLS_READ]
READ_EXECUTE = [Scope.TOOLS_READ, Scope.TOOLS_EXECUTE]


def own_tools(scopes: list[str]) -> list[str]:
    return [name for name, tool in TOOLS.items() if tool.scope in scopes]


def listed(client, key: str, url: str = "/mcp") -> list[str]:
    return [
        tool["name"] for tool in result(modern(client, "tools/list", key=key, url=url))["tools"]
    ]


@pytest.mark.parametrize(
    ("scopes", "workflows"),
    [(READ, False), (READ_EXECUTE, True), ([*READ_EXECUTE, Scope.RUNS_READ], True), (None, True)],
)
def test_tools_list_shows_a_caller_only_the_tools_its_scopes_let_it_call(
    client, loops, scopes, workflows
):
    names = listed(client, make_key(scopes))

    expected = own_tools(scopes if scopes is not None else list(Scope.values))
    assert names == [*expected, *(LOOPS if workflows else [])]


def test_a_list_kept_for_one_caller_is_never_answered_to_another(client, loops):
    """The answers are kept with their JSON (core.py): by what the list depends on."""
    everything, reader = make_key(), make_key(READ)

    assert len(listed(client, everything)) == len(TOOLS) + len(LOOPS)
    assert listed(client, reader) == own_tools(READ)
    assert len(listed(client, everything)) == len(TOOLS) + len(LOOPS)
    session = legacy_session(client, reader)
    answer = legacy(client, session, "tools/list", key=reader)
    assert [tool["name"] for tool in result(answer)["tools"]] == own_tools(READ)


def test_every_tool_listed_is_one_the_caller_may_call(client, loops):
    reader = make_key(READ)

    for name in listed(client, reader):
        called = modern(client, "tools/call", {"name": name, "arguments": {}}, key=reader)
        assert called.status_code == 200, (name, called.content)
    refused = modern(client, "tools/call", {"name": "sum_to", "arguments": {}}, key=reader)
    assert refused.status_code == 403


def test_a_group_endpoint_lists_its_workflows_only_to_callers_that_may_call_them(client, loops):
    assert listed(client, make_key(READ), url="/mcp/loops") == []
    assert listed(client, make_key(READ_EXECUTE), url="/mcp/loops") == LOOPS


def test_tools_list_is_private_and_a_builder_is_told_not_to_keep_it(client):
    """A builder that publishes a workflow sees it on its next tools/list; a client that
    caches as told would otherwise miss it for the ttl."""
    for scope in (Scope.WORKFLOWS_WRITE, Scope.WORKFLOWS_PUBLISH, Scope.WORKFLOWS_ADMIN):
        builder = result(modern(client, "tools/list", key=make_key([*READ, scope])))
        assert (builder["ttlMs"], builder["cacheScope"]) == (0, "private"), scope
    agent = result(modern(client, "tools/list", key=make_key(READ_EXECUTE)))
    assert agent["ttlMs"] > 0
    assert agent["cacheScope"] == "private"


# REST.


def test_rest_lists_only_the_tools_a_key_may_call(client, loops):
    response = client.get("/api/v1/mcp/tools", headers=auth_headers(make_key(READ)))

    assert response.status_code == 200
    assert [tool["name"] for tool in response.json()["result"]["tools"]] == own_tools(READ)


def test_rest_refuses_a_tool_that_needs_a_scope_the_key_lacks_with_403_naming_it(client):
    response = client.post(
        "/api/v1/mcp/invoke",
        {"name": "create_workflow", "arguments": {"definition": {}}},
        content_type="application/json",
        headers=auth_headers(make_key(READ_EXECUTE)),
    )

    assert response.status_code == 403
    assert "workflows:write" in response.json()["error"]
