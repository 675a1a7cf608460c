"""What an agent receives for a spec: the response structure of the node knowledge server.

Plain Python over a spec document (a dict in the unified format), so the knowledge service,
the admin preview and the MCP tools all show the same thing.
"""

from __future__ import annotations

from typing import Any

# The value a parameter takes at run time when its spec gives no default.
_EMPTY_VALUE: dict[str, Any] = {
    "string": "",
    "integer": 0,
    "float": 0.0,
    "number": 0,
    "boolean": False,
    "object": {},
    "array": [],
}

_CONFIGURATION_KEYS = ("type", "default", "description", "required", "min", "max", "options")


def _runtime_defaults(params: dict[str, dict[str, Any]]) -> dict[str, Any]:
    defaults = {}
    for name, param in params.items():
        default, kind = param.get("default"), param.get("type")
        if default is None and isinstance(kind, str):
            default = _EMPTY_VALUE.get(kind)
        defaults[name] = default
    return defaults


def _schema_map(params: dict[str, dict[str, Any]], *, with_defaults: bool) -> dict[str, Any]:
    schema = {}
    for name, param in params.items():
        entry = {key: param[key] for key in _CONFIGURATION_KEYS if param.get(key) is not None}
        if not with_defaults:
            entry.pop("default", None)
        entry.setdefault("required", False)
        if "options" in entry:
            entry["enum_values"] = entry["options"]
        if param.get("validation_pattern"):
            entry["validation_pattern"] = param["validation_pattern"]
        if param.get("sensitive"):
            entry["sensitive"] = True
        schema[name] = entry
    return schema


def _legacy_parameters(configurations: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The old `parameters` list, for clients written against the legacy format."""
    return [
        {
            "name": name,
            "type": param.get("type", "string"),
            "required": bool(param.get("required", False)),
            "default_value": param.get("default"),
            "description": param.get("description", ""),
            "enum_values": param.get("options"),
            "validation_pattern": param.get("validation_pattern"),
        }
        for name, param in configurations.items()
    ]


def _ports(
    ports: list[dict[str, Any]], *, include_schemas: bool, direction: str
) -> list[dict[str, Any]]:
    serialized = []
    for port in ports:
        entry: dict[str, Any] = {
            "name": port["name"],
            "type": port.get("type", "main"),
            "description": port.get("description", ""),
            "max_connections": port.get("max_connections", -1),
        }
        if direction == "input":
            entry["required"] = bool(port.get("required", False))
        entry["data_format"] = port.get("data_format") if include_schemas else None
        entry["validation_schema"] = port.get("validation_schema") if include_schemas else None
        serialized.append(entry)
    return serialized


def serialize_spec(
    document: dict[str, Any], *, include_examples: bool = True, include_schemas: bool = True
) -> dict[str, Any]:
    """Build the agent-facing view of a spec.

    `include_schemas=False` leaves out the input and output parameter schemas and the port
    data formats (the configurations, defaults and port names stay); `include_examples=False`
    leaves out the examples.
    """
    configurations = document.get("configurations") or {}
    input_params = document.get("input_params") or {}
    output_params = document.get("output_params") or {}
    result: dict[str, Any] = {
        "node_type": document["node_type"],
        "subtype": document["subtype"],
        "version": document.get("version", "1.0.0"),
        "display_name": document.get("display_name")
        or document["subtype"].replace("_", " ").title(),
        "description": document.get("description", ""),
        "parameters": _legacy_parameters(configurations),
        "configurations": _schema_map(configurations, with_defaults=True),
    }
    if include_schemas:
        result["input_params_schema"] = _schema_map(input_params, with_defaults=True)
        result["output_params_schema"] = _schema_map(output_params, with_defaults=False)
    result["default_configurations"] = _runtime_defaults(configurations)
    result["default_input_params"] = _runtime_defaults(input_params)
    result["default_output_params"] = _runtime_defaults(output_params)
    result["input_ports"] = _ports(
        document.get("input_ports") or [], include_schemas=include_schemas, direction="input"
    )
    result["output_ports"] = _ports(
        document.get("output_ports") or [], include_schemas=include_schemas, direction="output"
    )
    result["tags"] = list(document.get("tags") or [])
    if document["node_type"] == "AI_AGENT":
        result["attached_nodes"] = list(document.get("attached_nodes") or [])
    if document.get("aliases"):
        result["aliases"] = list(document["aliases"])
    if include_examples:
        result["examples"] = list(document.get("examples") or [])
    if document.get("available") is False:
        result["available"] = False
    return result
