"""Test runs of a workflow version (test_workflow): which mcp nodes answer without calling
their servers, and what the run did, node by node.

A mock names a node by id, or every node calling one tool by `server.tool`, and gives what
the tool answers: a `CallToolResult` as JSON, or for short a bare value taken as its
structured content, or `{"from_run": <run id>}` — what that node returned in a past run
that the caller may read: one it started, with this key or another key of the same user, or
any run with the `runs:read` scope. Any other run is refused exactly as a run that does not
exist is, so run ids (sequential) tell nothing of other callers' runs.
With `mock_all`, every other mcp node answers a value made from its tool's `outputSchema`.
An approval node is mocked by its id with the decision it takes instead of waiting:
`{"decision": "approved" | "rejected" | "timeout", "comment"?: text, "form"?: {...}}`, its form
values checked against the node's form (graphs/engine/stops/approval_forms.py); an approval node not
mocked waits as in any run.
The answers are fixed when the run is created and kept on it (`Run.mocks`), so a queued run
executes with them in its worker, and the history shows what was mocked. There, an mcp node's
answer is CallToolResult JSON (it has `content`) and an approval's decision is not (it has
`decision`): `call_mocks` and `mocked_decisions` take each kind back out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from graphs.engine.definition import DECISIONS, Node
from graphs.engine.stops.approval_forms import form_value_problems
from graphs.execution.payloads import holds_secret_or_cut
from graphs.models import NodeExecution, Run, WorkflowVersion
from nodespecs.callers import Caller
from nodespecs.models import NodeSpec
from nodespecs.providers.tool_specs import port_schema

# How many of a test run's node executions its answer lists (a loop may run thousands).
MAX_NODES_REPORTED = 200
# How deep a value made from an output schema goes: schemas may nest or refer to themselves.
_MAX_SCHEMA_DEPTH = 8
# The most mocks one test takes (each is checked against the version's nodes).
MAX_MOCKS = 200


class MockRefused(ValueError):
    """A test run cannot start as asked: the message says what to change."""


def _result(value: Any) -> dict[str, Any]:
    """A bare value as the result a tool answers: structured content (when an object) and
    the same as JSON text."""
    result = CallToolResult(
        content=[TextContent(type="text", text=json.dumps(value, ensure_ascii=False))],
        structured_content=value if isinstance(value, dict) else None,
    )
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _given(key: str, value: Any) -> dict[str, Any]:
    """A mock as written: a CallToolResult as JSON (an object with `content`), or a bare
    value."""
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        try:
            result = CallToolResult.model_validate(value)
        except ValidationError as exc:
            raise MockRefused(
                f"mocks[{key!r}] looks like a CallToolResult (it has `content`) but is not "
                f"one: {exc.errors()[0]['msg']}. Send a valid result, or the bare value the "
                "tool should return."
            ) from None
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return _result(value)


def own_actors(caller: Caller) -> frozenset[str] | None:
    """The `Run.caller` values of the runs `caller` may take outputs from; None for any run
    (the `runs:read` scope)."""
    if caller.has_scope("runs:read"):
        return None
    return caller.own_actors


def _from_run(key: str, node_id: str, run_id: Any, caller: Caller) -> dict[str, Any]:
    """What node `node_id` returned in run `run_id` (its last execution there), when
    `caller` may read that run."""
    if not isinstance(run_id, int) or isinstance(run_id, bool):
        raise MockRefused(f'mocks[{key!r}]: "from_run" must be a run id (a number).')
    executions = NodeExecution.objects.filter(run_id=run_id, node_id=node_id, status="succeeded")
    actors = own_actors(caller)
    if actors is not None:
        executions = executions.filter(run__caller__in=actors)
    execution = executions.order_by("-index").first()
    if execution is None:
        # One answer for a run that does not exist, is not the caller's, or has no such
        # execution: the caller learns nothing of runs it may not read.
        raise MockRefused(
            f"mocks[{key!r}]: run {run_id} has no successful execution of node {node_id!r} "
            "that you may take its output from. Name one of your own runs (started with this "
            "API key or another key of the same user) in which that node succeeded; any "
            "run needs a key with the runs:read scope."
        )
    if execution.truncated or holds_secret_or_cut(execution.output):
        raise MockRefused(
            f"mocks[{key!r}]: node {node_id!r}'s output in run {run_id} was stored masked (a "
            "secret) or cut (over GRAPHS_MAX_PAYLOAD_BYTES), so it is not what the tool "
            "returned; give the mock's value instead."
        )
    return _result(execution.output)


def example_of(schema: Any, depth: int = 0) -> Any:
    """A value valid against a simple JSON Schema (for a tool's outputSchema): its `const`,
    first `enum` value, `default` or `examples` entry, else one made from its `type`."""
    if not isinstance(schema, dict) or depth > _MAX_SCHEMA_DEPTH:
        return None
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return example_of(schema[key][0], depth + 1)
    kind = schema.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        return {name: example_of(sub, depth + 1) for name, sub in list(properties.items())[:50]}
    if kind == "array":
        items = schema.get("items")
        return [example_of(items, depth + 1)] if isinstance(items, dict) else []
    return {"string": "example", "integer": 0, "number": 0, "boolean": False}.get(str(kind))


def _output_schemas(version: WorkflowVersion) -> dict[tuple[Any, Any], Any]:
    """Each (server, tool) the version's mcp nodes call → the tool's outputSchema, from its
    provider's TOOL spec (None when unknown)."""
    bound = version.servers
    specs = NodeSpec.objects.filter(provider_id__in=set(bound.values())).values_list(
        "provider_id", "provider_tool", "output_ports"
    )
    by_provider: dict[tuple[int, str], Any] = {}
    for provider_id, tool, ports in specs:
        by_provider[(provider_id, tool)] = port_schema(ports)
    return {
        (server, tool): schema
        for (provider_id, tool), schema in by_provider.items()
        for server, bound_id in bound.items()
        if bound_id == provider_id
    }


def mock_answers(
    version: WorkflowVersion, mocks: dict[str, Any], *, mock_all: bool, caller: Caller
) -> dict[str, Any] | None:
    """Each mocked mcp node's answer by node id (CallToolResult JSON), for `Run.mocks`.

    A node id wins over `server.tool`. Raises `MockRefused` for a mock that names no mcp node
    of the version, a bad result, or a `from_run` output that was masked or cut, or is of a
    run `caller` may not read.
    """
    if len(mocks) > MAX_MOCKS:
        raise MockRefused(f"{len(mocks)} mocks: at most {MAX_MOCKS}, one per node or tool.")
    calls = {
        node["id"]: (node.get("server"), node.get("tool"))
        for node in version.definition.get("nodes", [])
        if isinstance(node, dict) and node.get("type") == "mcp"
    }
    approvals = {
        node["id"]: node
        for node in version.definition.get("nodes", [])
        if isinstance(node, dict) and node.get("type") == "approval"
    }
    others = {
        node["id"]: node.get("type")
        for node in version.definition.get("nodes", [])
        if isinstance(node, dict) and node.get("type") not in ("mcp", "approval")
    }
    answers: dict[str, dict[str, Any]] = {}
    by_tool: dict[str, dict[str, Any]] = {}
    for key, value in mocks.items():
        if key in approvals:
            answers[key] = _decision_mock(key, value, approvals[key])
            continue
        if key in others:
            raise MockRefused(
                f"mocks[{key!r}]: node {key!r} is a {others[key]} node; only mcp nodes (their "
                "tool's answer) and approval nodes (their decision) can be mocked."
            )
        if key in calls:
            targets = [key]
        else:
            targets = [node for node, call in calls.items() if f"{call[0]}.{call[1]}" == key]
            if not targets:
                named = [*calls, *sorted({f"{s}.{t}" for s, t in calls.values()}), *approvals]
                raise MockRefused(
                    f"mocks[{key!r}]: no mcp or approval node has that id and no node calls "
                    f"that server.tool; mock one of: {', '.join(named) or 'none (no such nodes)'}."
                )
        for node_id in targets:
            if isinstance(value, dict) and set(value) == {"from_run"}:
                answer = _from_run(key, node_id, value["from_run"], caller)
            else:
                answer = _given(key, value)
            (answers if key in calls else by_tool)[node_id] = answer
    resolved = {**by_tool, **answers}
    if mock_all:
        schemas = _output_schemas(version)
        for node_id, call in calls.items():
            if node_id not in resolved:
                resolved[node_id] = _result(example_of(schemas.get(call) or {"type": "object"}))
    return resolved or None


#: The keys of an approval node's mock.
DECISION_MOCK_KEYS = ("decision", "comment", "form")
#: Who decided a mocked approval, in its output.
MOCK_DECIDER = {"kind": "mock", "id": "", "name": "test_workflow"}


def _decision_mock(key: str, value: Any, node: Mapping[str, Any]) -> dict[str, Any]:
    """An approval node's mock, checked against the node: what `Run.mocks` keeps for it."""
    shape = (
        '{"decision": "approved" | "rejected" | "timeout", "comment"?: text, "form"?: '
        "{field: value}}"
    )
    if not isinstance(value, dict):
        raise MockRefused(
            f"mocks[{key!r}]: node {key!r} is an approval node; mock it with its decision, "
            f"as {shape}."
        )
    unknown = [str(name) for name in value if name not in DECISION_MOCK_KEYS]
    if unknown:
        raise MockRefused(
            f"mocks[{key!r}]: unknown key(s) {', '.join(unknown)}; an approval node's mock "
            f"is {shape}."
        )
    decision = value.get("decision")
    if decision not in DECISIONS:
        raise MockRefused(
            f"mocks[{key!r}]: decision {decision!r} is not one of {', '.join(DECISIONS)}."
        )
    if decision == "timeout" and node.get("timeoutMs") is None:
        raise MockRefused(
            f"mocks[{key!r}]: node {key!r} has no timeoutMs, so it never times out; mock "
            "approved or rejected."
        )
    comment = value.get("comment", "")
    if not isinstance(comment, str):
        raise MockRefused(f"mocks[{key!r}]: comment must be text, not {comment!r}.")
    form = value.get("form", {})
    if decision == "timeout" and form:
        raise MockRefused(
            f"mocks[{key!r}]: a timeout is no one's answer, so it has no form values; leave "
            "`form` out."
        )
    problems = form_value_problems(node.get("form"), form) if decision != "timeout" else []
    if problems:
        raise MockRefused(
            f"mocks[{key!r}]: the form values do not fit the node's form: {'; '.join(problems)}."
        )
    return {"decision": decision, "comment": comment, "form": dict(form or {})}


def _is_decision(answer: Any) -> bool:
    return isinstance(answer, dict) and "decision" in answer and "content" not in answer


def call_mocks(mocks: Mapping[str, Any] | None) -> dict[str, Any]:
    """The mcp nodes' answers of `Run.mocks` (CallToolResult JSON by node id), without the
    approval nodes' decisions kept beside them."""
    return {
        node_id: answer for node_id, answer in (mocks or {}).items() if not _is_decision(answer)
    }


def mocked_decisions(
    mocks: Mapping[str, Any] | None, *, now: datetime | None = None
) -> dict[str, dict[str, Any]]:
    """Each mocked approval node's output by node id, from `Run.mocks`: the decision, the
    comment and the form values mocked, decided by `MOCK_DECIDER` at `now` (ISO 8601;
    default: the current time)."""
    decided_at = (now or datetime.now(UTC)).isoformat()
    return {
        node_id: {
            "decision": answer["decision"],
            "by": dict(MOCK_DECIDER),
            "comment": answer.get("comment", ""),
            "form": dict(answer.get("form") or {}),
            "decided_at": decided_at,
        }
        for node_id, answer in (mocks or {}).items()
        if _is_decision(answer)
    }


def decided_by_mocks(
    mocks: Mapping[str, Any] | None,
) -> Callable[[Node], dict[str, Any] | None] | None:
    """The engine's `decided` for a test run (`Run.mocks`): each mocked approval node's
    output, decided when the node runs; None for a node not mocked (it waits). None when no
    approval node is mocked."""
    if not any(_is_decision(answer) for answer in (mocks or {}).values()):
        return None

    def decided(node: Node) -> dict[str, Any] | None:
        return mocked_decisions(mocks).get(node.id)

    return decided


def report_of_test_run(run_id: int) -> dict[str, Any]:
    """What a finished test run did: its result, id, and each node's output in order (the
    first MAX_NODES_REPORTED; `nodes_truncated` says when there were more)."""
    result = Run.objects.values_list("result", flat=True).get(pk=run_id)
    executions = list(
        NodeExecution.objects.filter(run_id=run_id)
        .order_by("index")
        .values("node_id", "status", "output", "error", "detail")[: MAX_NODES_REPORTED + 1]
    )
    nodes = []
    for execution in executions[:MAX_NODES_REPORTED]:
        entry: dict[str, Any] = {"id": execution["node_id"], "output": execution["output"]}
        if execution["status"] != "succeeded":
            entry["status"] = execution["status"]
            entry["error"] = execution["error"]
        if isinstance(execution["detail"], dict) and execution["detail"].get("mocked"):
            entry["mocked"] = True
        nodes.append(entry)
    report: dict[str, Any] = {"result": result, "run_id": run_id, "nodes": nodes}
    if len(executions) > MAX_NODES_REPORTED:
        report["nodes_truncated"] = True
    return report
