"""Whatever arrives, /mcp answers with a 4xx and a JSON-RPC error, never a 500."""

from __future__ import annotations

import json

import pytest

from mcp_endpoint.features.tools import TOOLS
from tests.mcp_endpoint.helpers import (
    JSON,
    MODERN,
    envelope,
    legacy,
    legacy_session,
    modern,
    post,
    result,
    rpc_error,
)

pytestmark = pytest.mark.django_db(transaction=True)

ERAS = ["2026-07-28", "2025"]


@pytest.fixture
def session(client, key) -> str:
    return legacy_session(client, key)


@pytest.fixture(params=ERAS)
def era_headers(request, key) -> dict[str, str]:
    """Headers that put a request in one era: the 2026 version header, or a live session."""
    headers = {"Authorization": f"Bearer {key}"}
    if request.param == "2025":
        headers["Mcp-Session-Id"] = request.getfixturevalue("session")
    else:
        headers["MCP-Protocol-Version"] = MODERN
    return headers


def json_rpc_error(response, status: int, code: int) -> dict:
    assert response.status_code == status, response.content
    error = rpc_error(response)
    assert error["code"] == code, error
    return error


# Bodies that are not JSON, or not a JSON-RPC object.


@pytest.mark.parametrize("body", [b"{", b'{"jsonrpc": "2.0",', b"nope", b"\x00\x01", b""])
def test_a_body_that_is_not_json_is_a_parse_error(client, era_headers, body):
    error = json_rpc_error(post(client, body, raw=True, headers=era_headers), 400, -32700)
    assert "not JSON" in error["message"]


def test_bytes_that_are_not_utf8_are_a_parse_error(client, era_headers):
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping\xff\xfe"}'
    json_rpc_error(post(client, body, raw=True, headers=era_headers), 400, -32700)


@pytest.mark.parametrize("body", [3, "tools/list", None, True, []])
def test_json_that_is_not_an_object_is_an_invalid_request(client, era_headers, body):
    json_rpc_error(post(client, body, headers=era_headers), 400, -32600)


@pytest.mark.parametrize(("content_type", "status"), [("text/plain", 415), ("", 400)])
def test_a_post_that_is_not_application_json_is_refused(client, key, content_type, status):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope()}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    response = post(
        client,
        body,
        content_type=content_type,
        headers={**headers, "Authorization": f"Bearer {key}"},
    )
    error = json_rpc_error(response, status, -32600)
    assert "application/json" in error["message"]


def test_application_json_with_a_charset_is_accepted(client, key):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope()}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
    response = post(
        client,
        body,
        content_type="application/json; charset=utf-8",
        headers={**headers, "Authorization": f"Bearer {key}"},
    )
    assert len(result(response)["tools"]) == len(TOOLS)


# Size.


def test_a_body_over_the_limit_is_413_naming_the_limit(client, era_headers, settings):
    settings.MCP_MAX_BODY_BYTES = 1000
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 2000}}
    error = json_rpc_error(post(client, body, headers=era_headers), 413, -32600)
    assert "1000 bytes" in error["message"]
    assert "MCP_MAX_BODY_BYTES" in error["message"]


def test_a_body_under_the_limit_is_served(client, key, settings):
    settings.MCP_MAX_BODY_BYTES = 1000
    assert len(result(modern(client, "tools/list", key=key))["tools"]) == len(TOOLS)


def test_an_initialize_over_the_limit_is_413(client, key, settings):
    settings.MCP_MAX_BODY_BYTES = 1000
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "pad": "x" * 2000},
    }
    response = post(client, body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 413
    assert "Mcp-Session-Id" not in response


# Ids and params of the wrong type.


@pytest.mark.parametrize("request_id", [True, None, 1.5, [1], {"a": 1}])
def test_an_id_of_the_wrong_type_is_an_invalid_request(client, era_headers, request_id):
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    if "MCP-Protocol-Version" in era_headers:
        body["params"] = {"_meta": envelope()}
        era_headers = {**era_headers, "Mcp-Method": "tools/list"}
    error = json_rpc_error(post(client, body, headers=era_headers), 400, -32600)
    assert "id" in error["message"]


def test_a_method_that_is_not_a_string_is_an_invalid_request(client, era_headers):
    body = {"jsonrpc": "2.0", "id": 1, "method": 42, "params": {"_meta": envelope()}}
    error = json_rpc_error(post(client, body, headers=era_headers), 400, -32600)
    assert "method" in error["message"]


def test_tools_call_params_that_are_a_list_are_invalid_params_in_a_session(client, key, session):
    response = legacy(client, session, "tools/call", [1, 2], key=key)
    assert response.status_code == 200
    error = rpc_error(response)
    assert error["code"] == -32602
    assert "params" in error["message"]


def test_tools_call_params_that_are_a_list_are_invalid_params_in_2026(client, key):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, 2]}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
    response = post(client, body, headers={**headers, "Authorization": f"Bearer {key}"})
    json_rpc_error(response, 400, -32602)


def test_a_tool_name_that_is_a_number_is_invalid_params_naming_the_field(client, key, session):
    response = legacy(client, session, "tools/call", {"name": 5, "arguments": {}}, key=key)
    error = rpc_error(response)
    assert error["code"] == -32602
    assert "name" in error["message"]


def test_a_tool_name_that_is_a_number_is_refused_in_2026(client, key):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": 5, "arguments": {}, "_meta": envelope()}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "5"}
    response = post(client, body, headers={**headers, "Authorization": f"Bearer {key}"})
    assert response.status_code == 400
    assert rpc_error(response)["code"] in (-32602, -32020)


def test_tool_arguments_that_are_a_list_are_invalid_params_naming_them(client, key):
    params = {"name": "search_nodes", "arguments": ["email"]}
    error = json_rpc_error(modern(client, "tools/call", params, key=key), 400, -32602)
    assert "arguments" in error["message"]


def test_a_resource_uri_that_is_a_number_is_invalid_params(client, key, session):
    response = legacy(client, session, "resources/read", {"uri": 7}, key=key)
    error = rpc_error(response)
    assert error["code"] == -32602
    assert "uri" in error["message"]


def test_a_meta_that_is_not_an_object_is_invalid_params_in_a_session(lenient_client, key, session):
    response = legacy(lenient_client, session, "tools/list", {"_meta": 5}, key=key)
    assert response.status_code < 500
    assert rpc_error(response)["code"] == -32602


@pytest.mark.parametrize("cursor", ["\u00b2", "9" * 5000], ids=["superscript-two", "5000-digits"])
def test_an_odd_numeric_cursor_is_invalid_params(lenient_client, key, cursor):
    response = modern(lenient_client, "resources/list", {"cursor": cursor}, key=key)
    assert response.status_code == 400
    assert rpc_error(response)["code"] == -32602


# Origin and Host.


def test_a_foreign_origin_is_403(client, key):
    response = modern(client, "tools/list", key=key, headers={"Origin": "http://evil.example"})
    assert response.status_code == 403
    assert "http://evil.example" in response.content.decode()


def test_a_foreign_origin_cannot_open_a_session(client, key):
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
    }
    headers = {"Origin": "http://evil.example", "Authorization": f"Bearer {key}"}
    response = post(client, body, headers=headers)
    assert response.status_code == 403
    assert "Mcp-Session-Id" not in response


def test_a_localhost_origin_is_allowed_on_a_localhost_host(client, key):
    headers = {"Origin": "http://localhost:5173", "Host": "localhost:8000"}
    assert len(result(modern(client, "tools/list", key=key, headers=headers))["tools"]) == len(
        TOOLS
    )


def test_a_localhost_origin_is_refused_on_a_public_host(client, key):
    headers = {"Origin": "http://localhost:5173", "Host": "testserver"}
    assert modern(client, "tools/list", key=key, headers=headers).status_code == 403


def test_a_same_origin_request_is_allowed(client, key):
    headers = {"Origin": "http://testserver", "Host": "testserver"}
    result(modern(client, "tools/list", key=key, headers=headers))


def test_a_configured_origin_is_allowed(client, key, settings):
    settings.MCP_ALLOWED_ORIGINS = ["https://app.example"]
    result(modern(client, "tools/list", key=key, headers={"Origin": "https://app.example"}))


def test_a_host_not_in_allowed_hosts_is_refused(client, key):
    response = modern(client, "tools/list", key=key, headers={"Host": "evil.example"})
    assert 400 <= response.status_code < 500


# Fuzz: odd bodies in both eras.

ENVELOPE = envelope()

# (name, body bytes, eras in which it is a known bug, why)
ODD_BODIES: list[tuple[str, bytes, set[str], str]] = [
    ("empty", b"", set(), ""),
    ("whitespace", b"  \n\t ", set(), ""),
    ("empty-object", b"{}", set(), ""),
    ("only-jsonrpc", b'{"jsonrpc":"2.0"}', set(), ""),
    ("jsonrpc-1.0", b'{"jsonrpc":"1.0","id":1,"method":"ping"}', set(), ""),
    ("jsonrpc-number", b'{"jsonrpc":2.0,"id":1,"method":"ping"}', set(), ""),
    ("method-null", b'{"jsonrpc":"2.0","id":1,"method":null}', set(), ""),
    ("method-number", b'{"jsonrpc":"2.0","id":1,"method":42}', set(), ""),
    ("method-empty", b'{"jsonrpc":"2.0","id":1,"method":""}', set(), ""),
    ("method-object", b'{"jsonrpc":"2.0","id":1,"method":{"a":1}}', set(), ""),
    ("params-null", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}', set(), ""),
    ("params-string", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}', set(), ""),
    (
        "name-null",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null}}',
        set(),
        "",
    ),
    ("id-list", b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', set(), ""),
    ("id-true", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', set(), ""),
    ("id-infinite", b'{"jsonrpc":"2.0","id":1e999,"method":"ping"}', set(), ""),
    ("id-nan", b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', set(), ""),
    ("id-huge", b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', set(), ""),
    ("batch-empty", b"[]", set(), ""),
    ("batch-numbers", b"[" + b"1," * 5000 + b"1]", set(), ""),
    ("string", b'"tools/list"', set(), ""),
    ("null", b"null", set(), ""),
    ("false", b"false", set(), ""),
    ("float", b"3.14", set(), ""),
    ("nested-arrays-50", b"[" * 50 + b"]" * 50, set(), ""),
    ("nested-objects-50", b'{"a":' * 50 + b"1" + b"}" * 50, set(), ""),
    (
        "nested-arrays-100000",
        b"[" * 100_000 + b"]" * 100_000,
        set(),
        "",
    ),
    ("truncated", b'{"jsonrpc":"2.0","id":1,"method":"ping"', set(), ""),
    ("not-utf8", b'{"jsonrpc":"2.0","id":1,"method":"\xc3\x28"}', set(), ""),
    ("unicode-method", '{"jsonrpc":"2.0","id":"ü","method":"ünï/☃"}'.encode(), set(), ""),
    (
        "surrogate-method",
        # The JSON escape decodes to a lone surrogate, which no UTF-8 encoder accepts.
        b'{"jsonrpc":"2.0","id":1,"method":"\\ud800"}',
        set(),
        "",
    ),
    (
        "surrogate-id",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": "\ud800",
                "method": "no/such-method",
                "params": {"_meta": ENVELOPE},
            }
        ).encode(),
        set(),
        "",
    ),
    (
        "meta-number",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":5}}',
        set(),
        "",
    ),
    (
        "cursor-superscript",
        '{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"cursor":"²"}}'.encode(),
        set(),
        "",
    ),
    (
        "enveloped-cursor-number",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "resources/list",
                "params": {"cursor": 5, "_meta": ENVELOPE},
            }
        ).encode(),
        set(),
        "",
    ),
    (
        "enveloped-progress-token-object",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/list",
                "params": {"_meta": {**ENVELOPE, "progressToken": {"a": 1}}},
            }
        ).encode(),
        set(),
        "",
    ),
    (
        "enveloped-uri-null",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "resources/read",
                "params": {"uri": None, "_meta": ENVELOPE},
            }
        ).encode(),
        set(),
        "",
    ),
    ("posted-response", b'{"jsonrpc":"2.0","id":1,"result":{}}', set(), ""),
    ("posted-error", b'{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}', set(), ""),
    ("notification", b'{"jsonrpc":"2.0","method":"notifications/initialized"}', set(), ""),
]


def _fuzz_cases():
    for era in ERAS:
        for name, body, buggy, reason in ODD_BODIES:
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if era in buggy else []
            yield pytest.param(era, body, id=f"{era}-{name}", marks=marks)


def _header_safe(value) -> bool:
    return isinstance(value, str) and value.isascii() and value.isprintable()


@pytest.mark.parametrize(("era", "body"), list(_fuzz_cases()))
def test_an_odd_body_gets_a_json_rpc_error_or_202_never_a_500(lenient_client, key, era, body):
    headers = {"Authorization": f"Bearer {key}"}
    if era == "2025":
        headers["Mcp-Session-Id"] = legacy_session(lenient_client, key)
    else:
        headers["MCP-Protocol-Version"] = MODERN
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError, RecursionError):
            method = None
        if _header_safe(method):
            headers["Mcp-Method"] = method
    response = post(lenient_client, body, raw=True, headers=headers)
    assert response.status_code < 500, response.content[:300]
    if response.status_code == 202:
        assert response.content == b""
        return
    assert response["Content-Type"].startswith(JSON)
    error = rpc_error(response)
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str)
    assert error["message"]
