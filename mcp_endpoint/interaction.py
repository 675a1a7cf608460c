"""Tools and prompts that need the client's answer (elicitation, sampling, roots) midway.

A handler that needs input is a generator: it yields a list of `InputRequest`s, receives a
dict of the client's responses by key, and finally returns its result. The same handler
serves both protocol eras:

- 2026-07-28 (stateless): `run_stateless` replays the handler with the answers so far and,
  while something is missing, returns an `InputRequiredResult` whose `requestState` carries
  the answers, sealed with an HMAC so a client cannot alter them.
- 2025 revisions: the HTTP view sends each request to the client on the call's event stream
  and waits for the answer the client posts back (`LegacyInteraction`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from mcp import types
from pydantic import BaseModel, ValidationError

from mcp_endpoint.errors import RpcError


@dataclass(frozen=True)
class InputRequest:
    key: str
    method: str  # elicitation/create, sampling/createMessage or roots/list
    params: dict[str, Any]


Responses = dict[str, dict[str, Any]]
Interactive = Generator[list[InputRequest], Responses, types.Result]

# What a valid answer to each kind of request looks like.
_ANSWER_MODELS: dict[str, Any] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}

# Set from SECRET_KEY when the app starts; the state is meaningless without it.
_secret = b""


def configure(secret: str) -> None:
    global _secret
    _secret = hashlib.sha256(b"mcp-request-state:" + secret.encode()).digest()


def seal(answers: Responses) -> str:
    """The answers so far, as an opaque string the client must echo unchanged."""
    payload = base64.urlsafe_b64encode(json.dumps(answers, sort_keys=True).encode()).decode()
    mac = hmac.new(_secret, payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{mac}"


def unseal(state: str) -> Responses:
    """Read a sealed state back; a state that was altered raises `RpcError`."""
    payload, _, mac = state.rpartition(".")
    expected = hmac.new(_secret, payload.encode(), hashlib.sha256).hexdigest()
    if not payload or not hmac.compare_digest(mac, expected):
        raise RpcError(
            types.INVALID_PARAMS,
            "requestState was altered or is not from this server: retry the call without "
            "requestState and answer the input requests again.",
        )
    return json.loads(base64.urlsafe_b64decode(payload))


def valid_answer(method: str, answer: Any) -> bool:
    """True when `answer` is a well-formed response to a request of kind `method`."""
    model = _ANSWER_MODELS.get(method)
    if model is None or not isinstance(answer, dict):
        return False
    try:
        model.model_validate(answer, by_name=False)
    except ValidationError:
        return False
    return True


def run_stateless(
    start: Callable[[], Interactive],
    input_responses: dict[str, Any] | None,
    request_state: str | None,
) -> types.Result:
    """Run an interactive handler with the answers gathered so far (2026-07-28 rounds)."""
    answers = unseal(request_state) if request_state else {}
    offered = {
        key: value.model_dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(value, BaseModel)
        else value
        for key, value in (input_responses or {}).items()
    }
    handler = start()
    try:
        requests = next(handler)
        while True:
            for request in requests:
                answer = offered.get(request.key)
                if request.key not in answers and valid_answer(request.method, answer):
                    answers[request.key] = answer
            missing = [r for r in requests if r.key not in answers]
            if missing:
                return types.InputRequiredResult(
                    input_requests={
                        r.key: {"method": r.method, "params": r.params} for r in missing
                    },
                    request_state=seal(answers),
                )
            requests = handler.send({r.key: answers[r.key] for r in requests})
    except StopIteration as finished:
        return finished.value


@dataclass
class LegacyInteraction:
    """An interactive handler waiting to be driven over a 2025 session's event stream.

    The HTTP view sends each `InputRequest` to the client and sends the answers back in;
    `finish` (set by the caller) serialises the final result for the session's version.
    """

    handler: Interactive
    finish: Callable[[types.Result], dict[str, Any]] | None = None


def run_handler(handler: Callable[[], Any], params: Any, context: Any) -> Any:
    """Call a handler; when it asks the client for input, drive it as the transport allows:
    rounds of InputRequiredResult (2026-07-28), or the open call's event stream (2025 over
    HTTP). `context` is the call's `dispatch.CallContext`."""
    outcome = handler()
    if not isinstance(outcome, Generator):
        return outcome
    if context.stateless:
        outcome.close()
        return run_stateless(
            handler,
            getattr(params, "input_responses", None),
            getattr(params, "request_state", None),
        )
    if context.transport == "http":
        return LegacyInteraction(outcome)
    outcome.close()
    raise RpcError(
        types.INVALID_REQUEST,
        "This call needs answers from the client midway, which this transport cannot carry; "
        "use Streamable HTTP.",
    )
