"""Graph definitions: the validated, immutable form of the graph YAML of seed 003.

A ``GraphDefinition`` is what ``parse_definition`` returns: server metadata, execution limits,
the downstream MCP servers, and one ``ToolGraph`` per tool. Nothing here runs anything; these
are plain values that compare equal when they describe the same graph, so a definition can
be exported and parsed back to the same thing.

Node ids are restricted to letters, digits and underscores (not starting with a digit, and
not ``true``/``false``/``null``), because expressions reach a node's output as ``$.node_id``
and an id such as ``list-dir`` would read as ``$.list - dir``. Such ids are refused when the
definition is parsed, with a message suggesting a usable id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from graphs.engine.errors import DefinitionError

__all__ = [
    "APPROVERS",
    "DECISIONS",
    "NODE_TYPES",
    "TRANSPORTS",
    "Condition",
    "DefinitionError",
    "ExecutionLimits",
    "GraphDefinition",
    "Node",
    "RetryPolicy",
    "ServerConfig",
    "ServerInfo",
    "ToolGraph",
]

NODE_TYPES = ("entry", "mcp", "transform", "switch", "approval", "exit")
#: Who decides an approval node: the reviewers (a page, REST) or the calling client's user.
APPROVERS = ("reviewers", "caller")
#: An approval node's decisions, each the name of one of its routes.
DECISIONS = ("approved", "rejected", "timeout")
TRANSPORTS = ("stdio", "streamable_http", "sse")


@dataclass(frozen=True)
class ServerInfo:
    """The MCP server metadata of a definition (its ``server`` section)."""

    name: str
    version: str
    title: str = ""
    instructions: str = ""

    def __post_init__(self) -> None:
        # Seed 003: the title is optional and defaults to the name.
        if not self.title:
            object.__setattr__(self, "title", self.name)


@dataclass(frozen=True)
class ExecutionLimits:
    """Guardrails checked before each node: total node executions and wall-clock time."""

    max_node_executions: int = 1000
    max_execution_time_ms: int = 300000

    def capped(self, ceilings: ExecutionLimits) -> ExecutionLimits:
        """These limits, each lowered to its ceiling where it is above it: the server's
        ceilings bound every run, whatever its definition asks for."""
        return ExecutionLimits(
            max_node_executions=min(self.max_node_executions, ceilings.max_node_executions),
            max_execution_time_ms=min(self.max_execution_time_ms, ceilings.max_execution_time_ms),
        )


@dataclass(frozen=True)
class ServerConfig:
    """A downstream MCP server: a stdio command, or a Streamable HTTP / SSE URL."""

    name: str
    transport: str  # one of TRANSPORTS
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    # The stdio server's working directory; a relative one is taken from the graph file's.
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    timeout_seconds: float | None = None
    # SSE and Streamable HTTP: how long to wait for the server's next event (None: the default).
    sse_read_timeout: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of an ``mcp`` node's call after it raised; waits backoff * 2**attempt between."""

    count: int = 0
    backoff_seconds: float = 0.5


@dataclass(frozen=True)
class Condition:
    """One branch of a switch: a JSON Logic rule and the node to go to when it is truthy."""

    rule: Any
    target: str


@dataclass(frozen=True)
class Node:
    """One node of a tool's graph. Which fields are set depends on ``type``.

    - entry: ``next``.
    - mcp: ``server``, ``tool``, ``args`` (JSON with expressions), ``next``,
      ``timeout_seconds``, ``retry``.
    - transform: ``expr`` (JSONata), ``next``.
    - switch: ``conditions`` (tried in order), ``default``.
    - approval: ``message`` (JSONata: what the person is asked), ``approvers``, ``form`` (a
      flat JSON Schema object of what the person fills in), ``timeout_ms``, ``routes`` (the
      node to go to for each decision).
    - exit: nothing.
    """

    id: str
    type: str
    next: str | None = None
    server: str | None = None
    tool: str | None = None
    args: Any = None
    expr: str | None = None
    conditions: tuple[Condition, ...] = ()
    default: str | None = None
    timeout_seconds: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    message: str | None = None
    approvers: str = "reviewers"
    form: dict[str, Any] | None = None
    timeout_ms: int | None = None
    routes: dict[str, str] = field(default_factory=dict)

    def targets(self) -> list[tuple[str, str]]:
        """The nodes this one can go to next, as ``(field, node id)`` pairs."""
        edges = [("next", self.next)] if self.next is not None else []
        edges += [
            (f"conditions[{index}].target", condition.target)
            for index, condition in enumerate(self.conditions)
        ]
        if self.default is not None:
            edges.append(("default", self.default))
        edges += [(f"routes.{decision}", target) for decision, target in self.routes.items()]
        return edges


@dataclass(frozen=True)
class ToolGraph:
    """One tool: its MCP metadata and the graph of nodes that runs when it is called."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    nodes: tuple[Node, ...]

    @cached_property
    def _by_id(self) -> dict[str, Node]:
        return {node.id: node for node in self.nodes}

    @property
    def entry(self) -> str:
        """The id of the entry node."""
        return self._only("entry")

    @property
    def exit(self) -> str:
        """The id of the exit node."""
        return self._only("exit")

    def node(self, node_id: str) -> Node:
        """The node with this id; KeyError naming the tool's nodes if there is none."""
        try:
            return self._by_id[node_id]
        except KeyError:
            known = ", ".join(self._by_id)
            raise KeyError(f"tool {self.name!r} has no node {node_id!r}; nodes: {known}") from None

    def _only(self, node_type: str) -> str:
        ids = [node.id for node in self.nodes if node.type == node_type]
        if len(ids) != 1:
            raise DefinitionError(
                f"tool {self.name!r}: expected exactly one {node_type} node, found {len(ids)}"
            )
        return ids[0]


@dataclass(frozen=True)
class GraphDefinition:
    """A whole definition file: server metadata, limits, downstream servers and tools."""

    version: str
    server: ServerInfo
    limits: ExecutionLimits
    mcp_servers: dict[str, ServerConfig]
    tools: tuple[ToolGraph, ...]

    def tool(self, name: str) -> ToolGraph:
        """The tool with this name; KeyError naming the defined tools if there is none."""
        for tool in self.tools:
            if tool.name == name:
                return tool
        known = ", ".join(tool.name for tool in self.tools)
        raise KeyError(f"no tool {name!r} in this definition; tools: {known}")
