"""Tools and prompts that need the client's answer (elicitation, sampling, roots) midway.

A handler that needs input is a generator: it yields a list of `InputRequest`s, receives a
dict of the client's responses by key, and finally returns its result. The same handler
serves both protocol eras:

- 2026-07-28 (stateless): `run_stateless` replays the handler with the answers so far and,
  while something is missing, returns an `InputRequiredResult` whose `requestState` carries
  the answers, encrypted and authenticated, valid for ten minutes, for the one caller and
  the one call (method, tool or prompt name, arguments) that received it.
- 2025 revisions: each request goes to the client on the call's own stream, and the call
  waits for the client's answer (`StreamedInteraction`, driven by
  mcp_endpoint/protocol/client_requests.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.server.request_state import AESGCMRequestStateCodec, InvalidRequestState
from pydantic import BaseModel, ValidationError

from mcp_endpoint.jsonrpc.errors import RpcError


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

# How long a requestState stays valid, counted from the round that issued it: long enough for
# a person to answer an elicitation, short enough that a state copied out of a log or a
# proxy's history soon stops being replayable.
REQUEST_STATE_TTL_SECONDS = 600
# How far ahead of this instance's clock another instance's may be (a state it issued is
# then "from the future" here).
CLOCK_SKEW_SECONDS = 60
# The claims' layout; a state of another layout is refused (as if not from this server).
_STATE_VERSION = 1
# The method each kind of params belongs to: the state is bound to it.
_METHODS: dict[type, str] = {
    types.CallToolRequestParams: "tools/call",
    types.GetPromptRequestParams: "prompts/get",
}


@dataclass(frozen=True)
class StateBinding:
    """Who and what a requestState is valid for: the caller (API key identity) and the call
    (method, tool or prompt name, arguments). A state is accepted only by the same."""

    caller: str
    method: str
    name: str
    arguments: Mapping[str, Any] | None = None

    def claims(self) -> dict[str, str]:
        return {
            "p": _digest(self.caller),
            "m": self.method,
            "t": self.name,
            "a": _digest(dict(self.arguments or {})),
        }


def binding_for(params: Any, caller: str) -> StateBinding:
    """The binding of a tools/call or prompts/get request made by `caller`."""
    return StateBinding(
        caller=caller,
        method=_METHODS.get(type(params), type(params).__name__),
        name=str(getattr(params, "name", "")),
        arguments=getattr(params, "arguments", None),
    )


def _digest(value: Any) -> str:
    encoded = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(encoded).digest()[:18]).decode()


# Set from SECRET_KEY (and SECRET_KEY_FALLBACKS) when the app starts; the SDK's AES-GCM codec
# encrypts and authenticates the claims (mcp.server.request_state), we check the claims.
_codec: AESGCMRequestStateCodec | None = None


def configure(secret: str | bytes, fallbacks: Iterable[str | bytes] = ()) -> None:
    """Derive the state keys from Django's secret: the first seals, every one unseals, so a
    state issued before a key rotation (the old key in SECRET_KEY_FALLBACKS) still reads."""
    global _codec
    raw = [key.encode() if isinstance(key, str) else key for key in (secret, *fallbacks)]
    # A fallback equal to the secret would be the same key twice, which the codec refuses.
    keys = dict.fromkeys(hashlib.sha256(b"mcp-request-state:" + key).digest() for key in raw)
    _codec = AESGCMRequestStateCodec(list(keys))


def _the_codec() -> AESGCMRequestStateCodec:
    if _codec is None:
        raise RuntimeError("interaction.configure() runs at start-up (mcp_endpoint.apps).")
    return _codec


def seal(answers: Responses, binding: StateBinding, *, now: float | None = None) -> str:
    """The answers so far, as an opaque string the client must echo unchanged, with the
    same call, within REQUEST_STATE_TTL_SECONDS."""
    issued = time.time() if now is None else now
    claims = {
        "v": _STATE_VERSION,
        "iat": issued,
        "exp": issued + REQUEST_STATE_TTL_SECONDS,
        **binding.claims(),
        "s": answers,
    }
    return _the_codec().seal(json.dumps(claims, separators=(",", ":")).encode())


def _refused(problem: str) -> RpcError:
    return RpcError(
        types.INVALID_PARAMS,
        f"requestState {problem}: retry the call without requestState (and without "
        "inputResponses) and answer the input requests again.",
    )


def unseal(state: str, binding: StateBinding, *, now: float | None = None) -> Responses:
    """Read a sealed state back. A state that was altered, has expired, or was issued to
    another caller or for another call raises `RpcError` (-32602) saying so."""
    try:
        claims = json.loads(_the_codec().unseal(state))
        version, issued, expires, answers = claims["v"], claims["iat"], claims["exp"], claims["s"]
    except (InvalidRequestState, ValueError, KeyError, TypeError):
        raise _refused("was altered or is not from this server") from None
    if version != _STATE_VERSION or not isinstance(answers, dict):
        raise _refused("was altered or is not from this server")
    current = time.time() if now is None else now
    # Stated positively, so that a claim that is not a number fails too.
    if not (
        isinstance(issued, int | float)
        and isinstance(expires, int | float)
        and issued <= current + CLOCK_SKEW_SECONDS
        and current < expires
    ):
        minutes = REQUEST_STATE_TTL_SECONDS // 60
        raise _refused(f"has expired (a state is valid for {minutes} minutes)")
    expected = binding.claims()
    if not hmac.compare_digest(str(claims.get("p")), expected["p"]):
        raise _refused("was issued to another caller")
    if (claims.get("m"), claims.get("t")) != (expected["m"], expected["t"]):
        raise _refused(
            f"was issued for another tool or prompt than {binding.name!r} ({binding.method})"
        )
    if claims.get("a") != expected["a"]:
        raise _refused("was issued for other arguments (send the same arguments in every round)")
    return answers


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
    binding: StateBinding,
) -> types.Result:
    """Run an interactive handler with the answers gathered so far (2026-07-28 rounds); the
    state it returns, and the one it accepts, are bound to `binding`."""
    answers = unseal(request_state, binding) if request_state else {}
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
                if (
                    request.key not in answers
                    and isinstance(answer, dict)
                    and valid_answer(request.method, answer)
                ):
                    answers[request.key] = answer
            missing = [r for r in requests if r.key not in answers]
            if missing:
                # Validated into the request models by the result's constructor.
                asked: dict[str, Any] = {
                    r.key: {"method": r.method, "params": r.params} for r in missing
                }
                return types.InputRequiredResult(
                    input_requests=asked, request_state=seal(answers, binding)
                )
            requests = handler.send({r.key: answers[r.key] for r in requests})
    except StopIteration as finished:
        return finished.value


@dataclass(frozen=True)
class StreamedInteraction:
    """An interactive handler of a 2025 call, to be driven over the call's own event stream:
    each `InputRequest` it yields goes to the client, and the answers go back in
    (mcp_endpoint/protocol/client_requests.py)."""

    handler: Interactive


def run_handler(handler: Callable[[], Any], params: Any, context: Any) -> Any:
    """Call a handler; when it asks the client for input, drive it as the era asks: rounds
    of InputRequiredResult (2026-07-28), or requests on the call's own stream (2025, sent by
    mcp_endpoint/protocol/client_requests.py). `context` is the call's `CallContext`."""
    outcome = handler()
    if not isinstance(outcome, Generator):
        return outcome
    if context.stateless:
        outcome.close()
        return run_stateless(
            handler,
            getattr(params, "input_responses", None),
            getattr(params, "request_state", None),
            binding_for(params, context.caller.actor),
        )
    return StreamedInteraction(outcome)
