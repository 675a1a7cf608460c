"""A 2025 call that asks its client for input midway (elicitation, sampling, roots).

The interactive handler (mcp_endpoint/jsonrpc/interaction.py) yields requests for the client; each
goes out on the call's own stream as a JSON-RPC request, and the client's answer comes back as a
message of its own (a POST within the session, a line on stdio), which the transport keeps with
`sessions.reply_store`. `ask` waits for it there, so the answer may reach any instance.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from mcp import types

from graphs.execution.follow import Threads
from mcp_endpoint.calls.caller_approvals import ELICIT, client_answered
from mcp_endpoint.calls.workflow_calls import ClientAsked, WorkflowCall
from mcp_endpoint.jsonrpc.interaction import StreamedInteraction
from mcp_endpoint.jsonrpc.results import Era
from mcp_endpoint.protocol import sessions

logger = logging.getLogger(__name__)

REPLY_WAIT_SECONDS = 120
REPLY_POLL_SECONDS = 0.05

Message = dict[str, Any]


async def _await_reply(session_id: str, request_id: str) -> Message | None:
    deadline = time.monotonic() + REPLY_WAIT_SECONDS
    while time.monotonic() < deadline:
        reply = await sync_to_async(sessions.reply_take)(session_id, request_id)
        if reply is not None:
            return reply
        await asyncio.sleep(REPLY_POLL_SECONDS)
    return None


def _stopped(call_id: Any, problem: str) -> Message:
    return {
        "jsonrpc": "2.0",
        "id": call_id,
        "error": {"code": types.INTERNAL_ERROR, "message": f"Stopped: {problem}."},
    }


async def ask(
    interaction: StreamedInteraction,
    call_id: Any,
    session_id: str,
    era: Era,
    method: str,
    threads: Threads,
) -> AsyncIterator[Message]:
    """Drive the interaction's handler: send each of its requests, wait for the client's
    answer, send the answers back in, and end with the `method` call's response as `era`
    shapes it, or an error saying why it stopped."""
    handler = interaction.handler
    try:
        requests = next(handler)
        while True:
            answers = {}
            for request in requests:
                server_id = f"{call_id}:{request.key}:{uuid.uuid4().hex[:8]}"
                yield {
                    "jsonrpc": "2.0",
                    "id": server_id,
                    "method": request.method,
                    "params": request.params,
                }
                reply = await _await_reply(session_id, server_id)
                if reply is None or "result" not in reply:
                    problem = (
                        f"no answer to {request.method} within {REPLY_WAIT_SECONDS} s"
                        if reply is None
                        else f"the client refused {request.method}: {reply.get('error')}"
                    )
                    handler.close()
                    yield _stopped(call_id, problem)
                    return
                answers[request.key] = reply["result"]
            requests = handler.send(answers)
    except StopIteration as finished:
        yield {"jsonrpc": "2.0", "id": call_id, "result": era.shape(method, finished.value)}


async def ask_for_run(
    asked: ClientAsked, call: WorkflowCall, threads: Threads
) -> AsyncIterator[Message]:
    """Ask the client of a workflow call what its run waits for (an approval node with
    approvers: caller), and hand its answer, or its silence, to the run."""
    request_id = f"{call.request_id}:approval:{uuid.uuid4().hex[:8]}"
    yield {"jsonrpc": "2.0", "id": request_id, "method": ELICIT, "params": asked.params}
    reply = await _await_reply(call.request.session_id, request_id)
    answer = reply.get("result") if reply is not None else None
    problem = await threads.short(
        partial(client_answered, asked.run_id, call.request.caller, answer)
    )
    if problem is not None:
        logger.info("Run %s: the client's approval was not taken: %s", asked.run_id, problem)
