"""The calls docs/building.md shows are accepted by the inputSchema each tool advertises in
tools/list: a client that checks arguments against the schema before sending them (as the
TypeScript SDK and the Inspector do) must not refuse the documented call."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.graphs.validation.helpers import count_files
from tests.mcp_endpoint.helpers import modern, result

pytestmark = pytest.mark.timeout(30)

BUILDING = Path(__file__).resolve().parents[2] / "docs" / "building.md"
# What the page's names stand for: `draft` is a definition, as a JSON object.
NAMES = {"draft": count_files()}


def documented_calls() -> list[tuple[str, dict[str, Any]]]:
    """Each `client.call_tool(name, arguments)` in the page's Python blocks, its arguments
    evaluated with NAMES."""
    calls = []
    for block in re.findall(r"```python\n(.*?)```", BUILDING.read_text(), re.S):
        for node in ast.walk(ast.parse(block)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "call_tool"
            ):
                name, arguments = node.args
                calls.append((ast.literal_eval(name), _evaluated(arguments)))
    return calls


def _evaluated(node: ast.expr) -> Any:
    if isinstance(node, ast.Name):
        return NAMES[node.id]
    if isinstance(node, ast.Dict):
        return {
            ast.literal_eval(key): _evaluated(value)
            for key, value in zip(node.keys, node.values, strict=True)
            if key is not None
        }
    if isinstance(node, ast.List):
        return [_evaluated(item) for item in node.elts]
    return ast.literal_eval(node)


def test_every_documented_call_matches_its_tools_advertised_input_schema(client, key):
    tools = result(modern(client, "tools/list", key=key))["tools"]
    schemas = {tool["name"]: tool["inputSchema"] for tool in tools}
    calls = documented_calls()

    assert {"validate_workflow", "create_workflow", "update_workflow"} <= {n for n, _ in calls}
    for name, arguments in calls:
        errors = [e.message for e in Draft202012Validator(schemas[name]).iter_errors(arguments)]
        assert errors == [], (name, errors)


@pytest.mark.parametrize("tool", ["validate_workflow", "create_workflow", "update_workflow"])
def test_a_definition_is_advertised_as_text_or_an_object_with_the_size_limit_on_the_text(
    client, key, tool
):
    tools = result(modern(client, "tools/list", key=key))["tools"]
    schema = next(each["inputSchema"] for each in tools if each["name"] == tool)
    validator = Draft202012Validator(schema)
    named = {"name": "count_files"} if tool == "update_workflow" else {}

    assert validator.is_valid({**named, "definition": count_files()})
    assert validator.is_valid({**named, "definition": "version: '1.0'\n"})
    assert not validator.is_valid({**named, "definition": "x" * 1_000_001})
    assert not validator.is_valid({**named, "definition": 42})
