"""What each MCP method does, independent of protocol era and transport.

`call_method` takes a parsed request (an `mcp.types` model) and a `CallContext`, and returns
the result model or raises `RpcError`. The protocol layer chooses the era, checks the
envelope, and serialises the result for that era.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable
from functools import cache
from typing import Any

from django.core.exceptions import SynchronousOnlyOperation
from mcp import types

from graphs.execution.lineage import call_refusal
from graphs.execution.runs import RunRequest
from graphs.execution.toolset import (
    WorkflowServer,
    WorkflowTool,
    workflow_server,
    workflow_tools,
    workflow_tools_token,
)
from mcp_endpoint.access.challenges import SCOPE_HOW
from mcp_endpoint.calls import caller_approvals, task_extension, workflow_answers
from mcp_endpoint.calls.workflow_calls import WorkflowCall
from mcp_endpoint.features import extensions, prompts, resources
from mcp_endpoint.features.tool_definitions import StartRun, ToolError
from mcp_endpoint.features.tools import TOOLS
from mcp_endpoint.jsonrpc import interaction
from mcp_endpoint.jsonrpc.context import SERVER_NAME, SERVER_VERSION, CallContext
from mcp_endpoint.jsonrpc.encoding import json_text
from mcp_endpoint.jsonrpc.errors import Forbidden, RpcError
from mcp_endpoint.jsonrpc.interaction import StreamedInteraction
from nodespecs.callers import Caller

logger = logging.getLogger(__name__)

PAGE_SIZE = 100

INSTRUCTIONS = (
    "Switchyard knows the workflow node catalog, and builds, tests and serves workflows. To "
    "build one: (1) search_nodes with a plain description of each step (e.g. 'notify my team "
    "on Slack when a form is submitted'); (2) get_node_details for the nodes you choose "
    "(detail: 'minimal' to compare many, 'full' for the ones you use); (3) write the workflow "
    "as a graph (entry, mcp, transform, switch and exit nodes) and call validate_workflow "
    "until it is valid, applying each problem's `fix` (a JSON Patch) or doing what its "
    "message says; (4) create_workflow stores it as a draft, not yet served; (5) "
    "test_workflow runs it, with `mocks` for tools you do not want called, then for real; "
    "(6) publish_workflow serves it as a tool. Change it later with update_workflow (a JSON "
    "Patch on get_workflow's definition) and publish again; get_run and list_runs show what "
    "runs did. Node types are written without the _NODE suffix (ACTION, not ACTION_NODE); "
    "wrong names are corrected and the response says so. HUMAN_IN_THE_LOOP nodes classify a "
    "person's reply themselves (confirmed, rejected, unrelated, timeout): do not add IF or "
    "AI_AGENT nodes for that. Each spec is also a resource at nodespec://NODE_TYPE/SUBTYPE."
)

# What a method answers: its result, or a call that goes on as its answer is sent (a
# workflow's run, or a 2025 call asking its client for input).
MethodResult = types.Result | WorkflowCall | StreamedInteraction


def server_capabilities(group: str | None = None) -> types.ServerCapabilities:
    """What `/mcp` offers, or a workflow group's endpoint (its tools, and logging)."""
    # The tool list changes whenever a workflow does: clients hear of it (list_changes.py).
    tools = types.ToolsCapability(list_changed=True)
    if group is not None:
        return types.ServerCapabilities(tools=tools, logging=types.LoggingCapability())
    return types.ServerCapabilities(
        tools=tools,
        resources=types.ResourcesCapability(
            subscribe=bool(resources.subscribable()), list_changed=False
        ),
        prompts=types.PromptsCapability(list_changed=False),
        completions=types.CompletionsCapability(),
        logging=types.LoggingCapability(),
    )


def group_served(group: str) -> WorkflowServer:
    """The workflow group served at `/mcp/<group>`; `RpcError` once there is none."""
    found = workflow_server(group)
    if found is None:
        raise RpcError(
            types.INVALID_REQUEST,
            f"No MCP server at /mcp/{group[:80]} any more: its workflow group was removed. "
            "`python manage.py export_graph --list` (or the admin) shows each group's endpoint.",
        )
    return found


def server_info(group: str | None = None) -> types.Implementation:
    """Who answers: Switchyard at `/mcp`, a graph file's own server at its group's endpoint."""
    if group is None:
        return types.Implementation(name=SERVER_NAME, title="Switchyard", version=SERVER_VERSION)
    served = group_served(group)
    return types.Implementation(name=served.name, title=served.title, version=served.version)


def server_instructions(group: str | None = None) -> str | None:
    """The instructions for the model: the catalog's at `/mcp`, the graph file's own at its
    group's endpoint (None when the file has none)."""
    if group is None:
        return INSTRUCTIONS
    return group_served(group).instructions or None


def _page(items: list[Any], cursor: str | None) -> tuple[list[Any], str | None]:
    """Cursor pagination over a deterministic list: the cursor is the next offset."""
    start = 0
    if cursor is not None:
        valid = cursor.isascii() and cursor.isdecimal() and len(cursor) < 10
        if not valid or int(cursor) > len(items):
            raise RpcError(
                types.INVALID_PARAMS,
                f"Invalid cursor {cursor!r}: pass back the nextCursor of the previous page.",
            )
        start = int(cursor)
    end = start + PAGE_SIZE
    return items[start:end], (str(end) if end < len(items) else None)


def extra_tool_schema(name: Any) -> dict[str, Any] | None:
    """The input schema of an extra tool (the only ones that mirror arguments in headers)."""
    extra = extensions.installed().tools.get(name) if isinstance(name, str) else None
    return extra.tool.input_schema if extra is not None else None


# The scope a call needs of a tool that is not one of this server's own (a workflow, an
# extra tool): its own tools each name theirs (tool_definitions.ToolDefinition.scope).
EXECUTE_SCOPE = "tools:execute"
# Scopes that let a caller change the served tool list through the builder tools (publish a
# workflow): such a caller is told not to cache tools/list, so it sees its change at once.
BUILDER_SCOPES = frozenset({"workflows:write", "workflows:publish", "workflows:admin"})
# How long any other caller may keep a tools/list answer (2026-07-28 `ttlMs`): workflows
# come and go with the admin, and callers listening for list changes hear of them sooner.
TOOLS_LIST_TTL_MS = 30_000


def tool_scope(name: str, group: str | None = None) -> str:
    """The scope a caller needs to call the tool `name` at `/mcp` (or at `/mcp/<server>`)."""
    own = TOOLS.get(name) if group is None else None
    return own.scope if own is not None else EXECUTE_SCOPE


def tool_list(
    group: str | None = None, *, scopes: frozenset[str] | None = None
) -> list[types.Tool]:
    """The tools in a fixed order: at `/mcp` the knowledge tools, the enabled workflows by
    name, then any extra tools; at a group's endpoint its enabled workflows alone. With
    `scopes`, only those a caller holding them may call (None: every tool). Whatever changes
    this list must change `tools_generation()`, and what it reads of `scopes` must be in
    `tools_audience()`."""
    if group is not None:
        group_served(group)
        tools = workflow_answers.workflow_tool_list(group)
    else:
        tools = [
            *_own_tools(),
            *workflow_answers.workflow_tool_list(),
            *(extra.tool for extra in extensions.installed().tools.values()),
        ]
    if scopes is None:
        return tools
    return [tool for tool in tools if tool_scope(tool.name, group) in scopes]


def tools_audience(scopes: frozenset[str]) -> frozenset[str]:
    """What of a caller's `scopes` its tools/list answer depends on (which tools it may call,
    and whether it may change the list): answers are cached by it (core.py)."""
    return scopes & (_tool_scopes() | BUILDER_SCOPES)


@cache
def _tool_scopes() -> frozenset[str]:
    return frozenset({EXECUTE_SCOPE, *(tool.scope for tool in TOOLS.values())})


def kept_answer_stamp(params: Any, group: str | None) -> Hashable | None:
    """The stamp a `tools/call` with `params` may be answered under from the answers kept
    (protocol/tool_answers.py): that of the tool it calls, when it is one of this server's
    own whose answer depends on its arguments and that stamp alone
    (`ToolDefinition.answer_stamp`), called by that name at `/mcp` (no workflow or extra tool
    takes it). None for any other call."""
    name = params.get("name") if isinstance(params, dict) else None
    tool = TOOLS.get(name) if group is None and isinstance(name, str) else None
    if tool is None or tool.answer_stamp is None:
        return None
    if name in extensions.installed().tools or name in workflow_tools():
        return None
    return tool.answer_stamp()


def tools_generation() -> Hashable:
    """A stamp of the tools `tool_list()` serves: tools/list answers are cached by it (core.py).
    The knowledge tools are fixed, and so are the extensions' (settings); the workflows' snapshot
    names itself (graphs/execution/toolset.py)."""
    return (tuple(extensions.installed().tools), workflow_tools_token())


@cache
def _own_tools() -> tuple[types.Tool, ...]:
    """This server's own tools (mcp_endpoint/features/tools.py) as `tools/list` shows them."""
    return tuple(
        types.Tool(
            name=tool.name,
            title=tool.title,
            description=tool.description,
            input_schema=tool.input_schema(),
            output_schema=tool.output_schema,
            annotations=types.ToolAnnotations(
                title=tool.title,
                read_only_hint=not tool.writes,
                destructive_hint=False,
                idempotent_hint=not tool.writes,
                open_world_hint=False,
            ),
        )
        for tool in TOOLS.values()
    )


def _tool_error(message: str, details: dict[str, Any] | None = None) -> types.CallToolResult:
    """A tool result with `isError`; `details` also go in `structuredContent` and the text."""
    text = f"Error: {message}"
    if details is None:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=True
        )
    structured = {"error": message, **details}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{text}\n{json_text(details)}")],
        structured_content=structured,
        is_error=True,
    )


def _workflow_call(
    tool: WorkflowTool,
    arguments: dict[str, Any] | None,
    context: CallContext,
    start: StartRun | None = None,
    params: types.CallToolRequestParams | None = None,
) -> WorkflowCall | types.CallToolResult:
    """A workflow's call, for the core to follow as it answers; or the run a tool started
    (`start`: a test run). A call that comes back through other workflows too deep or in a
    cycle is refused here, before it takes a run thread (graphs/execution/lineage.py). A
    workflow that may ask its caller gets the way to ask this client; a 2026-07-28 call that
    answers such a question (`params` with requestState) continues the run it was about."""
    refusal = call_refusal(context.lineage, tool.name)
    if refusal is not None:
        return _tool_error(refusal, {"chain": [*map(str, context.lineage), tool.name]})
    may_become_task = context.stateless and task_extension.declared(context.client_capabilities)
    channel, continues = caller_approvals.NOT_ASKED, None
    if tool.asks_caller:
        channel = caller_approvals.channel_of(context, may_become_task=may_become_task)
        if params is not None and context.stateless and params.request_state:
            answered = caller_approvals.round_answered(params, context.caller.actor)
            if isinstance(answered, str):
                return _tool_error(answered)
            continues = answered
    return WorkflowCall(
        tool=tool,
        request=RunRequest(
            name=tool.name,
            arguments=arguments if arguments is not None else {},
            caller=context.caller.actor,
            session_id=context.session_id,
            # As JSON ("7", '"a"'), so that `notifications/cancelled` finds the run.
            request_id=json.dumps(context.request_id),
            version=(tool.version_id, tool.digest),
            is_test=start is not None,
            mocks=start.mocks if start is not None else None,
            breakpoints=start.breakpoints if start is not None else (),
            lineage=context.lineage,
        ),
        request_id=context.request_id,
        era=context.era,
        progress_token=context.progress_token,
        may_become_task=may_become_task,
        cancel_on_disconnect=context.stateless,
        channel=channel,
        continues=start.continues if start is not None and start.continues else continues,
    )


def check_tool_scope(name: str, group: str | None, caller: Caller) -> None:
    """Refuse (`Forbidden`) a call of the tool `name` at `/mcp` (or at `group`'s endpoint)
    by a caller without the scope it needs."""
    scope = tool_scope(name, group)
    if not caller.has_scope(scope):
        raise Forbidden(
            types.INVALID_REQUEST,
            f"Forbidden: tools/call of {name} needs the scope {scope}, which this caller does not "
            f"have. {SCOPE_HOW}",
            scope=scope,
        )


def call_tool(params: types.CallToolRequestParams, context: CallContext) -> MethodResult:
    """Run a tool; every failure comes back in-band with `isError` and how to fix the call,
    but a missing scope (`Forbidden`): this server's own tools each name theirs, every other
    call needs tools:execute."""
    check_tool_scope(params.name, context.group, context.caller)
    if context.group is not None:
        return _call_group_tool(params, context, context.group)
    extra = extensions.installed().tools.get(params.name)
    if extra is not None:
        answer: MethodResult = interaction.run_handler(
            lambda: extra.handler(params.arguments or {}, context), params, context
        )
        return answer
    workflow = workflow_tools().get(params.name)
    if workflow is not None:
        return _workflow_call(workflow, params.arguments, context, params=params)
    tool = TOOLS.get(params.name)
    if tool is None:
        names = [*TOOLS, *workflow_tools(), *extensions.installed().tools]
        return _tool_error(
            f"Unknown tool {params.name!r}; available tools: {', '.join(names)}. "
            "Call tools/list for their schemas."
        )
    context.progress(0, 1, f"{tool.name} started")
    try:
        answered = tool.call(params.arguments, context.caller)
    except ToolError as exc:
        return _tool_error(str(exc), exc.details)
    except SynchronousOnlyOperation:
        raise  # work the event loop must not do: the ASGI app does it on a thread
    except Exception:
        logger.exception("Tool %s failed", tool.name)
        return _tool_error(f"{tool.name} failed on the server; the error is logged. Try again.")
    if isinstance(answered, StartRun):
        return _workflow_call(answered.tool, answered.arguments, context, answered)
    structured = answered
    for entry in structured.get("nodes", []):
        if "warning" in entry:
            context.log("warning", entry["warning"])
    if "warning" in structured:
        context.log("warning", structured["warning"])
    context.progress(1, 1, f"{tool.name} finished")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json_text(structured))],
        structured_content=structured,
    )


def _call_group_tool(
    params: types.CallToolRequestParams, context: CallContext, group: str
) -> MethodResult:
    """Call a workflow of the group served at `/mcp/<group>`: only its own workflows."""
    tools = group_served(group).tools
    workflow = tools.get(params.name)
    if workflow is not None:
        return _workflow_call(workflow, params.arguments, context, params=params)
    served = ", ".join(tools) or "none (all disabled)"
    return _tool_error(
        f"Unknown tool {params.name!r} at /mcp/{group}; this server's tools: {served}. "
        "Call tools/list for their schemas; /mcp serves every workflow and the catalog tools."
    )


def _complete(params: types.CompleteRequestParams, context: CallContext) -> types.CompleteResult:
    ref, argument = params.ref, params.argument
    known = dict((params.context.arguments or {}) if params.context else {})
    if isinstance(ref, types.ResourceTemplateReference):
        if ref.uri not in {t.uri_template for t in resources.templates()}:
            raise RpcError(types.INVALID_PARAMS, f"Unknown resource template {ref.uri!r}.")
        values = resources.complete_template_argument(argument.name, argument.value, known)
    else:
        if ref.name not in prompts.all_prompts():
            raise RpcError(types.INVALID_PARAMS, f"Unknown prompt {ref.name!r}.")
        values = prompts.complete_prompt_argument(ref.name, argument.name, argument.value, known)
    return types.CompleteResult(
        completion=types.Completion(
            values=values[:100], total=len(values), has_more=len(values) > 100
        )
    )


def _list_tools(params: Any, context: CallContext) -> types.ListToolsResult:
    """The tools this caller may call. The list depends on the caller, so no client may share
    it with another (`private`); a builder may change it, so it is told not to keep it."""
    scopes = context.caller.scopes or frozenset()
    tools = tool_list(context.group, scopes=scopes)
    page, cursor = _page(tools, params.cursor if params else None)
    builds = not BUILDER_SCOPES.isdisjoint(scopes)
    return types.ListToolsResult(
        tools=page,
        next_cursor=cursor,
        ttl_ms=0 if builds else TOOLS_LIST_TTL_MS,
        cache_scope="private",
    )


def _list_resources(params: Any, context: CallContext) -> types.ListResourcesResult:
    page, cursor = _page(resources.list_resources(), params.cursor if params else None)
    return types.ListResourcesResult(resources=page, next_cursor=cursor)


def _list_templates(params: Any, context: CallContext) -> types.ListResourceTemplatesResult:
    page, cursor = _page(resources.templates(), params.cursor if params else None)
    return types.ListResourceTemplatesResult(resource_templates=page, next_cursor=cursor)


def _list_prompts(params: Any, context: CallContext) -> types.ListPromptsResult:
    page, cursor = _page(list(prompts.all_prompts().values()), params.cursor if params else None)
    return types.ListPromptsResult(prompts=page, next_cursor=cursor)


def _read_resource(params: types.ReadResourceRequestParams, context: CallContext) -> MethodResult:
    # Some resources need a scope beyond resources:read (a run: runs:read), as tools do.
    scope = resources.read_scope(params.uri)
    if scope is not None and not context.caller.has_scope(scope):
        raise Forbidden(
            types.INVALID_REQUEST,
            f"Forbidden: resources/read of {params.uri[:100]!r} needs the scope {scope}, which "
            "this caller does not have. Use an API key with that scope (ask an administrator).",
            scope=scope,
        )
    try:
        return resources.read(params.uri)
    except resources.ResourceNotFound as exc:
        # -32602 in both eras: 2026-07-28 retired -32002, and the SDK answers so for older ones.
        raise RpcError(types.INVALID_PARAMS, str(exc), {"uri": params.uri}) from None


def _get_prompt(params: types.GetPromptRequestParams, context: CallContext) -> MethodResult:
    try:
        handler = prompts.prompt_handler(params.name, params.arguments)
    except prompts.PromptError as exc:
        raise RpcError(types.INVALID_PARAMS, str(exc)) from None
    answer: MethodResult = interaction.run_handler(
        lambda: handler(params.arguments or {}, context), params, context
    )
    return answer


def _subscribe(params: types.SubscribeRequestParams, context: CallContext) -> types.EmptyResult:
    if params.uri not in resources.subscribable():
        raise RpcError(
            types.INVALID_PARAMS,
            f"Cannot subscribe to {params.uri!r}: it never changes, so there is nothing to watch.",
            {"uri": params.uri},
        )
    return types.EmptyResult()


# Every method this module answers, by name.
_HANDLERS: dict[str, Callable[[Any, CallContext], MethodResult]] = {
    "ping": lambda params, context: types.EmptyResult(),
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _subscribe,
    "tools/list": _list_tools,
    "resources/list": _list_resources,
    "resources/templates/list": _list_templates,
    "resources/read": _read_resource,
    "prompts/list": _list_prompts,
    "prompts/get": _get_prompt,
    "completion/complete": _complete,
}

# What a workflow group's endpoint answers (besides the protocol layer's own methods).
GROUP_METHODS = frozenset({"ping", "tools/list", "tools/call"})

# The scope a caller needs for each method; methods not listed need none.
REQUIRED_SCOPES: dict[str, str] = {
    "tools/list": "tools:read",
    "tasks/get": "tools:execute",
    "tasks/cancel": "tools:execute",
    "tasks/update": "tools:execute",
    "prompts/list": "tools:read",
    "prompts/get": "tools:read",
    "completion/complete": "tools:read",
    "resources/list": "resources:read",
    "resources/templates/list": "resources:read",
    "resources/read": "resources:read",
    "resources/subscribe": "resources:read",
    "resources/unsubscribe": "resources:read",
}


def call_method(request: types.Request[Any, Any], context: CallContext) -> MethodResult:
    """Answer one request; `initialize`, `server/discover` and `logging/setLevel` are the
    protocol layer's, as they concern the session or the era."""
    if context.group is not None and request.method not in GROUP_METHODS:
        raise RpcError(
            types.METHOD_NOT_FOUND,
            f"{request.method} is not served at /mcp/{context.group}: a workflow group's "
            "endpoint serves its workflows as tools, nothing else. The catalog's resources, "
            "prompts and completions are at /mcp.",
            request.method,
        )
    if request.method == "tools/call":
        return call_tool(request.params, context)
    handler = _HANDLERS.get(request.method)
    if handler is None:
        raise RpcError(
            types.METHOD_NOT_FOUND, f"Method not found: {request.method}", request.method
        )
    return handler(request.params, context)
