"""Running a compiled tool: from its entry node to its exit node, one node at a time.

Node outputs, as seed 003 says: entry, the tool's arguments; mcp, the called tool's result
(see ``results``); transform, the JSONata value; switch, the id of the node it routes to;
exit, the previous node's output unchanged (falsy values included), once it is checked
against the tool's outputSchema (outputs.py): one that breaks it fails the run at the exit;
approval, the decision (``{"decision", "by", "comment", "form", "decided_at"}``), which the run
waits for: ``execute`` returns a ``Paused`` there, and goes on along ``routes[decision]`` when
it is called again with a ``Resume`` (stops/resuming.py).

A run may also start at any node with the outputs of the executions before it given (a
``Resume``: a re-run from a node), and pause before chosen nodes (``breakpoints``) or before
every node after the first (``step``): ``execute`` then returns an ``AtBreakpoint``, and a
``Resume`` at that node goes on from there.

Before each node the cancel token and both execution limits are checked. An mcp node's call
is retried, after ``backoff * 2**attempt`` seconds, when ``call_tool`` raises (a transport
failure or a timeout), not when the tool answers with an error result. All state of a run
lives in its ``_Run``, so any number of threads may execute one ``CompiledTool`` at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from typing import Any

from mcp.types import CallToolResult

from graphs.engine.arguments import fill
from graphs.engine.cancel import CancelToken
from graphs.engine.compiler import CompiledNode, CompiledTool
from graphs.engine.definition import ExecutionLimits, Node
from graphs.engine.errors import GraphRunError, RunCancelled
from graphs.engine.history import RunHistory
from graphs.engine.language.expressions import Expression, ExpressionTimeout, Guard
from graphs.engine.language.jsonlogic import evaluate
from graphs.engine.observer import NodeRecord, NullObserver, Observer
from graphs.engine.results import error_text, tool_output
from graphs.engine.stops.approvals import MAX_MESSAGE_CHARS, Paused
from graphs.engine.stops.resuming import AtBreakpoint, Resume

#: ``call_tool(server_name, tool_name, arguments, timeout_seconds)``: raises on a transport
#: failure or timeout, else returns the result (which may have ``is_error`` set).
CallTool = Callable[[str, str, dict[str, Any], float | None], CallToolResult]
#: ``mocked(node)``: what a test run's mcp node answers instead of calling its server, or
#: None to call it for real.
MockedCall = Callable[[Node], CallToolResult | None]
#: ``decided(node)``: the output a test run's approval node takes instead of waiting (the
#: decision), or None to wait.
MockedDecision = Callable[[Node], dict[str, Any] | None]

DEFAULT_LIMITS = ExecutionLimits()


def execute(
    compiled: CompiledTool,
    arguments: dict[str, Any],
    *,
    call_tool: CallTool,
    limits: ExecutionLimits = DEFAULT_LIMITS,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
    mocked: MockedCall | None = None,
    decided: MockedDecision | None = None,
    resume: Resume | None = None,
    breakpoints: Collection[str] = (),
    step: bool = False,
) -> Any:
    """Run the tool with these arguments and return its exit node's output, a ``Paused``
    when it reached an approval node, or an ``AtBreakpoint`` before a node in `breakpoints`
    (before every node but the first when `step`). `resume` goes on from its node: with an
    approval's decision, or running that node (never pausing before it). `mocked` answers
    the mcp nodes of a test run that are not to call their servers, `decided` its approval
    nodes.

    Raises GraphRunError (RunCancelled when cancelled) naming the node and the kind of failure.
    """
    run = _Run(
        compiled, arguments, call_tool, limits, observer or NullObserver(), cancel, mocked, decided
    )
    run.breakpoints = frozenset(breakpoints)
    run.step = step
    if resume is None:
        return run.run()
    return run.resumed(resume)


class _Pause(Exception):
    """Not an error: how an approval node that must wait, or a breakpoint, leaves the walk."""

    def __init__(self, paused: Paused | AtBreakpoint) -> None:
        self.paused = paused


class _Run:
    """One execution of a tool; used by one thread, for one call of ``execute``."""

    def __init__(
        self,
        compiled: CompiledTool,
        arguments: dict[str, Any],
        call_tool: CallTool,
        limits: ExecutionLimits,
        observer: Observer,
        cancel: CancelToken | None,
        mocked: MockedCall | None = None,
        decided: MockedDecision | None = None,
    ) -> None:
        self.compiled = compiled
        self.arguments = arguments
        self.call_tool = call_tool
        self.limits = limits
        self.observer = observer
        self.cancel = cancel or CancelToken()  # one token, so backoff waits are cancellable
        self.started = time.monotonic()
        self.guard = Guard(self.started + limits.max_execution_time_ms / 1000)
        self.history = RunHistory()
        self.bindings = {**self.history.bindings, **self.guard.bindings}
        self.mocked = mocked
        self.decided = decided
        self.breakpoints: frozenset[str] = frozenset()
        self.step = False
        # An mcp node's arguments given by a re-run, for the first node it runs.
        self.tool_arguments: dict[str, Any] | None = None

    def run(self) -> Any:
        self.observer.run_started(self.compiled.tool.name, self.arguments)
        return self._walked(self.compiled.tool.entry, pause_first=True)

    def resumed(self, resume: Resume) -> Any:
        """Go on at the resume's node: end its approval with the decision, or run it."""
        self.started = time.monotonic() - resume.elapsed_ms / 1000
        self.guard = Guard(self.started + self.limits.max_execution_time_ms / 1000)
        self.bindings = {**self.history.bindings, **self.guard.bindings}
        for node_id, output in resume.executions:
            self.history.record(node_id, output)
        if resume.decision is None:
            self.tool_arguments = resume.tool_arguments
            return self._walked(resume.node_id, pause_first=False)
        try:
            next_id = self._decided(resume)
        except GraphRunError as error:
            self.observer.run_finished(None, error)
            raise
        return self._walked(next_id, pause_first=True)

    def _walked(self, node_id: str, *, pause_first: bool) -> Any:
        try:
            result = self._walk(node_id, pause_first)
        except _Pause as pause:
            return pause.paused
        except GraphRunError as error:
            self.observer.run_finished(None, error)
            raise
        self.observer.run_finished(result, None)
        return result

    def _walk(self, node_id: str, pause_first: bool) -> Any:
        pausing = pause_first
        while True:
            compiled = self.compiled.nodes[node_id]
            if pausing and (self.step or node_id in self.breakpoints):
                raise _Pause(self._at_breakpoint(compiled.node))
            pausing = True
            self._check_before(compiled.node)
            output, next_id = self._step(compiled)
            if compiled.node.type == "exit":
                return output
            assert next_id is not None  # the checks give every other node somewhere to go
            node_id = next_id

    def _at_breakpoint(self, node: Node) -> AtBreakpoint:
        history = self.history
        return AtBreakpoint(
            node_id=node.id,
            index=len(history.outputs),
            iteration=len(history.by_node.get(node.id, ())) + 1,
            executions=tuple(zip(history.nodes, history.outputs, strict=True)),
            elapsed_ms=(time.monotonic() - self.started) * 1000,
        )

    def _check_before(self, node: Node) -> None:
        if self.cancel.cancelled:
            raise self._cancelled(f"before node {node.id!r} ran", node)
        limits = self.limits
        if len(self.history.outputs) >= limits.max_node_executions:
            raise GraphRunError(
                f"maxNodeExecutions ({limits.max_node_executions}) reached before node "
                f"{node.id!r} ran: the graph loops without reaching its exit; raise "
                "executionLimits.maxNodeExecutions or fix the loop condition",
                node.id,
                "limit",
                limit="maxNodeExecutions",
            )
        elapsed_ms = (time.monotonic() - self.started) * 1000
        if elapsed_ms >= limits.max_execution_time_ms:
            raise GraphRunError(
                f"maxExecutionTimeMs ({limits.max_execution_time_ms}) reached before node "
                f"{node.id!r} ran ({elapsed_ms:.0f} ms elapsed): raise "
                "executionLimits.maxExecutionTimeMs, or make the graph do less (fewer loop "
                "iterations, faster tools)",
                node.id,
                "limit",
                limit="maxExecutionTimeMs",
            )

    def _record(self, node: Node, started_at: float) -> NodeRecord:
        """The record of the node's next execution, as it starts."""
        history = self.history
        return NodeRecord(
            index=len(history.outputs),
            node_id=node.id,
            node_type=node.type,
            iteration=len(history.by_node.get(node.id, ())) + 1,
            input=history.outputs[-1] if history.outputs else self.arguments,
            detail=_STATIC_DETAIL[node.type](node),
            started_at=started_at,
        )

    def _step(self, compiled: CompiledNode) -> tuple[Any, str | None]:
        """Run one node, report it, and record its output; its output and the next node."""
        node, history = compiled.node, self.history
        record = self._record(node, time.time())
        # Its own record, as every observer call gets (built anew: a third of copy.copy's time).
        self.observer.node_started(NodeRecord(**vars(record)))
        began = time.perf_counter()
        try:
            output, next_id = _RUNNERS[node.type](self, compiled, record)
        except GraphRunError as error:
            record.error = error.message
            _ended(record, began)
            self.observer.node_failed(record)
            raise
        record.output = output
        _ended(record, began)
        history.record(node.id, output)
        self.observer.node_finished(record)
        return output, next_id

    def _entry(self, compiled: CompiledNode, _record: NodeRecord) -> tuple[Any, str | None]:
        return self.arguments, compiled.node.next

    def _exit(self, compiled: CompiledNode, _record: NodeRecord) -> tuple[Any, str | None]:
        result = self.history.outputs[-1]
        check = self.compiled.output
        # Here, where the run's outcome is decided: a result that breaks the outputSchema
        # fails the run (recorded so), rather than a run recorded succeeded whose caller
        # is told it failed.
        failure = check.failure(result) if check is not None else None
        if failure is not None:
            node = compiled.node
            raise GraphRunError(f"node {node.id!r}: {failure}", node.id, "output")
        return result, None

    def _transform(self, compiled: CompiledNode, _record: NodeRecord) -> tuple[Any, str | None]:
        expression = compiled.expression
        assert expression is not None  # compile_tool compiles every transform's expression
        output = self._guarded(
            compiled.node,
            "transform.expr",
            expression.evaluate,
            self.history.context,
            self.bindings,
            self.guard,
        )
        return output, compiled.node.next

    def _switch(self, compiled: CompiledNode, record: NodeRecord) -> tuple[Any, str | None]:
        node = compiled.node
        for index, rule in enumerate(compiled.rules):
            field = f"conditions[{index}].rule"
            if self._guarded(node, field, evaluate, rule, self.history.context, self._read_var):
                target = node.conditions[index].target
                record.detail = {"target": target, "matched": index}
                return target, target
        if node.default is None:
            raise GraphRunError(
                f"node {node.id!r}: no condition held and the switch has no `default`; "
                "add a default target",
                node.id,
                "definition",
            )
        record.detail = {"target": node.default, "matched": "default"}
        return node.default, node.default

    def _approval(self, compiled: CompiledNode, record: NodeRecord) -> tuple[Any, str | None]:
        node = compiled.node
        decision = self.decided(node) if self.decided is not None else None
        if decision is not None:
            record.detail = {**(record.detail or {}), "mocked": True}
            return decision, _route(node, decision)
        expression = compiled.expression
        assert expression is not None  # compile_tool compiles every approval's message
        message = self._guarded(
            node, "message", expression.evaluate, self.history.context, self.bindings, self.guard
        )
        text = _as_text(message)
        record.detail = {**(record.detail or {}), "message": text}
        history = self.history
        paused = Paused(
            node_id=node.id,
            iteration=record.iteration,
            index=record.index,
            message=text,
            approvers=node.approvers,
            form=node.form,
            timeout_ms=node.timeout_ms,
            executions=tuple(zip(history.nodes, history.outputs, strict=True)),
            elapsed_ms=(time.monotonic() - self.started) * 1000,
            waited_since=record.started_at,
        )
        self.observer.node_waiting(record)
        raise _Pause(paused)

    def _decided(self, resume: Resume) -> str:
        """End the waiting approval node with its decision; the node to go to next."""
        node, decision = self.compiled.nodes[resume.node_id].node, resume.decision
        assert decision is not None  # `resumed` comes here for a decided approval only
        record = self._record(node, resume.waited_since)
        record.attempts = 1
        record.output = decision
        record.duration_ms = max(time.time() - resume.waited_since, 0.0) * 1000
        next_id = _route(node, decision)
        self.history.record(node.id, decision)
        self.observer.node_finished(record)
        return next_id

    def _read_var(self, path: Expression, data: Any) -> Any:
        return path.evaluate(data, self.bindings, self.guard)

    def _call(self, compiled: CompiledNode, record: NodeRecord) -> tuple[Any, str | None]:
        node = compiled.node
        context = self.history.context
        if self.tool_arguments is not None:
            arguments, self.tool_arguments = self.tool_arguments, None
        else:
            arguments = self._guarded(
                node, "args", fill, compiled.args, context, self.bindings, self.guard
            )
        if not isinstance(arguments, dict):
            raise GraphRunError(
                f"node {node.id!r}, field 'args': gave {type(arguments).__name__}, not an "
                "object of the tool's arguments",
                node.id,
                "expression",
            )
        record.detail = {"server": node.server, "tool": node.tool, "arguments": arguments}
        result = self.mocked(node) if self.mocked is not None else None
        if result is not None:
            record.detail["mocked"] = True
        else:
            result = self._call_with_retry(node, arguments, record)
        if result.is_error:
            raise GraphRunError(
                f"node {node.id!r}: tool {node.tool!r} on server {node.server!r} returned an "
                f"error: {error_text(result)}",
                node.id,
                "tool",
            )
        return tool_output(result), node.next

    def _call_with_retry(
        self, node: Node, arguments: dict[str, Any], record: NodeRecord
    ) -> CallToolResult:
        retry = node.retry
        assert node.server is not None  # the checks require both of an mcp node
        assert node.tool is not None
        failure: Exception | None = None
        for attempt in range(retry.count + 1):
            if attempt and self.cancel.wait(retry.backoff_seconds * 2 ** (attempt - 1)):
                raise self._cancelled(f"while node {node.id!r} waited to retry its call", node)
            record.attempts = attempt + 1
            try:
                return self.call_tool(node.server, node.tool, arguments, node.timeout_seconds)
            except GraphRunError:
                raise  # a call_tool that knows better (e.g. it was cancelled) has its say
            except Exception as exc:
                failure = exc
        raise GraphRunError(
            f"node {node.id!r}: calling tool {node.tool!r} on server {node.server!r} failed "
            f"{record.attempts} time(s); last error: {type(failure).__name__}: {failure}; "
            "check that the server is running and reachable, or give the node a longer "
            "`timeout` or a `retry`",
            node.id,
            "tool",
        ) from failure

    def _cancelled(self, when: str, node: Node) -> RunCancelled:
        reason = self.cancel.reason or "no reason given"
        return RunCancelled(f"run cancelled {when}: {reason}", node.id)

    def _guarded(self, node: Node, field: str, function: Callable[..., Any], *args: Any) -> Any:
        """Evaluate one field of a node within the guard's bounds; failures name node and field."""
        self.guard.start()
        try:
            return function(*args)
        except ExpressionTimeout as exc:
            if not exc.run_deadline:
                raise self._expression_failure(node, field, exc) from exc
            raise GraphRunError(
                f"maxExecutionTimeMs ({self.limits.max_execution_time_ms}) reached while node "
                f"{node.id!r} evaluated field {getattr(exc, 'field', None) or field!r}: raise "
                "executionLimits.maxExecutionTimeMs or make the expression do less",
                node.id,
                "limit",
                limit="maxExecutionTimeMs",
            ) from exc
        except Exception as exc:  # JSONata, JSON Logic operators, history functions
            raise self._expression_failure(node, field, exc) from exc

    def _expression_failure(self, node: Node, field: str, exc: Exception) -> GraphRunError:
        field = getattr(exc, "field", None) or field
        ran = ", ".join(self.history.context) or "none yet"
        return GraphRunError(
            f"node {node.id!r}, field {field!r}: evaluation failed: {exc}; expressions read "
            f"$.<node id> of the nodes that have run ({ran})",
            node.id,
            "expression",
        )


def _route(node: Node, decision: dict[str, Any]) -> str:
    """The node an approval goes to for its decision; a decision without a route fails the
    run (the checks require the routes of every decision that can be made)."""
    name = decision.get("decision")
    target = node.routes.get(name) if isinstance(name, str) else None
    if target is None:
        raise GraphRunError(
            f"node {node.id!r}: decision {name!r} has no route; give the node `routes.{name}`",
            node.id,
            "definition",
        )
    return target


def _as_text(value: Any) -> str:
    """An approval's evaluated message as the person reads it: a string as it is, anything
    else as JSON, cut at MAX_MESSAGE_CHARS."""
    text = value if isinstance(value, str) else ""
    if value is not None and not isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1] + "…"
    return text


def _ended(record: NodeRecord, began: float) -> None:
    """Fill in what is known once a node has run, whether it succeeded or failed."""
    record.duration_ms = (time.perf_counter() - began) * 1000
    if record.node_type != "mcp":  # an mcp node counts its calls as it makes them
        record.attempts = 1


_RUNNERS = {
    "entry": _Run._entry,
    "mcp": _Run._call,
    "transform": _Run._transform,
    "switch": _Run._switch,
    "approval": _Run._approval,
    "exit": _Run._exit,
}
_STATIC_DETAIL: dict[str, Callable[[Node], dict[str, Any] | None]] = {
    "entry": lambda _node: None,
    "mcp": lambda node: {"server": node.server, "tool": node.tool},
    "transform": lambda node: {"expr": node.expr},
    "switch": lambda _node: None,
    "approval": lambda node: {
        "approvers": node.approvers,
        "form": node.form,
        "timeout_ms": node.timeout_ms,
    },
    "exit": lambda _node: None,
}
