"""Validation of a workflow definition: every problem, located and, where possible, fixed.
Plain Python: what it knows of servers, limits and the workflow being replaced is passed in.

``validate_document`` reads a definition as import does (graphs/engine/format/parsing.py: the same
checks, the same words), then goes on where import stops: the tools each `mcp` node calls and their
schemas (graphs/engine/checks/calls.py), what each expression reads (graphs/engine/checks/flow.py),
how a run ends: its paths to the exit and the value returned (graphs/engine/checks/exits.py), the
server's limit ceilings and its ceiling on how long an approval node waits, and changes that break
the callers of the workflow it replaces. Each problem is a ``Problem`` (problems.py) pointing into
the definition as submitted, in its own file form.

Hostile input is bounded: a definition larger or deeper than an import accepts is refused
before it is read, the JSONata parsed is bounded (``MAX_EXPRESSION_CHARS``,
``MAX_EXPRESSIONS_CHARS``), every walk is linear or capped, and at most ``MAX_PROBLEMS``
problems are answered.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from graphs.engine.checks.approval_nodes import timeout_above_ceiling
from graphs.engine.checks.calls import Servers, call_problems
from graphs.engine.checks.exits import exit_problems, path_problems
from graphs.engine.checks.flow import (
    ToolContext,
    ToolSchema,
    expression_problems,
    rule_problems,
)
from graphs.engine.checks.offered import Offered, offered_values
from graphs.engine.checks.problems import (
    Keys,
    Problem,
    error,
    keys_of,
    op_add,
    op_replace,
    to_flat_form,
    warning,
)
from graphs.engine.format.loading import MAX_DEPTH
from graphs.engine.format.parsing import DefinitionReading, read_definition
from graphs.engine.format.sections import LIMIT_KEYS
from graphs.engine.language.expression_reads import required_names, schema_types, types_fit
from graphs.engine.language.expressions import ParseBudget

__all__ = [
    "MAX_PROBLEMS",
    "LimitCeiling",
    "Offered",
    "Problem",
    "ToolSchema",
    "limit_above_ceiling_message",
    "offered_fields",
    "validate_document",
]

#: The longest one expression validation parses, all of a definition's together, and the
#: most path steps in one. Real expressions are a few hundred characters with a handful of
#: steps; these bound the parser's time to well under a second whatever is sent (it costs
#: 3 to 7 µs a character, and path steps the square of their number: 500 take 8 ms).
MAX_EXPRESSION_CHARS = 10_000
MAX_EXPRESSIONS_CHARS = 50_000
MAX_PATH_STEPS = 500
#: The most a definition submitted as data (not YAML text, which load_yaml bounds) may hold:
#: values (mappings, lists, scalars) and characters of text.
MAX_ITEMS = 200_000
MAX_CHARS = 1_000_000
#: The most nodes validation reads in one definition (real workflows have tens): its checks
#: are linear but for which nodes can run before which, which grows with their square.
MAX_NODES = 2_000
#: The most problems answered; the rest are counted in a last warning.
MAX_PROBLEMS = 200


@dataclass(frozen=True)
class LimitCeiling:
    """The highest value this server allows for one of the `executionLimits`: its key,
    the value, and the setting an operator changes it with."""

    key: str
    value: int
    setting: str


def limit_above_ceiling_message(key: str, value: int, highest: int, setting: str) -> str:
    """What a workflow asking for more than a ceiling is told (import and validation)."""
    return (
        f"{key} is {value}, above this server's ceiling of {highest} (setting {setting}): set "
        f"{key} to {highest} or less, or ask an operator to raise the ceiling."
    )


def validate_document(
    document: Any,
    *,
    tools_of: Callable[[str], Mapping[str, ToolSchema] | None],
    registered_servers: Collection[str] = (),
    ceilings: Sequence[LimitCeiling] = (),
    approval_timeout_ceiling: LimitCeiling | None = None,
    previous: Mapping[str, ToolSchema] | None = None,
    max_problems: int = MAX_PROBLEMS,
) -> list[Problem]:
    """Every problem of ``document``, a definition as submitted (a mapping, in either file
    form), errors first.

    - ``tools_of(server)``: the tools of the server an `mcp` node names (tool name →
      ``ToolSchema``), or None when they are not known;
    - ``registered_servers``: the registered providers' names, which a node may name
      without the definition declaring them;
    - ``ceilings``: the server's ceilings on `executionLimits`;
    - ``approval_timeout_ceiling``: the longest `timeoutMs` an approval node may have (its
      key is ``timeoutMs``);
    - ``previous``: tool name → the schemas of the workflow a tool replaces, whose callers
      a change may break.
    """
    too_large = _size_problem(document) or _nodes_problem(document)
    if too_large is not None:
        return [too_large]
    reading = read_definition(
        document, budget=ParseBudget(MAX_EXPRESSION_CHARS, MAX_EXPRESSIONS_CHARS, MAX_PATH_STEPS)
    )
    # An unknown server is checked again below, knowing the registered providers too.
    problems = [
        problem
        for found in reading.findings
        for problem in found.problems
        if problem.code != "unknown_server"
    ]
    problems += _limit_problems(reading, ceilings)
    if approval_timeout_ceiling is not None:
        problems += _timeout_problems(reading, approval_timeout_ceiling)
    servers = _servers(reading, tools_of, registered_servers)
    for tool in reading.tools:
        context = ToolContext(tool)
        problems += call_problems(context, servers)  # first: it learns the tools' schemas
        problems += rule_problems(context)
        problems += expression_problems(context)
        problems += path_problems(context)
        problems += exit_problems(context)
    if previous:
        problems += _breaking_problems(reading, previous)
    if _is_flat(document):
        problems = _flat_adjusted(problems, document)
        problems = to_flat_form(problems, *_flat_places(document, reading))
        problems = _flat_targets(problems, document) + _flat_duplicates(document)
    return _answered(problems, max_problems)


def offered_fields(
    document: Any,
    node_id: str,
    *,
    tools_of: Callable[[str], Mapping[str, ToolSchema] | None],
    registered_servers: Collection[str] = (),
) -> list[Offered]:
    """What the expressions of node ``node_id`` can read (graphs/engine/checks/offered.py),
    in the first tool of ``document`` that has such a node; empty when none has, or when the
    definition is larger than validation reads. The tools' schemas are learnt as
    ``validate_document`` learns them."""
    if _size_problem(document) or _nodes_problem(document):
        return []
    reading = read_definition(
        document, budget=ParseBudget(MAX_EXPRESSION_CHARS, MAX_EXPRESSIONS_CHARS, MAX_PATH_STEPS)
    )
    servers = _servers(reading, tools_of, registered_servers)
    for tool in reading.tools:
        context = ToolContext(tool)
        if node_id in context.index:
            call_problems(context, servers)  # learns the schemas of the tools called
            return offered_values(context, node_id)
    return []


def _servers(
    reading: DefinitionReading,
    tools_of: Callable[[str], Mapping[str, ToolSchema] | None],
    registered: Collection[str],
) -> Servers:
    section = reading.document.get("mcpServers")
    return Servers(
        declared=[str(name) for name in section] if isinstance(section, Mapping) else [],
        registered=registered,
        tools_of=tools_of,
    )


def _size_problem(document: Any) -> Problem | None:
    """A definition too large or too deep to read, as data; None if it is not."""
    items = chars = 0
    pending = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        items += 1
        if depth > MAX_DEPTH or items > MAX_ITEMS or chars > MAX_CHARS:
            what = (
                f"nests more than {MAX_DEPTH} levels deep"
                if depth > MAX_DEPTH
                else f"holds more than {MAX_ITEMS:,} values"
                if items > MAX_ITEMS
                else f"holds more than {MAX_CHARS:,} characters of text"
            )
            return error(
                "definition_too_large",
                f"the definition {what}, more than validation reads; split its tools into "
                "several definitions",
                (),
            )
        if isinstance(value, str):
            chars += len(value)
        elif isinstance(value, Mapping):
            chars += sum(len(key) for key in value if isinstance(key, str))
            pending += [(item, depth + 1) for item in value.values()]
        elif isinstance(value, list | tuple):
            pending += [(item, depth + 1) for item in value]
    return None


def _nodes_problem(document: Any) -> Problem | None:
    """A definition with more nodes than validation reads; None if it has fewer."""
    if not isinstance(document, Mapping):
        return None
    tools = document.get("tools")
    lists = [document.get("nodes")]
    if isinstance(tools, list):
        lists += [tool.get("nodes") for tool in tools if isinstance(tool, Mapping)]
    count = sum(len(nodes) for nodes in lists if isinstance(nodes, list))
    if count <= MAX_NODES:
        return None
    return error(
        "definition_too_large",
        f"the definition has {count:,} nodes, more than the {MAX_NODES:,} validation reads; "
        "split it into several workflows (one can call another as an mcp node)",
        (),
    )


def _limit_problems(reading: DefinitionReading, ceilings: Sequence[LimitCeiling]) -> list[Problem]:
    written = reading.document.get("executionLimits")
    problems = []
    for ceiling in ceilings:
        field = LIMIT_KEYS.get(ceiling.key)
        if field is None:
            continue
        value = getattr(reading.limits, field)
        if value <= ceiling.value:
            continue
        at: Keys = ("executionLimits", ceiling.key)
        if isinstance(written, Mapping) and ceiling.key in written:
            fix = [op_replace(at, ceiling.value)]
        elif isinstance(written, Mapping):
            fix, at = [op_add(at, ceiling.value)], ("executionLimits",)
        else:  # the default is above the ceiling: write the ceiling out
            fix, at = [op_add(("executionLimits",), {ceiling.key: ceiling.value})], ()
        message = limit_above_ceiling_message(ceiling.key, value, ceiling.value, ceiling.setting)
        problems.append(error("limit_above_ceiling", message, at, fix=fix))
    return problems


def _timeout_problems(reading: DefinitionReading, ceiling: LimitCeiling) -> list[Problem]:
    """Approval nodes that would wait longer than the server allows."""
    return [
        problem
        for tool in reading.tools
        for node, layout in zip(tool.graph.nodes, tool.layouts, strict=True)
        if (
            found := timeout_above_ceiling(
                tool.graph.name, node, layout.keys, ceiling.value, ceiling.setting
            )
        )
        is not None
        for problem in found.problems
    ]


def _breaking_problems(
    reading: DefinitionReading, previous: Mapping[str, ToolSchema]
) -> list[Problem]:
    problems: list[Problem] = []
    tools = {tool.graph.name: tool for tool in reading.tools}
    for name, old in previous.items():
        tool = tools.get(name)
        if tool is None and len(reading.tools) == 1:
            tool = reading.tools[0]
            problems.append(
                warning(
                    "tool_renamed",
                    f"tool {tool.graph.name!r} replaces workflow {name!r}, whose callers call "
                    f"it by that name and will not find it; keep the name {name!r}",
                    ("tools", tool.position, "name"),
                )
            )
        if tool is not None:
            problems += _schema_changes(
                tool.graph.name,
                ("tools", tool.position),
                tool.graph.input_schema,
                tool.graph.output_schema,
                old,
            )
    return problems


def _schema_changes(
    name: str,
    at: Keys,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None,
    old: ToolSchema,
) -> list[Problem]:
    problems = []
    old_in, new_in = _properties(old.input_schema), _properties(input_schema)
    for prop in old_in:
        if prop not in new_in:
            problems.append(
                warning(
                    "input_property_removed",
                    f"tool {name!r}, field 'inputSchema': input {prop!r} is removed, but the "
                    "workflow's callers may send it (and are refused if additional properties "
                    "are not allowed); keep it, or tell its callers",
                    (*at, "inputSchema"),
                )
            )
    old_required = set(required_names(old.input_schema))
    for index, prop in enumerate(required_names(input_schema)):
        if prop not in old_required:
            problems.append(
                warning(
                    "input_newly_required",
                    f"tool {name!r}, field 'inputSchema.required': input {prop!r} is now "
                    "required, so calls that leave it out, as its callers do today, are "
                    "refused; make it optional (with a default in the graph), or tell its "
                    "callers",
                    (*at, "inputSchema", "required", index),
                )
            )
    problems += _type_changes(name, at, "inputSchema", old_in, new_in, "input")
    old_out, new_out = _properties(old.output_schema), _properties(output_schema)
    for prop in old_out:
        if prop not in new_out:
            problems.append(
                warning(
                    "output_property_removed",
                    f"tool {name!r}, field 'outputSchema': output {prop!r} is removed, but the "
                    "workflow's callers may read it; keep producing and declaring it, or tell "
                    "its callers",
                    (*at, "outputSchema") if output_schema is not None else at,
                )
            )
    problems += _type_changes(name, at, "outputSchema", old_out, new_out, "output")
    return problems


def _type_changes(
    name: str,
    at: Keys,
    key: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    kind: str,
) -> list[Problem]:
    problems = []
    for prop, schema in new.items():
        before, after = schema_types(old.get(prop)), schema_types(schema)
        if before and after and not all(types_fit({each}, after) for each in before):
            problems.append(
                warning(
                    f"{kind}_type_changed",
                    f"tool {name!r}, field '{key}.properties.{prop}': {kind} {prop!r} was a "
                    f"{'/'.join(sorted(before))} and is now a {'/'.join(sorted(after))}, "
                    "which breaks callers that "
                    + ("send" if kind == "input" else "read")
                    + " the old type; keep the type (or accept both), or tell its callers",
                    (*at, key, "properties", prop),
                )
            )
    return problems


def _properties(schema: Any) -> Mapping[str, Any]:
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return properties if isinstance(properties, Mapping) else {}


def _is_flat(document: Any) -> bool:
    return isinstance(document, Mapping) and isinstance(document.get("nodes"), list)


def _flat_adjusted(problems: list[Problem], document: Mapping[str, Any]) -> list[Problem]:
    """Problems of the flat form that its tools' nested view cannot get right, in nested
    pointers still: a tool holds only the nodes its entry reaches, so a tool whose exit is in
    the list but unreached is not offered a second one; and a tool's new name is written in
    the `tool` key of its entry and exit nodes too."""
    listed = [item for item in document["nodes"] if isinstance(item, Mapping)]
    exits_of = {
        item["tool"]
        for item in listed
        if item.get("type") == "exit" and isinstance(item.get("tool"), str)
    }
    tools = document.get("tools")
    # A tool whose entry the list does not name exactly once has no nodes in its nested
    # view, which would also report no entry and no exit: one problem says it all.
    unshared = {problem.path for problem in problems if problem.code == "entry_count"}
    adjusted = []
    for problem in problems:
        if (
            problem.code in ("entry_count", "exit_count")
            and problem.path.endswith("/nodes")
            and problem.path.removesuffix("/nodes") in unshared
        ):
            continue
        if problem.code == "exit_count" and problem.fix is not None:
            index = int(keys_of(problem.path)[1])
            tool = tools[index] if isinstance(tools, list) and index < len(tools) else None
            if isinstance(tool, Mapping) and tool.get("name") in exits_of:
                problem = replace(problem, fix=None)
        if problem.code == "invalid_tool_name" and problem.fix is not None:
            # The entry and exit nodes of the list name their tool: renamed with it, or the
            # fix would leave the tool without them.
            old = _resolve(document, problem.path)
            problem = replace(
                problem,
                fix=problem.fix
                + [
                    op_replace(("nodes", index, "tool"), problem.fix[0]["value"])
                    for index, item in enumerate(document["nodes"])
                    if isinstance(item, Mapping) and item.get("tool") == old
                ],
            )
        adjusted.append(problem)
    return adjusted


def _flat_targets(problems: list[Problem], document: Mapping[str, Any]) -> list[Problem]:
    """A target naming no node of its tool, close to a node of the list its tool does not
    hold (the exit behind a misspelt `next`): suggested from the whole list."""
    ids = [
        item["id"]
        for item in document["nodes"]
        if isinstance(item, Mapping) and isinstance(item.get("id"), str)
    ]
    adjusted = []
    for problem in problems:
        if problem.code == "unknown_target" and problem.fix is None:
            target = _resolve(document, problem.path)
            close = difflib.get_close_matches(target, ids, n=1) if isinstance(target, str) else []
            if close:
                problem = replace(
                    problem,
                    message=f"{problem.message}; did you mean {close[0]!r}, of the top-level "
                    "nodes?",
                    fix=[{"op": "replace", "path": problem.path, "value": close[0]}],
                )
        adjusted.append(problem)
    return adjusted


def _resolve(document: Any, path: str) -> Any:
    """The value a JSON Pointer names, or None."""
    value = document
    for key in keys_of(path):
        if isinstance(value, Mapping):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def _flat_duplicates(document: Mapping[str, Any]) -> list[Problem]:
    """Nodes of the flat form's list that repeat an earlier one's id: the form shares nodes
    out by id, so all but one of them would be dropped without a word."""
    seen: set[str] = set()
    problems = []
    for index, node in enumerate(document["nodes"]):
        node_id = node.get("id") if isinstance(node, Mapping) else None
        if not isinstance(node_id, str):
            continue
        if node_id in seen:
            problems.append(
                error(
                    "duplicate_node_id",
                    f"field 'nodes', node {node_id!r}: another node of the list has this id, "
                    "and ids must be unique (only one of them would be used); rename this one "
                    "and the targets meant for it",
                    ("nodes", index, "id"),
                    node=node_id,
                )
            )
        seen.add(node_id)
    return problems


def _flat_places(
    document: Mapping[str, Any], reading: DefinitionReading
) -> tuple[Callable[[int, int], int | None], Callable[[int], str | None]]:
    """How to find, in the flat form, the node a nested pointer names, and a tool's name."""
    written = {id(node): index for index, node in enumerate(document["nodes"])}
    tools = reading.document.get("tools")
    tools = tools if isinstance(tools, list) else []

    def tool_at(tool: int) -> Mapping[str, Any]:
        return tools[tool] if tool < len(tools) and isinstance(tools[tool], Mapping) else {}

    def node_index(tool: int, node: int) -> int | None:
        nodes = tool_at(tool).get("nodes")
        if not isinstance(nodes, list) or node >= len(nodes):
            return None
        return written.get(id(nodes[node]))

    def tool_name(tool: int) -> str | None:
        name = tool_at(tool).get("name")
        return name if isinstance(name, str) else None

    return node_index, tool_name


def _answered(problems: list[Problem], most: int) -> list[Problem]:
    """Each problem once (a node the flat form shares between tools is checked in each),
    errors first, at most ``most`` of them."""
    seen = set()
    unique = []
    for problem in problems:
        key = (problem.code, problem.path, problem.message)
        if key not in seen:
            seen.add(key)
            unique.append(problem)
    unique.sort(key=lambda problem: problem.severity != "error")
    if len(unique) <= most:
        return unique
    left = len(unique) - most
    return [
        *unique[:most],
        warning(
            "too_many_problems",
            f"{left} more problem(s) are not shown; fix these and validate again",
            (),
        ),
    ]
