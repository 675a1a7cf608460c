"""Approval nodes decided by the caller (`approvers: caller`): asking the calling client's user.

How a call's client is asked depends on its era and what it declared, decided once when the
call is made (`channel_of`):

- `stream`: a 2025-06-18 or later session whose client declared `elicitation`, on a stream
  (SSE, stdio): an `elicitation/create` request on the call's own stream; the core sends it
  and hands the client's answer back (`client_answered`);
- `rounds`: a 2026-07-28 client that declared `elicitation`: the call answers with an
  `InputRequiredResult` whose `requestState` names the run (sealed, for this caller and this
  call); the client calls again with its answer (`round_answered`), and that call follows the
  same run to its end;
- `task`: a 2026-07-28 client of the tasks extension that declared `elicitation` too: the call
  becomes a task at once, `tasks/get` shows it `input_required` with the request
  (`task_input_requests`), and `tasks/update` carries the answer (`client_answered`).

Any other client (2025-03-26, which has no elicitation; JSON answers only; no `elicitation`
capability; REST) cannot be asked: its run is failed where it would wait, with a tool error
saying why (`unreachable`). An `accept` approves (its content is the node's form), `decline`
rejects, `cancel` cancels the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp import types

from graphs.execution.approvals.decisions import Decider, DecisionError, decide
from graphs.execution.approvals.waits import WaitingFor, waiting_for
from graphs.execution.control import run_cancel, run_unanswerable
from mcp_endpoint.jsonrpc.context import CallContext
from mcp_endpoint.jsonrpc.interaction import (
    StateBinding,
    binding_for,
    seal,
    unseal,
    valid_answer,
)

# The key of the approval's request among a round's or a task's input requests.
INPUT_KEY = "approval"
ELICIT = "elicitation/create"
# The first revision with elicitation.
_ELICITATION_SINCE = "2025-06-18"


@dataclass(frozen=True)
class Channel:
    """How a call's client can be asked: `kind` stream, rounds or task, or "" with `why` not."""

    kind: str
    why: str = ""


# A call that never asks (its workflow has no approval node that asks its caller).
NOT_ASKED = Channel("")


def channel_of(context: CallContext, *, may_become_task: bool) -> Channel:
    """How the client of this call can answer an approval node that asks it."""
    declared = "elicitation" in context.client_capabilities
    version = context.era.version
    if context.stateless:
        if not declared:
            return Channel("", _undeclared(version))
        return Channel("task" if may_become_task else "rounds")
    if version < _ELICITATION_SINCE:
        return Channel(
            "",
            f"its protocol version {version} has no elicitation (2025-06-18 and later have)",
        )
    if not context.session_id:
        return Channel("", "the call came without a session (REST, or an MCP call outside one)")
    if not declared:
        return Channel("", _undeclared(version))
    if not context.streams:
        return Channel(
            "",
            "it takes JSON answers only, and the question goes on an event stream: accept "
            "text/event-stream",
        )
    return Channel("stream")


def _undeclared(version: str) -> str:
    return (
        f"its client did not declare the elicitation capability ({version}): a client that "
        "can show its user a form declares it"
    )


def elicitation(waiting: WaitingFor) -> dict[str, Any]:
    """The `elicitation/create` params that ask what the run waits for."""
    schema = waiting.form or {"type": "object", "properties": {}}
    return {"message": waiting.message, "requestedSchema": schema}


def input_requests(waiting: WaitingFor) -> dict[str, Any]:
    """The approval as a round's or a task's `inputRequests`."""
    return {INPUT_KEY: {"method": ELICIT, "params": elicitation(waiting)}}


def unreachable(run_id: int, tool: str, waiting: WaitingFor, why: str) -> str:
    """Fail a run whose client cannot be asked; the tool error's message."""
    message = (
        f"Workflow {tool!r} needs its caller's approval at node {waiting.node!r} "
        f"({waiting.message}), but this client cannot be asked: {why}. The run ({run_id}) "
        "was failed rather than left waiting; call it from a client that supports "
        "elicitation, or have reviewers decide (approvers: reviewers)."
    )
    run_unanswerable(run_id=run_id, why=message)
    return message


def client_answered(run_id: int, caller: str, answer: dict[str, Any] | None) -> str | None:
    """Take the client's answer to the approval its run waits for: accept approves (the
    content is the form), decline rejects, cancel cancels the run, none at all fails it.
    None when taken, else why not (a tool error's message)."""
    if answer is None or not valid_answer(ELICIT, answer):
        why = (
            "the client did not answer its approval request"
            if answer is None
            else "the client's answer to its approval request was not an elicitation result"
        )
        run_unanswerable(run_id=run_id, why=f"Failed: {why}.")
        return f"Run {run_id} failed: {why}."
    action = answer.get("action")
    if action == "cancel":
        run_cancel(run_id=run_id, reason="The caller cancelled at its approval request")
        return None
    decision = "approved" if action == "accept" else "rejected"
    decider = Decider("client", caller, caller, frozenset({caller}))
    content = answer.get("content") if action == "accept" else None
    try:
        decide(run_id, decision, decider, form=content or None)
    except DecisionError as exc:
        # The client will not be asked again: its run ends saying why, rather than waiting.
        run_unanswerable(run_id=run_id, why=f"Failed: the client's answer was refused: {exc}")
        return exc.message
    return None


def round_result(
    run_id: int, waiting: WaitingFor, binding: StateBinding
) -> types.InputRequiredResult:
    """The `InputRequiredResult` asking about run `run_id`; its `requestState` is bound to
    this caller and this call, so only the same call by the same caller continues it."""
    return types.InputRequiredResult(
        input_requests=input_requests(waiting),
        request_state=seal({"run": {"id": run_id}}, binding),
    )


def round_answered(params: types.CallToolRequestParams, caller: str) -> int | str:
    """A 2026-07-28 call that answers a round: the run it continues, once the answer is
    taken; else why not. Raises the `RpcError` of a state that is not this call's."""
    state = unseal(params.request_state or "", binding_for(params, caller))
    run = state.get("run")
    run_id = run.get("id") if isinstance(run, dict) else None
    if not isinstance(run_id, int):
        return "the requestState names no run: call the tool again without it"
    response = (params.input_responses or {}).get(INPUT_KEY)
    if response is None:
        return f"inputResponses holds no {INPUT_KEY!r} answer: send the answer to the request"
    answer = response.model_dump(by_alias=True, exclude_none=True, mode="json")
    problem = client_answered(run_id, caller, answer)
    return run_id if problem is None else problem


def task_input_requests(run_id: int) -> dict[str, Any] | None:
    """What a run task asks its client now (`tasks/get`'s inputRequests), or None."""
    waiting = waiting_for(run_id)
    if waiting is None or waiting.approvers != "caller":
        return None
    return input_requests(waiting)
