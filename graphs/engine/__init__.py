"""The graph engine: parse, check, compile and run graph workflows. No Django in here.

Typical use::

    definition = parse_definition(yaml_text)          # DefinitionError lists every problem
    compiled = compile_tool(definition.tool("count_files"))   # once per workflow version
    result = execute(compiled, {"directory": "/tmp"}, call_tool=call_tool,
                     limits=definition.limits, observer=observer, cancel=token)

``call_tool`` reaches the downstream MCP servers; the observer is the only way the engine
reports what it does. See ``arguments`` for how mcp node args are written (including the
``{literal: ...}`` escape), ``jsonlogic`` for switch rules and ``expressions`` for what the
engine does about jsonata-python's thread safety.
"""

from graphs.engine.cancel import CancelToken
from graphs.engine.compiler import CompiledTool, compile_tool
from graphs.engine.definition import (
    Condition,
    ExecutionLimits,
    GraphDefinition,
    Node,
    RetryPolicy,
    ServerConfig,
    ServerInfo,
    ToolGraph,
)
from graphs.engine.errors import DefinitionError, GraphRunError, RunCancelled
from graphs.engine.executor import CallTool, MockedCall, MockedDecision, execute
from graphs.engine.format.loading import load_yaml
from graphs.engine.format.parsing import parse_definition, parse_tool
from graphs.engine.format.serialize import (
    definition_to_dict,
    dump_yaml,
    server_to_dict,
    tool_to_dict,
)
from graphs.engine.observer import NodeRecord, NullObserver, Observer
from graphs.engine.stops.approvals import Paused
from graphs.engine.stops.resuming import AtBreakpoint, Execution, Resume

__all__ = [
    "AtBreakpoint",
    "CallTool",
    "CancelToken",
    "CompiledTool",
    "Condition",
    "DefinitionError",
    "Execution",
    "ExecutionLimits",
    "GraphDefinition",
    "GraphRunError",
    "MockedCall",
    "MockedDecision",
    "Node",
    "NodeRecord",
    "NullObserver",
    "Observer",
    "Paused",
    "Resume",
    "RetryPolicy",
    "RunCancelled",
    "ServerConfig",
    "ServerInfo",
    "ToolGraph",
    "compile_tool",
    "definition_to_dict",
    "dump_yaml",
    "execute",
    "load_yaml",
    "parse_definition",
    "parse_tool",
    "server_to_dict",
    "tool_to_dict",
]
