"""Every MCP tool of this server besides workflows, by name: the catalog's tools
(knowledge_tools.py), the workflow builder's (builder_tools.py) and the run history's
(run_tools.py). How a tool is defined is tool_definitions.py."""

from __future__ import annotations

from mcp_endpoint.features.builder_tools import BUILDER_TOOLS
from mcp_endpoint.features.knowledge_tools import KNOWLEDGE_TOOLS
from mcp_endpoint.features.run_tools import RUN_TOOLS
from mcp_endpoint.features.tool_definitions import ToolDefinition

TOOLS: dict[str, ToolDefinition] = {
    tool.name: tool for tool in (*KNOWLEDGE_TOOLS, *BUILDER_TOOLS, *RUN_TOOLS)
}
