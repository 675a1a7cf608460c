"""Validation's checks of `mcp` nodes against the servers and tools they call. Plain Python.

For each `mcp` node: its server is an `mcpServers` entry or a registered provider (a draft may name
one without declaring it: graphs/authoring/drafts.py declares it as the registry shows it); its tool
exists on that server; its literal `args` against the tool's `inputSchema` (a required argument
missing, an argument the tool does not take, a literal of the wrong JSON type: errors, since the
tool would refuse the call); each expression argument whose type can be inferred against the type
the tool takes (an error when the expression itself, or the entry's inputSchema, which every call is
checked against, says it; a warning when an upstream tool's outputSchema or a transform does, since
those describe what a node usually returns, not what it must).

Servers whose tools are not known (an `mcpServers` entry that is no registered provider:
finding out would mean calling it) get one `tools_unknown` warning and no tool checks.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphs.engine.arguments import Evaluated, Literal
from graphs.engine.checks.flow import ToolContext, ToolSchema
from graphs.engine.checks.problems import (
    Keys,
    Problem,
    error,
    op_add,
    op_move,
    op_remove,
    op_replace,
    warning,
)
from graphs.engine.definition import Node
from graphs.engine.language.expression_reads import infer, required_names, schema_types, types_fit
from graphs.engine.outputs import json_type

_SHOWN = 20  # how many names a message lists at most


@dataclass
class Servers:
    """What validation knows of the servers: the names the definition declares, the
    registered providers' names, and each one's tools (None: unknown)."""

    declared: list[str]
    registered: Collection[str]
    tools_of: Callable[[str], Mapping[str, ToolSchema] | None]
    reported: set[str] = field(default_factory=set)  # servers already reported unknown


def call_problems(context: ToolContext, servers: Servers) -> list[Problem]:
    """The problems of the tool's `mcp` nodes; records in ``context.calls`` the schema of
    each tool found, for the checks of data flow."""
    problems: list[Problem] = []
    for node, layout, compiled in context.nodes:
        if node.type != "mcp" or not isinstance(node.server, str):
            continue
        tools = _server_tools(context, node, layout.at, servers, problems)
        if tools is None or not isinstance(node.tool, str):
            continue
        called = _tool(context, node, layout.at, tools, problems)
        if called is None:
            continue
        context.calls[node.id] = called
        if compiled is not None and isinstance(compiled.args, dict):
            problems += _args_problems(context, node, layout.at, compiled.args, called)
    return problems


def _server_tools(
    context: ToolContext, node: Node, at: Keys, servers: Servers, problems: list[Problem]
) -> Mapping[str, ToolSchema] | None:
    server = str(node.server)
    where = context.where(node.id, "server")
    if server in servers.declared or server in servers.registered:
        tools = servers.tools_of(server)
        if tools is None and server not in servers.reported:
            servers.reported.add(server)
            problems.append(
                warning(
                    "tools_unknown",
                    f"server {server!r}: its tools are not known here (it is not a registered "
                    "provider, or one never refreshed), so the tool names and args of the nodes "
                    "calling it are not checked; register it as a provider and refresh it to "
                    "have them checked",
                    ("mcpServers", server) if server in servers.declared else (*at, "server"),
                    node=None if server in servers.declared else node.id,
                )
            )
        return tools
    known = [*servers.declared, *sorted(set(servers.registered) - set(servers.declared))]
    close = difflib.get_close_matches(server, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    problems.append(
        error(
            "unknown_server",
            f"{where}: unknown server {server!r}: neither an mcpServers entry nor a registered "
            f"provider; {hint}{_listed('servers', known)}",
            (*at, "server"),
            node=node.id,
            fix=[op_replace((*at, "server"), close[0])] if close else None,
        )
    )
    return None


def _tool(
    context: ToolContext,
    node: Node,
    at: Keys,
    tools: Mapping[str, ToolSchema],
    problems: list[Problem],
) -> ToolSchema | None:
    name = str(node.tool)
    if name in tools:
        return tools[name]
    # Seed 004 names a provider's tool as a node spec `mcp-<provider>-<tool>`: an agent may
    # write that name where the tool's own is meant.
    prefix = f"mcp-{node.server}-"
    stripped = name[len(prefix) :] if name.startswith(prefix) else None
    close = (
        [stripped]
        if stripped in tools
        else difflib.get_close_matches(name, list(tools), n=1, cutoff=0.6)
    )
    hint = f"did you mean {close[0]!r}? " if close else ""
    problems.append(
        error(
            "unknown_tool",
            f"{context.where(node.id, 'tool')}: server {node.server!r} has no tool {name!r}; "
            f"{hint}{_listed('its tools', sorted(tools))}",
            (*at, "tool"),
            node=node.id,
            fix=[op_replace((*at, "tool"), close[0])] if close else None,
        )
    )
    return None


def _args_problems(
    context: ToolContext, node: Node, at: Keys, args: dict[str, Any], called: ToolSchema
) -> list[Problem]:
    schema = called.input_schema
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties")
    # Names as JSON reads them: a YAML key may be a number.
    properties = (
        {str(k): v for k, v in properties.items()} if isinstance(properties, Mapping) else {}
    )
    required = required_names(schema)
    more = schema.get("additionalProperties")
    open_ended = more is True or isinstance(more, Mapping) or bool(schema.get("patternProperties"))
    problems: list[Problem] = []
    given = {str(key): value for key, value in args.items()}
    missing = [name for name in required if name not in given]
    unknown = [] if open_ended or not properties else [k for k in given if k not in properties]
    free = [name for name in properties if name not in given]
    fix: list[dict[str, Any]] | None
    for name in unknown:
        # Prefer a required argument that is missing: that is most likely what was meant.
        close = difflib.get_close_matches(name, missing, n=1) or difflib.get_close_matches(
            name, free, n=1
        )
        if close:
            hint, fix = (
                f"did you mean {close[0]!r}? ",
                [op_move((*at, "args", name), (*at, "args", close[0]))],
            )
        else:
            hint, fix = "remove it, or ", [op_remove((*at, "args", name))]
        problems.append(
            error(
                "arg_unknown",
                f"{context.where(node.id, f'args.{name}')}: tool {node.tool!r} takes no argument "
                f"{name!r}; {hint}{_listed('use its arguments', list(properties))}",
                (*at, "args", name),
                node=node.id,
                fix=fix,
            )
        )
    entry_properties = context.graph.input_schema.get("properties")
    entry_properties = entry_properties if isinstance(entry_properties, Mapping) else {}
    for name in missing:
        close = difflib.get_close_matches(name, unknown, n=1)
        if close:
            fix = [op_move((*at, "args", close[0]), (*at, "args", name))]
        elif name in entry_properties and context.entry is not None:
            fix = [op_add((*at, "args", name), f"$.{context.entry}.{name}")]
        else:
            fix = None
        problems.append(
            error(
                "arg_missing",
                f"{context.where(node.id, 'args')}: tool {node.tool!r} requires the argument "
                f"{name!r}{_described(properties.get(name))}; add it to args (a value, or an "
                f'expression such as "$.{context.entry or "entry"}.{name}")',
                (*at, "args"),
                node=node.id,
                fix=fix,
            )
        )
    for name, value in given.items():
        if name in properties:
            problem = _type_problem(context, node, at, name, value, properties[name])
            if problem is not None:
                problems.append(problem)
    return problems


def _described(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return ""
    types = "/".join(sorted(schema_types(schema)))
    description = schema.get("description")
    parts = [part for part in (types, description if isinstance(description, str) else "") if part]
    return f" ({': '.join(parts)[:200]})" if parts else ""


def _type_problem(
    context: ToolContext, node: Node, at: Keys, name: str, value: Any, schema: Any
) -> Problem | None:
    wanted = schema_types(schema)
    if not wanted:
        return None
    where = context.where(node.id, f"args.{name}")
    shown = "/".join(sorted(wanted))
    if isinstance(value, Evaluated):
        inferred = infer(value.expression.ast, context.shape_of)
        types = schema_types(inferred.schema) if inferred is not None else set()
        if inferred is None or not types or types_fit(types, wanted):
            return None
        certain = inferred.origin in ("expression", "entry")
        source = "" if inferred.origin == "expression" else f" (from {_origin(inferred.origin)})"
        message = (
            f"{where}: the expression gives a {'/'.join(sorted(types))}{source}"
            f", but tool {node.tool!r} takes a {shown} here; convert it in the expression "
            "($string(), $number(), $boolean()...) or read another value"
        )
        make = error if certain else warning
        code = "arg_expression_type" if certain else "arg_flow_type"
        return make(code, message, (*at, *value.keys), node=node.id)
    keys: Keys = (*at, "args", name)
    if isinstance(value, Literal):
        value, keys = value.value, (*keys, "literal")
    elif _has_expression(value):
        # An object or array with expressions inside: its own type is still known.
        value = {} if isinstance(value, dict) else []
    have = json_type(value)
    if have in wanted or (have == "integer" and "number" in wanted):
        return None
    converted = _converted(value, wanted)
    return error(
        "arg_wrong_type",
        f"{where}: {value!r} is a {have}, but tool {node.tool!r} takes a {shown} here; write "
        + (f"{converted[0]!r}" if converted else f"a {shown}"),
        keys,
        node=node.id,
        fix=[op_replace(keys, converted[0])] if converted else None,
    )


def _origin(origin: str) -> str:
    return {
        "entry": "the tool's inputSchema",
        "tool": "an upstream tool's outputSchema",
        "transform": "what an upstream transform builds",
        "approval": "an upstream approval's decision",
    }.get(origin, origin)


def _has_expression(value: Any) -> bool:
    pending = [value]
    while pending:
        part = pending.pop()
        if isinstance(part, Evaluated):
            return True
        if isinstance(part, dict):
            pending.extend(part.values())
        elif isinstance(part, list):
            pending.extend(part)
    return False


def _converted(value: Any, wanted: set[str]) -> tuple[Any] | None:
    """The literal written in a type the tool takes, when that loses nothing."""
    if isinstance(value, str):
        text = value.strip()
        if "integer" in wanted or "number" in wanted:
            try:
                return (int(text),)
            except ValueError:
                pass
            try:
                number = float(text)
            except ValueError:
                number = None
            if number is not None and "number" in wanted and number == number:  # not NaN
                return (number,)
        if "boolean" in wanted and text.lower() in ("true", "false"):
            return (text.lower() == "true",)
        return None
    if "string" in wanted and isinstance(value, bool):
        return ("true" if value else "false",)
    if "string" in wanted and isinstance(value, int | float):
        return (str(value),)
    if "integer" in wanted and isinstance(value, float) and value.is_integer():
        return (int(value),)
    return None


def _listed(what: str, names: list[str]) -> str:
    if not names:
        return f"{what}: none"
    shown = ", ".join(names[:_SHOWN])
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return f"{what}: {shown}{more}"
