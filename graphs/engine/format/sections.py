"""The sections of a definition around its tools, as parsing reads them: server info,
execution limits, mcpServers, a tool's schemas, text fields, and unknown keys anywhere.
Each problem found is a ``Finding`` (graphs/engine/checks/problems.py) appended to the list given.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from typing import Any

from graphs.engine.checks.problems import (
    Finding,
    Keys,
    error,
    finding,
    op_add,
    op_move,
    op_remove,
)
from graphs.engine.definition import ExecutionLimits, ServerConfig, ServerInfo
from graphs.engine.errors import located
from graphs.engine.format.servers import parse_server, parse_servers, too_many_servers
from graphs.engine.language.regex import schema_pattern_problems
from graphs.engine.schemas import nonlocal_references

SERVER_INFO_KEYS = ("name", "version", "title", "instructions")
LIMIT_KEYS = {
    "maxNodeExecutions": "max_node_executions",
    "maxExecutionTimeMs": "max_execution_time_ms",
}


def read_server_info(raw: Any, found: list[Finding]) -> ServerInfo:
    if not isinstance(raw, Mapping):
        found.append(
            finding(
                "missing_field" if raw is None else "invalid_field",
                "field 'server'",
                "must be a mapping with name and version",
                ("server",) if raw is not None else (),
            )
        )
        return ServerInfo("", "")
    found += unknown_keys(raw, SERVER_INFO_KEYS, "field 'server'", ("server",))
    texts = {
        key: read_text(
            raw,
            key,
            f"field 'server.{key}'",
            found,
            ("server", key),
            None if key in ("name", "version") else "",
        )
        for key in SERVER_INFO_KEYS
    }
    return ServerInfo(**texts)


def read_limits(raw: Any, found: list[Finding]) -> ExecutionLimits:
    if raw is None:
        return ExecutionLimits()
    if not isinstance(raw, Mapping):
        found.append(
            finding(
                "invalid_field",
                "field 'executionLimits'",
                "must be a mapping",
                ("executionLimits",),
            )
        )
        return ExecutionLimits()
    found += unknown_keys(raw, tuple(LIMIT_KEYS), "field 'executionLimits'", ("executionLimits",))
    values = {}
    for key, name in LIMIT_KEYS.items():
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                found.append(
                    finding(
                        "invalid_limit",
                        f"field 'executionLimits.{key}'",
                        f"must be a whole number above 0, got {value!r}",
                        ("executionLimits", key),
                    )
                )
            else:
                values[name] = value
    return ExecutionLimits(**values)


def read_servers(raw: Any, found: list[Finding]) -> dict[str, ServerConfig]:
    """``mcpServers`` as parse_servers reads it, each problem pointing at its server."""
    if not isinstance(raw, Mapping):
        texts: list[str] = []
        servers = parse_servers(raw, texts)
        found += [Finding(text, (error("invalid_field", text, ("mcpServers",)),)) for text in texts]
        return servers
    refusal = too_many_servers(raw)
    if refusal is not None:
        found.append(Finding(refusal, (error("too_many_servers", refusal, ("mcpServers",)),)))
        return {}
    servers = {}
    for name, settings in raw.items():
        texts = []
        server = parse_server(str(name), settings, texts)
        at = ("mcpServers", str(name))
        found += [Finding(text, (error("invalid_server", text, at),)) for text in texts]
        if server is not None:
            servers[server.name] = server
    return servers


def read_schema(
    raw: Mapping[str, Any], key: str, tool: str, found: list[Finding], at: Keys
) -> dict[str, Any] | None:
    """An input or output schema: a JSON Schema of an object (the MCP requirement)."""
    schema = raw.get(key)
    if schema is None and key == "outputSchema":
        return None
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        fix = None
        if schema is None:
            fix = [op_add((*at, key), {"type": "object", "properties": {}})]
        elif (
            isinstance(schema, Mapping)
            and "type" not in schema
            and set(schema)
            <= {
                "properties",
                "required",
                "additionalProperties",
                "description",
                "title",
            }
        ):
            fix = [op_add((*at, key, "type"), "object")]
        found.append(
            finding(
                "invalid_schema",
                located(tool, field=key),
                "must be a JSON Schema of an object, as in {type: object, properties: {...}}",
                (*at, key) if schema is not None else at,
                fix=fix,
            )
        )
        return None
    found += [
        finding("regex_refused", located(tool, field=key), problem, (*at, key))
        for problem in schema_pattern_problems(schema)
    ]
    found += [  # schemas never fetch (graphs/engine/schemas.py): refused when saved
        finding(
            "schema_ref_not_local", located(tool, field=key), ref.message(), (*at, key, *ref.keys)
        )
        for ref in nonlocal_references(schema)
    ]
    return copy.deepcopy(dict(schema))


def read_text(
    raw: Mapping[str, Any],
    key: str,
    where: str,
    found: list[Finding],
    at: Keys,
    default: str | None = None,
) -> str:
    """A string field; numbers are read as text (YAML reads version: 1.0 as a number)."""
    value = raw.get(key, default)
    if value is None:
        fix = None
        if at == ("version",):
            fix = [op_add(at, "1.0")]
        elif at == ("server", "version"):
            fix = [op_add(at, "1.0.0")]
        found.append(finding("missing_field", where, "missing", at[:-1], fix=fix))
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        found.append(finding("invalid_field", where, f"must be a string, got {value!r}", at))
        return ""
    return value


def unknown_keys(
    raw: Mapping[str, Any],
    allowed: tuple[str, ...],
    where: str,
    at: Keys,
    kind: str | None = None,
    node: str | None = None,
) -> list[Finding]:
    """One finding for the unknown keys of a mapping (as imports have always said it), with
    a problem for each key: moved to the allowed key it is close to, else removed."""
    unknown = [str(key) for key in raw if key not in allowed]
    if not unknown:
        return []
    owner = f"a {kind} node" if kind else "it"
    text = f"{where}: unknown key(s) {', '.join(unknown)}; {owner} allows {', '.join(allowed)}"
    problems = []
    for key in unknown:
        close = [
            name
            for name in difflib.get_close_matches(key, allowed, n=1, cutoff=0.7)
            if name not in raw
        ]
        if close:
            hint = f"did you mean {close[0]!r}? "
            fix = [op_move((*at, key), (*at, close[0]))]
        else:
            hint = "remove it; "
            fix = [op_remove((*at, key))]
        message = f"{where}: unknown key {key!r}; {hint}{owner} allows {', '.join(allowed)}"
        problems.append(error("unknown_key", message, (*at, key), node=node, fix=fix))
    return [Finding(text, tuple(problems))]
