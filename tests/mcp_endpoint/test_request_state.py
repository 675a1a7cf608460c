"""requestState (2026-07-28 InputRequiredResult rounds) is sealed, expires, and is bound to
the caller and to the call: another caller, tool, prompt or set of arguments gets -32602."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from django.conf import settings
from mcp import types

from mcp_endpoint.features import extensions
from mcp_endpoint.features.extensions import ExtraTool
from mcp_endpoint.jsonrpc import interaction
from mcp_endpoint.jsonrpc.errors import RpcError
from mcp_endpoint.jsonrpc.interaction import (
    REQUEST_STATE_TTL_SECONDS,
    InputRequest,
    StateBinding,
    binding_for,
    run_stateless,
    seal,
    unseal,
)
from tests.mcp_endpoint.helpers import make_key, modern, result, rpc_error

ANSWERS = {"confirm": {"action": "accept", "content": {"ok": True}}}
BINDING = StateBinding("key:alice", "tools/call", "book_trip", {"city": "Lyon", "nights": 2})
T0 = 1_800_000_000.0
RETRY = "retry the call without requestState"


@pytest.fixture(autouse=True)
def _keys_from_settings():
    """Tests that configure other keys leave the ones the app started with."""
    yield
    interaction.configure(settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS)


def refusal(state: str, binding: StateBinding = BINDING, now: float = T0) -> str:
    with pytest.raises(RpcError) as raised:
        unseal(state, binding, now=now)
    assert raised.value.code == types.INVALID_PARAMS
    assert RETRY in raised.value.message
    return raised.value.message


def test_a_state_reads_back_for_the_same_caller_and_call():
    state = seal(ANSWERS, BINDING, now=T0)
    assert unseal(state, BINDING, now=T0 + 1) == ANSWERS


def test_the_answers_are_not_readable_in_the_state():
    state = seal({"secret": {"action": "accept", "content": {"pin": "4711"}}}, BINDING, now=T0)
    assert "4711" not in state
    assert "alice" not in state


@pytest.mark.parametrize("tamper", [lambda s: s + "-TAMPERED", lambda s: s[:-4] + "AAAA",
                                    lambda s: s[:20] + ("B" if s[20] != "B" else "C") + s[21:],
                                    lambda s: "", lambda s: "not-a-state"])  # fmt: skip
def test_an_altered_state_is_refused(tamper):
    state = seal(ANSWERS, BINDING, now=T0)
    assert "was altered or is not from this server" in refusal(tamper(state))


def test_a_state_sealed_under_another_secret_is_refused():
    interaction.configure("another-server-" + "y" * 40)
    state = seal(ANSWERS, BINDING, now=T0)
    interaction.configure(settings.SECRET_KEY)
    assert "not from this server" in refusal(state)


def test_a_state_from_before_a_key_rotation_still_reads():
    interaction.configure("the-old-secret-" + "z" * 40)
    state = seal(ANSWERS, BINDING, now=T0)
    interaction.configure(settings.SECRET_KEY, ["the-old-secret-" + "z" * 40])
    assert unseal(state, BINDING, now=T0) == ANSWERS


def test_a_state_expires():
    state = seal(ANSWERS, BINDING, now=T0)
    assert unseal(state, BINDING, now=T0 + REQUEST_STATE_TTL_SECONDS - 1) == ANSWERS
    message = refusal(state, now=T0 + REQUEST_STATE_TTL_SECONDS)
    assert "has expired (a state is valid for 10 minutes)" in message
    assert "expired" in refusal(state, now=T0 + 86400)


def test_a_state_from_the_future_is_refused():
    """Issued by a clock more than the tolerated skew ahead: not trusted to expire in time."""
    state = seal(ANSWERS, BINDING, now=T0 + 3600)
    assert "expired" in refusal(state, now=T0)


def test_a_state_is_refused_to_another_caller():
    state = seal(ANSWERS, BINDING, now=T0)
    other = StateBinding("key:mallory", BINDING.method, BINDING.name, BINDING.arguments)
    assert "was issued to another caller" in refusal(state, other)


def test_a_state_is_refused_for_another_tool():
    state = seal(ANSWERS, BINDING, now=T0)
    other = StateBinding(BINDING.caller, BINDING.method, "cancel_trip", BINDING.arguments)
    assert "was issued for another tool or prompt than 'cancel_trip'" in refusal(state, other)


def test_a_state_is_refused_for_a_prompt_of_the_same_name():
    state = seal(ANSWERS, BINDING, now=T0)
    other = StateBinding(BINDING.caller, "prompts/get", BINDING.name, BINDING.arguments)
    assert "another tool or prompt" in refusal(state, other)


@pytest.mark.parametrize(
    "arguments",
    [{"city": "Lyon", "nights": 3}, {"city": "Lyon"}, {"city": "Lyon", "nights": "2"}, None],
)
def test_a_state_is_refused_with_other_arguments(arguments):
    state = seal(ANSWERS, BINDING, now=T0)
    other = StateBinding(BINDING.caller, BINDING.method, BINDING.name, arguments)
    assert "was issued for other arguments" in refusal(state, other)


def test_the_order_of_the_arguments_and_absent_arguments_do_not_matter():
    state = seal(ANSWERS, BINDING, now=T0)
    reordered = StateBinding(BINDING.caller, BINDING.method, BINDING.name,
                             {"nights": 2, "city": "Lyon"})  # fmt: skip
    assert unseal(state, reordered, now=T0) == ANSWERS
    bare = StateBinding("key:alice", "tools/call", "ask", None)
    assert unseal(seal(ANSWERS, bare, now=T0), replace(bare, arguments={}), now=T0) == ANSWERS


def test_the_binding_of_a_request_names_its_method():
    tool = types.CallToolRequestParams(name="book_trip", arguments={"city": "Lyon"})
    prompt = types.GetPromptRequestParams(name="book_trip", arguments={"city": "Lyon"})
    assert binding_for(tool, "key:a").method == "tools/call"
    assert binding_for(prompt, "key:a").method == "prompts/get"
    assert binding_for(tool, "key:a").claims()["a"] == binding_for(prompt, "key:a").claims()["a"]


# The rounds, as a tool runs them.


def _ask(key: str, field: str) -> InputRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}}
    return InputRequest(key, "elicitation/create", {"message": "?", "requestedSchema": schema})


def _two_questions():
    first = yield [_ask("name", "name")]
    second = yield [_ask("color", "c")]
    return types.CallToolResult(
        content=[
            types.TextContent(
                type="text",
                text=f"{first['name']['content']['name']} likes {second['color']['content']['c']}",
            )
        ]
    )


def _answer(**content) -> dict:
    return {"action": "accept", "content": content}


def test_the_rounds_carry_the_answers_to_the_end():
    first = run_stateless(_two_questions, None, None, BINDING)
    assert isinstance(first, types.InputRequiredResult)
    assert list(first.input_requests) == ["name"]
    second = run_stateless(_two_questions, {"name": _answer(name="Ada")}, first.request_state,
                           BINDING)  # fmt: skip
    assert isinstance(second, types.InputRequiredResult)
    assert list(second.input_requests) == ["color"]
    final = run_stateless(_two_questions, {"color": _answer(c="green")}, second.request_state,
                          BINDING)  # fmt: skip
    assert isinstance(final, types.CallToolResult)
    assert final.content[0].text == "Ada likes green"


def test_a_round_with_a_state_of_another_call_is_refused():
    first = run_stateless(_two_questions, None, None, BINDING)
    other = StateBinding(BINDING.caller, BINDING.method, BINDING.name, {"city": "Paris"})
    with pytest.raises(RpcError, match="other arguments"):
        run_stateless(_two_questions, {"name": _answer(name="Ada")}, first.request_state, other)


def test_a_round_after_the_state_expired_is_refused(monkeypatch):
    first = run_stateless(_two_questions, None, None, BINDING)
    later = time.time() + REQUEST_STATE_TTL_SECONDS + 1
    monkeypatch.setattr(interaction.time, "time", lambda: later)
    with pytest.raises(RpcError, match="has expired"):
        run_stateless(_two_questions, {"name": _answer(name="Ada")}, first.request_state, BINDING)


# Through the endpoint: the caller is the API key, known before the tool runs.


def _ask_name(arguments, context):
    answers = yield [_ask("name", "name")]
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=answers["name"]["content"]["name"])]
    )


@pytest.fixture
def asking_tool(monkeypatch):
    tool = types.Tool(name="ask_name", input_schema={"type": "object"})
    monkeypatch.setitem(extensions.installed().tools, "ask_name", ExtraTool(tool, _ask_name))
    return "ask_name"


def test_over_http_a_state_is_refused_to_another_key(client, key, asking_tool):
    call = {"name": asking_tool, "arguments": {}}
    first = result(modern(client, "tools/call", call, key=key))
    assert first["resultType"] == "input_required"
    retry = {**call, "inputResponses": {"name": _answer(name="Ada")},
             "requestState": first["requestState"]}  # fmt: skip

    error = rpc_error(modern(client, "tools/call", retry, key=make_key()))
    assert error["code"] == types.INVALID_PARAMS
    assert "another caller" in error["message"]
    assert RETRY in error["message"]

    error = rpc_error(modern(client, "tools/call", {**retry, "arguments": {"x": 1}}, key=key))
    assert "other arguments" in error["message"]

    done = result(modern(client, "tools/call", retry, key=key))
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "Ada"
