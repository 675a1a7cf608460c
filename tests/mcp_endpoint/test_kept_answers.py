"""Knowledge calls answered from the answers the core keeps (mcp_endpoint/protocol/
tool_answers.py): the bytes of the answer built for the same call, with the request's own id;
never older than the catalog; never past the caller's scopes."""

from __future__ import annotations

import json

import orjson
import pytest

from mcp_endpoint.jsonrpc.encoding import encode_json
from mcp_endpoint.protocol import tool_answers
from nodespecs.knowledge import service as knowledge
from nodespecs.knowledge.detail_levels import DETAIL_LEVELS
from nodespecs.models import NodeSpec
from tests.mcp_endpoint.helpers import (
    BOTH,
    legacy,
    legacy_session,
    make_key,
    modern,
    result,
    rpc_error,
    sse_messages,
)
from tests.nodespecs.test_admin import change_url, form_data

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

HTTP_REQUEST = {"nodes": [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]}


def details(client, key, arguments=HTTP_REQUEST, **options):
    return modern(
        client, "tools/call", {"name": "get_node_details", "arguments": arguments}, key=key,
        **options,
    )  # fmt: skip


@pytest.fixture
def built(monkeypatch) -> list[int]:
    """One entry for each get_node_details answer built (not read from the kept answers)."""
    builds: list[int] = []
    build = knowledge.get_node_details

    def counted(*args, **kwargs):
        builds.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(knowledge, "get_node_details", counted)
    return builds


@pytest.mark.parametrize("request_id", [7, -1, 2**70, "abc", 'q"u\\ote', "héllo ✓", "\ud800"])
def test_a_kept_answer_is_the_built_one_with_the_request_id(
    client, key, loaded_catalog, built, request_id
):
    first = details(client, key, request_id=1)
    kept = details(client, key, request_id=request_id)

    assert built == [1]
    assert kept.status_code == 200
    assert kept["Content-Type"] == "application/json"
    message = json.loads(kept.content)
    assert message == {**json.loads(first.content), "id": request_id}
    try:
        orjson.dumps(request_id)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits
        assert b'"id":' + json.dumps(request_id).encode() + b"," in kept.content
    else:
        assert kept.content == encode_json(message)


def test_an_admin_edit_of_a_spec_is_in_the_very_next_answer(
    client, key, loaded_catalog, author, built
):
    before = result(details(client, key))["structuredContent"]["nodes"][0]
    assert result(details(client, key))["structuredContent"]["nodes"][0] == before
    assert built == [1]
    spec = NodeSpec.objects.get(node_type="ACTION", subtype="HTTP_REQUEST")
    shown = spec.document()
    edited = shown | {"description": "Send one HTTP request, edited just now."}

    client.force_login(author)
    response = client.post(change_url(spec), form_data(edited, shown=shown))
    assert response.status_code == 302, response.content

    after = result(details(client, key))["structuredContent"]["nodes"][0]
    assert after["description"] == "Send one HTTP request, edited just now."
    assert after != before
    assert built == [1, 1]


def test_a_kept_answer_is_refused_to_a_caller_without_the_scope(client, key, loaded_catalog):
    assert details(client, key).status_code == 200
    reader = make_key(scopes=["tools:read"])

    refused = details(client, reader, request_id=9)

    assert refused.status_code == 403
    error = rpc_error(refused)
    assert "tools:execute" in error["message"]
    assert json.loads(refused.content)["id"] == 9


def test_each_era_and_each_call_has_its_own_answer(client, key, loaded_catalog, built):
    modern_answer = result(details(client, key))
    session = legacy_session(client, key)
    params = {"name": "get_node_details", "arguments": HTTP_REQUEST}
    legacy_answer = result(legacy(client, session, "tools/call", params, key=key))
    again = result(legacy(client, session, "tools/call", params, key=key, request_id="b"))
    minimal = result(details(client, key, arguments={**HTTP_REQUEST, "detail": "minimal"}))

    assert built == [1, 1, 1]
    assert modern_answer["resultType"] == "complete"
    assert "resultType" not in legacy_answer
    assert again == legacy_answer
    assert minimal["structuredContent"] != modern_answer["structuredContent"]


def test_a_call_with_a_progress_token_gets_its_notifications_every_time(
    client, key, loaded_catalog
):
    for _ in range(2):
        response = details(client, key, meta={"progressToken": "p"}, accept=BOTH)
        messages = sse_messages(response)
        progress = [m for m in messages if m.get("method") == "notifications/progress"]
        assert len(progress) == 2
        assert messages[-1]["result"]["structuredContent"]["nodes"]


def test_the_kept_answers_are_bounded(client, key, loaded_catalog, monkeypatch, built):
    """Past KEPT answers they are all dropped: the calls after build theirs again."""
    monkeypatch.setattr(tool_answers, "KEPT", 2)
    first, second, third = ({**HTTP_REQUEST, "detail": level} for level in DETAIL_LEVELS)
    for arguments in (first, second, first, third, first, first):
        assert details(client, key, arguments=arguments).status_code == 200
    # first, second built; first kept; third built (dropping both); first built, then kept.
    assert len(built) == 4


def test_the_kept_answers_are_bounded_in_bytes_and_a_large_one_is_not_kept(
    client, key, loaded_catalog, monkeypatch, built
):
    """Many nodes in full detail answer hundreds of KB: a caller varying such calls must not
    fill the process's memory with them."""
    minimal = {**HTTP_REQUEST, "detail": "minimal"}
    size = len(encode_json(result(details(client, key))))
    monkeypatch.setattr(tool_answers, "_kept", {})
    monkeypatch.setattr(tool_answers, "_kept_bytes", 0)
    monkeypatch.setattr(tool_answers, "KEPT_ANSWER_BYTES", size - 1)
    for _ in range(2):
        assert details(client, key).status_code == 200
    assert len(built) == 3  # over KEPT_ANSWER_BYTES: built every time

    # Room for the one answer and its params, not for a second beside it.
    monkeypatch.setattr(tool_answers, "KEPT_ANSWER_BYTES", 10 * size)
    monkeypatch.setattr(tool_answers, "KEPT_BYTES", size + 200)
    for arguments in (HTTP_REQUEST, HTTP_REQUEST, minimal, HTTP_REQUEST):
        assert details(client, key, arguments=arguments).status_code == 200
    # Built, kept; `minimal` built, dropping it; built again.
    assert len(built) == 6
