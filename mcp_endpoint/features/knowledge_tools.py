"""The catalog's tools: `get_node_types`, `get_node_details` and `search_nodes`, answered
from the node catalog (nodespecs/knowledge/service.py) for agents that design workflows."""

from __future__ import annotations

from typing import Any, Literal

from django.conf import settings
from pydantic import Field

from mcp_endpoint.features.tool_definitions import StrictArguments, ToolDefinition
from nodespecs.callers import Caller
from nodespecs.knowledge import service as knowledge
from nodespecs.knowledge.registry import current_registry
from nodespecs.knowledge.specformat import NODE_TYPES

# Length limits are shown in the input schemas, so agents see them, and enforced by the
# knowledge service, whose message says how to fix the call (pydantic's would not).
_NAME_LIMIT: dict[str, Any] = {"maxLength": knowledge.MAX_NAME_CHARACTERS}


def _query_limits(schema: dict[str, Any]) -> None:
    """The query's limits (settings, read when the schema is first built, not at import)."""
    schema["maxLength"] = settings.KNOWLEDGE_MAX_QUERY_CHARACTERS
    schema["description"] += f" At most {settings.KNOWLEDGE_MAX_QUERY_TERMS} words."


class GetNodeTypesArguments(StrictArguments):
    type_filter: str | None = Field(
        default=None,
        description="Only this node type (optional). Use the names without the _NODE suffix.",
        json_schema_extra={"enum": list(NODE_TYPES)},
    )


class NodeRef(StrictArguments):
    node_type: str = Field(
        description="Node type, e.g. ACTION.",
        json_schema_extra=_NAME_LIMIT,
    )
    subtype: str = Field(
        description="Node subtype, e.g. HTTP_REQUEST.",
        json_schema_extra=_NAME_LIMIT,
    )


class GetNodeDetailsArguments(StrictArguments):
    nodes: list[NodeRef] = Field(
        min_length=1,
        max_length=knowledge.MAX_NODES_PER_CALL,
        description="The nodes to describe, as {node_type, subtype} pairs.",
    )
    include_examples: bool = Field(default=True, description="Include usage examples.")
    include_schemas: bool = Field(default=True, description="Include input/output schemas.")
    detail: Literal["minimal", "standard", "full"] | None = Field(
        default=None,
        description=(
            "How much to tell; when given, the include_* flags are ignored. minimal: type, "
            "subtype, a one-line description and the required parameters (name → type), at "
            "most about 200 tokens a node, to compare many; standard: all but the examples "
            "and the restated legacy parameters list and default_* maps, to configure one; "
            "full: everything."
        ),
    )


class SearchNodesArguments(StrictArguments):
    query: str = Field(
        min_length=1,
        description="What the node should do, in plain words, e.g. 'send an email'.",
        json_schema_extra=_query_limits,
    )
    max_results: int = Field(
        default=10, ge=1, le=knowledge.MAX_SEARCH_RESULTS, description="Most results to return."
    )
    include_details: bool = Field(default=False, description="Include full node specifications.")
    type_filter: str | None = Field(
        default=None,
        description="Only nodes of this type (optional).",
        json_schema_extra={"enum": list(NODE_TYPES)},
    )


def _get_node_types(arguments: GetNodeTypesArguments, caller: Caller) -> dict[str, Any]:
    return knowledge.get_node_types(arguments.type_filter).as_dict()


def _get_node_details(arguments: GetNodeDetailsArguments, caller: Caller) -> dict[str, Any]:
    nodes = [node.model_dump() for node in arguments.nodes]
    return {
        "nodes": knowledge.get_node_details(
            nodes, arguments.include_examples, arguments.include_schemas, detail=arguments.detail
        )
    }


def _search_nodes(arguments: SearchNodesArguments, caller: Caller) -> dict[str, Any]:
    results = knowledge.search_nodes(
        arguments.query, arguments.max_results, arguments.include_details, arguments.type_filter
    )
    return {"query": arguments.query, "results": results}


_NODE_SUMMARY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "node_type": {"type": "string"},
        "subtype": {"type": "string"},
        "warning": {"type": "string"},
        "error": {"type": "string"},
    },
    "required": ["node_type", "subtype"],
}


KNOWLEDGE_TOOLS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        name="get_node_types",
        title="List node types",
        description=(
            "Get all available workflow node types and their subtypes. HUMAN_IN_THE_LOOP "
            "nodes have built-in AI response analysis: do not add separate IF or AI_AGENT "
            "nodes to classify a human's reply."
        ),
        arguments=GetNodeTypesArguments,
        output_schema={
            "type": "object",
            "description": "Node type → sorted subtypes; `warning` when corrected.",
            "properties": {"warning": {"type": "string"}},
            "additionalProperties": {"type": ["array", "string"], "items": {"type": "string"}},
        },
        handler=_get_node_types,
        fixed_cost=True,
        answer_stamp=current_registry,
    ),
    ToolDefinition(
        name="get_node_details",
        title="Describe nodes",
        description=(
            "Get detailed specifications for one or more workflow nodes: configurations "
            "with defaults, input and output parameters, ports and examples. Common naming "
            "mistakes (ACTION_NODE, older subtype names, misspellings) are corrected and "
            "reported in `warning`; an unknown node gets `error` and `suggestions`. Pass "
            "detail 'minimal' to compare many nodes cheaply, 'full' for the ones you use. "
            "HUMAN_IN_THE_LOOP nodes route on confirmed/rejected/unrelated/timeout ports."
        ),
        arguments=GetNodeDetailsArguments,
        output_schema={
            "type": "object",
            "properties": {"nodes": {"type": "array", "items": _NODE_SUMMARY}},
            "required": ["nodes"],
        },
        handler=_get_node_details,
        # Exact names of a few nodes are lookups; more nodes, or a misspelt name, are
        # sent on to a thread by the service itself (knowledge.not_in_event_loop).
        fixed_cost=True,
        answer_stamp=current_registry,
    ),
    ToolDefinition(
        name="search_nodes",
        title="Search nodes",
        description=(
            "Search workflow nodes by what they should do, in natural language "
            "(e.g. 'notify my team on Slack when a form is submitted'). Results are ranked "
            "by relevance and carry a relevance_score; pass include_details for full specs."
        ),
        arguments=SearchNodesArguments,
        output_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "results": {
                    "type": "array",
                    "items": {
                        **_NODE_SUMMARY,
                        "properties": {
                            **_NODE_SUMMARY["properties"],
                            "relevance_score": {"type": "number"},
                        },
                    },
                },
            },
            "required": ["query", "results"],
        },
        handler=_search_nodes,
    ),
)
