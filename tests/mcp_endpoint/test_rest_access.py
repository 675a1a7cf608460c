"""Who may use the REST API: keys and scopes on the tool routes, the service token or an
allowed network on the internal ones, and refusals that say how to get in."""

from __future__ import annotations

import pytest

from tests.mcp_endpoint.helpers import auth_headers, make_key

TOOLS = "/api/v1/mcp/tools"
INTERNAL = "/api/v1/mcp/tools/internal"
INVOKE = "/api/v1/mcp/invoke"


@pytest.fixture
def full_key(db) -> str:
    return make_key()


def test_the_tool_routes_refuse_a_caller_without_a_key(client, db):
    response = client.get(TOOLS)

    assert response.status_code == 401
    assert "send an API key" in response.json()["error"]


def test_the_tool_routes_refuse_a_key_without_their_scope(client, db):
    response = client.get(TOOLS, headers=auth_headers(make_key(scopes=["health:check"])))

    assert response.status_code == 403
    assert "tools:read" in response.json()["error"]


def test_the_internal_routes_refuse_an_api_key_from_outside_the_allowed_networks(client, full_key):
    response = client.get(INTERNAL, headers=auth_headers(full_key))

    assert response.status_code == 403
    assert "MCP_INTERNAL_TOKEN" in response.json()["error"]


def test_the_internal_routes_refuse_a_wrong_service_token(client, db, settings):
    settings.MCP_INTERNAL_TOKEN = "the-service-token"

    assert client.get(INTERNAL, headers={"X-Internal-Token": "a-guess"}).status_code == 403


def test_the_internal_routes_accept_the_service_token(client, db, settings):
    settings.MCP_INTERNAL_TOKEN = "the-service-token"

    response = client.get(INTERNAL, headers={"X-Internal-Token": "the-service-token"})

    assert response.status_code == 200
    assert response.json()["tools"]


def test_the_internal_routes_accept_a_client_in_an_allowed_network(client, db, settings):
    settings.MCP_INTERNAL_NETWORKS = ["127.0.0.0/8"]

    assert client.get(INTERNAL).status_code == 200


def test_a_body_that_is_not_json_says_how_to_write_one(client, full_key):
    # Found by tests/mcp_endpoint/test_rest_schema.py: django-ninja answered with its own
    # undocumented {"detail": "Cannot parse request body"}.
    response = client.post(
        INVOKE, b"\x00", content_type="application/json", headers=auth_headers(full_key)
    )

    assert response.status_code == 400
    assert response.json() == {
        "error": "Invalid request: the body is not valid JSON. Send a JSON object with "
        'Content-Type: application/json, e.g. {"name": "get_node_types", "arguments": {}}.'
    }


def test_a_body_over_the_upload_limit_is_413_naming_the_limit(client, full_key, settings):
    body = '{"name": "search_nodes", "arguments": {"query": "' + "a" * 3_000_000 + '"}}'
    response = client.post(
        INVOKE, data=body, content_type="application/json", headers=auth_headers(full_key)
    )

    assert response.status_code == 413
    error = response.json()["error"]
    assert str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in error
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in error
