"""An MCP tool described as a TOOL node spec document. Plain Python.

Seed 004 names a provider's tool `mcp-{provider}-{tool}`; the spec's subtype is that name in
upper snake case (`MCP_EVERYTHING_GET_SUM`) and its display name is the `mcp-…` name itself,
so agents can use either. The tool's `inputSchema` and `outputSchema` become the spec's
input and output parameters (top-level properties, in the spec format's terms) and, whole,
the `validation_schema` of its input and output ports, so nothing nested is lost. The output is
described as the engine gives it to the next nodes, nothing more: the tool's structuredContent
under an outputSchema, else the parsed text of the result (`STRUCTURED_OUTPUT`, `TEXT_OUTPUT`).
"""

from __future__ import annotations

from typing import Any

from mcp.types import Tool
from pydantic import ValidationError

from nodespecs.knowledge.names import provider_node_name, provider_subtype
from nodespecs.knowledge.specformat import ParamDef, dump_spec_document, parse_spec_document

_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array"})

# What a workflow's mcp node gives as its output, as the engine makes it from the call's result
# (graphs/engine/results.py: `tool_output`, and `executor` for an error), in the words that
# validate_workflow uses for it ("the output of 'node' (its tool's outputSchema)",
# graphs/engine/checks/flow.py). The engine may not import this module, nor this one the
# engine: tests/nodespecs/test_providers_tool_specs.py holds the two to the same words.
STRUCTURED_OUTPUT = (
    "The output of this node (its tool's outputSchema): the result's structuredContent, an "
    "object whose fields are the output parameters; read one as $.<node id>.<field>."
)
TEXT_OUTPUT = (
    "The output of this node: the tool declares no outputSchema, so it is the text of the "
    "result's first text block, parsed as JSON when it is JSON, else the text itself; read it "
    'as $.<node id>. A result with no text but images or audio gives {"text": "", "images": '
    '[{"data", "mime_type"}], "audio": [...]}, any other content its first block as JSON, '
    "and no content null."
)
ERROR_OUTPUT = (
    " A result with isError gives no output: the node fails, and with it the run, with the "
    "tool's text as the error."
)


def _json_type(schema: Any) -> str | None:
    """The spec parameter type of a JSON Schema, or None when it does not say."""
    if not isinstance(schema, dict):
        return None
    declared = schema.get("type")
    names = list(declared) if isinstance(declared, list) else [declared]
    names += [_json_type(branch) for branch in schema.get("anyOf", []) + schema.get("oneOf", [])]
    found = next((name for name in names if name in _JSON_TYPES), None)
    if found is None and "properties" in schema:
        return "object"
    if found is None and "items" in schema:
        return "array"
    return found


def _param(name: str, schema: Any, *, required: bool) -> dict[str, Any]:
    """One spec parameter from a property's JSON Schema: type, description and, when the
    spec format can express them, default, options, range and pattern."""
    schema = schema if isinstance(schema, dict) else {}
    title = str(schema.get("title") or "")
    if title.replace(" ", "_").lower() == name.lower():
        # Generated from the name (pydantic writes "Seconds" for `seconds`): says nothing more.
        title = ""
    description = str(schema.get("description") or title).strip() or name.replace("_", " ")
    param_type = _json_type(schema)
    if param_type is None:
        param_type = "string"
        description += " (any JSON value)"
    param = {"type": param_type, "description": description, "required": required}
    extras: dict[str, Any] = {}
    if "default" in schema:
        extras["default"] = schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        extras["options"] = schema["enum"]
    if param_type in ("integer", "number"):
        for key, bound in (("min", "minimum"), ("max", "maximum")):
            if isinstance(schema.get(bound), (int, float)):
                extras[key] = schema[bound]
    if param_type == "string" and isinstance(schema.get("pattern"), str):
        extras["validation_pattern"] = schema["pattern"]
    try:
        ParamDef.model_validate({**param, **extras})
    except ValidationError:
        # A default or constraint the spec format cannot hold (a Python-incompatible regex,
        # an out-of-range default): keep what it can.
        return param
    return {**param, **extras}


def _params(schema: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {}
    required = set(schema.get("required") or [])
    return {
        name: _param(name, property_schema, required=name in required)
        for name, property_schema in schema["properties"].items()
    }


def _output_params(output_schema: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The node's output as parameters: the outputSchema's properties, which are the fields
    of the output; none without an outputSchema (the output is a text or a JSON value, which
    has no named fields: the output port says so)."""
    return _params(output_schema)


def _tags(provider: str, tool: Tool) -> list[str]:
    tags = ["mcp", "provider", provider]
    hints = tool.annotations
    if hints is not None and hints.read_only_hint:
        tags.append("read-only")
    if hints is not None and hints.destructive_hint:
        tags.append("destructive")
    return tags


def tool_document(*, provider: str, provider_title: str, tool: Tool) -> dict[str, Any]:
    """The spec document of one tool of provider `provider`, in normalised form.

    Raises `SpecFormatError` when the result breaks the spec format (a name too odd to be a
    subtype), which a refresh reports for that tool alone.
    """
    node_name = provider_node_name(provider, tool.name)
    summary = (tool.description or tool.title or "").strip() or f"The {tool.name} tool."
    server = f"{provider_title} ({provider})" if provider_title else provider
    document = {
        "node_type": "TOOL",
        "subtype": provider_subtype(node_name),
        "display_name": node_name,
        "description": f"{summary}\n\nRuns the tool {tool.name!r} of the MCP server {server}.",
        "input_params": _params(tool.input_schema),
        "output_params": _output_params(tool.output_schema),
        "input_ports": [
            {
                "name": "arguments",
                "required": True,
                "description": "The tool's arguments: an object valid against the tool's "
                "inputSchema (validation_schema).",
                "validation_schema": tool.input_schema,
            }
        ],
        "output_ports": [
            {
                "name": "result",
                "description": (STRUCTURED_OUTPUT if tool.output_schema else TEXT_OUTPUT)
                + ERROR_OUTPUT,
                **({"validation_schema": tool.output_schema} if tool.output_schema else {}),
            }
        ],
        "tags": _tags(provider, tool),
    }
    return dump_spec_document(parse_spec_document(document))


def port_schema(ports: Any) -> dict[str, Any] | None:
    """The JSON Schema a TOOL spec's first port carries (the tool's whole input or output, as
    its `input_ports` or `output_ports` hold it); None when there is none."""
    if isinstance(ports, list) and ports and isinstance(ports[0], dict):
        schema = ports[0].get("validation_schema")
        return schema if isinstance(schema, dict) else None
    return None
