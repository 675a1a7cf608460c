"""What a node's expressions can read (graphs/engine/checks/offered.py): the outputs of the
nodes that can run before it, as ready-to-write JSONata paths, as far as their schemas say,
and bounded. Plain Python: documents as data, the tools they call given by `tools_of`."""

from __future__ import annotations

import time
from typing import Any

import pytest

from graphs.engine.checks import all_checks
from graphs.engine.checks.all_checks import ToolSchema, offered_fields
from graphs.engine.checks.offered import MAX_FIELD_DEPTH, MAX_OFFERED, path_step
from graphs.engine.language.expressions import Expression, Guard
from tests.graphs.validation.helpers import count_files, flat, node, nodes, tools_of

pytestmark = pytest.mark.timeout(30)

ENTRY_ORIGIN = "the workflow's arguments (its inputSchema)"
UNDEFINED = object()


def offered(document: Any, node_id: str, **options: Any) -> list[dict[str, str]]:
    options.setdefault("tools_of", tools_of)
    return [value.as_dict() for value in offered_fields(document, node_id, **options)]


def paths(document: Any, node_id: str, **options: Any) -> list[str]:
    return [value["path"] for value in offered(document, node_id, **options)]


def workflow(node_list: list[dict[str, Any]], input_schema: dict[str, Any] | None = None):
    """A one-tool document (nested form) with these nodes, calling no server."""
    return {
        "version": "1.0",
        "server": {"name": "tests", "version": "1.0.0"},
        "tools": [
            {
                "name": "t",
                "description": "a test tool",
                "inputSchema": input_schema or {"type": "object"},
                "nodes": node_list,
            }
        ],
    }


def with_entry_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """count_files whose arguments have these properties."""
    document = count_files()
    document["tools"][0]["inputSchema"] = {"type": "object", "properties": properties}
    return document


def evaluate(source: str, data: dict[str, Any]) -> Any:
    guard = Guard(time.monotonic() + 60)
    guard.start()
    return Expression(source).evaluate(data, guard.bindings, guard, undefined=UNDEFINED)


def test_the_entrys_fields_are_offered_to_the_node_after_it():
    assert offered(count_files(), "list_directory_node") == [
        {
            "path": "$.entry",
            "type": "object",
            "description": f"the output of 'entry': {ENTRY_ORIGIN}",
            "node": "entry",
            "origin": ENTRY_ORIGIN,
        },
        {
            "path": "$.entry.directory",
            "type": "string",
            "description": "",
            "node": "entry",
            "origin": ENTRY_ORIGIN,
        },
    ]


def test_the_entry_itself_reads_nothing_and_later_nodes_read_every_earlier_one():
    document = count_files()

    assert offered(document, "entry") == []
    assert paths(document, "exit") == [
        "$.entry",
        "$.entry.directory",
        "$.list_directory_node",
        "$.count_files_node",
        "$.count_files_node.count",
    ]


def test_the_flat_form_offers_what_the_nested_form_offers():
    document = count_files()

    assert offered(flat(document), "exit") == offered(document, "exit")


def test_a_field_description_and_title_are_shown():
    document = with_entry_schema(
        {
            "directory": {"type": "string", "description": "Where to count"},
            "depth": {"type": ["integer", "null"], "title": "How deep"},
        }
    )

    fields = offered(document, "list_directory_node")[1:]

    assert [(f["path"], f["type"], f["description"]) for f in fields] == [
        ("$.entry.directory", "string", "Where to count"),
        ("$.entry.depth", "integer | null", "How deep"),
    ]


def branches() -> dict[str, Any]:
    """entry -> route (switch) -> left | right -> exit."""
    return workflow(
        [
            {"id": "entry", "type": "entry", "next": "route"},
            {
                "id": "route",
                "type": "switch",
                "conditions": [
                    {"rule": {"==": [{"var": "entry.side"}, "left"]}, "target": "left"},
                    {"target": "right"},
                ],
            },
            {"id": "left", "type": "transform", "transform": {"expr": '{"l": 1}'}, "next": "exit"},
            {"id": "right", "type": "transform", "transform": {"expr": '{"r": 2}'}, "next": "exit"},
            {"id": "exit", "type": "exit"},
        ],
        {"type": "object", "properties": {"side": {"type": "string"}}},
    )


def test_a_sibling_branch_and_later_nodes_are_not_offered():
    document = branches()

    assert paths(document, "right") == ["$.entry", "$.entry.side", "$.route"]
    assert paths(document, "left") == ["$.entry", "$.entry.side", "$.route"]
    assert paths(document, "route") == ["$.entry", "$.entry.side"]
    assert paths(document, "exit") == [
        "$.entry",
        "$.entry.side",
        "$.route",
        "$.left",
        "$.left.l",
        "$.right",
        "$.right.r",
    ]


def test_a_switchs_value_is_the_target_it_chose():
    [route] = [value for value in offered(branches(), "left") if value["node"] == "route"]

    assert (route["path"], route["type"]) == ("$.route", "string")


def test_nested_object_fields_and_fields_of_arrays_of_objects():
    document = with_entry_schema(
        {
            "directory": {"type": "string"},
            "owner": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "address": {
                        "type": "object",
                        "properties": {
                            "city": {
                                "type": "object",
                                "properties": {"zip": {"type": "string"}},
                            }
                        },
                    },
                },
            },
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"size": {"type": "integer"}, "tags": {"type": "array"}},
                },
            },
            "matrix": {
                "type": "array",
                "items": {"type": "array", "items": {"properties": {"cell": {"type": "number"}}}},
            },
        }
    )

    found = {value["path"]: value["type"] for value in offered(document, "list_directory_node")}

    assert found == {
        "$.entry": "object",
        "$.entry.directory": "string",
        "$.entry.owner": "object",
        "$.entry.owner.name": "string",
        "$.entry.owner.address": "object",
        # MAX_FIELD_DEPTH (3) fields deep, and no deeper: `.zip` would be the fourth.
        "$.entry.owner.address.city": "object",
        # JSONata maps a path over an array: an item's field is read as the array's.
        "$.entry.files": "array",
        "$.entry.files.size": "integer",
        "$.entry.files.tags": "array",
        "$.entry.matrix": "array",
        "$.entry.matrix.cell": "number",
    }
    assert MAX_FIELD_DEPTH == 3


def test_the_offered_paths_read_the_values_they_name():
    document = with_entry_schema(
        {
            "owner": {"type": "object", "properties": {"name": {"type": "string"}}},
            "files": {"type": "array", "items": {"properties": {"size": {"type": "integer"}}}},
        }
    )
    context = {
        "entry": {"owner": {"name": "ada"}, "files": [{"size": 1}, {"size": 2}]},
    }

    values = {path: evaluate(path, context) for path in paths(document, "list_directory_node")}

    assert values["$.entry.owner.name"] == "ada"
    assert values["$.entry.files.size"] == [1, 2]


ODD_NAMES = ["my-field", "a b", "1st", "ünï", "true", "false", "null", "and"]


def test_odd_property_names_are_quoted_in_backticks_and_read_their_value():
    document = with_entry_schema({name: {"type": "string"} for name in ODD_NAMES})
    context = {"entry": {name: f"value of {name}" for name in ODD_NAMES}}

    written = paths(document, "list_directory_node")[1:]

    assert written == [
        "$.entry.`my-field`",
        "$.entry.`a b`",
        "$.entry.`1st`",
        "$.entry.`ünï`",
        # Bare, these are JSONata's literals, not names: `$.entry.true` does not parse.
        "$.entry.`true`",
        "$.entry.`false`",
        "$.entry.`null`",
        "$.entry.and",
    ]
    assert [evaluate(path, context) for path in written] == [
        f"value of {name}" for name in ODD_NAMES
    ]


def test_a_name_holding_a_backtick_is_not_offered_as_a_path_that_reads_another_field():
    # JSONata cannot quote a backtick inside a name: `a``b` is no path to "a`b".
    document = with_entry_schema({"a`b": {"type": "string"}, "ab": {"type": "string"}})

    assert paths(document, "list_directory_node") == ["$.entry", "$.entry.ab"]


def test_path_step():
    assert [path_step(name) for name in ("node_1", "_x", "x-y", "9", "", "null")] == [
        "node_1",
        "_x",
        "`x-y`",
        "`9`",
        "``",
        "`null`",
    ]


def test_at_most_max_offered_values_are_offered_for_a_schema_of_a_thousand_properties():
    document = with_entry_schema({f"p{i}": {"type": "string"} for i in range(1_000)})

    found = paths(document, "exit")

    assert MAX_OFFERED == 200
    assert len(found) == MAX_OFFERED
    assert found[0] == "$.entry"
    assert found[1:] == [f"$.entry.p{i}" for i in range(MAX_OFFERED - 1)]


def loop() -> dict[str, Any]:
    """entry -> step -> more (switch) -> step again, or result -> exit."""
    return workflow(
        [
            {"id": "entry", "type": "entry", "next": "step"},
            {
                "id": "step",
                "type": "transform",
                "transform": {"expr": '{"i": $executionCount("step") + 1}'},
                "next": "more",
            },
            {
                "id": "more",
                "type": "switch",
                "conditions": [
                    {"rule": {"<": [{"var": "$.step.i"}, {"var": "$.entry.n"}]}, "target": "step"},
                    {"target": "result"},
                ],
            },
            {
                "id": "result",
                "type": "transform",
                "transform": {"expr": '{"last": $.step.i}'},
                "next": "exit",
            },
            {"id": "exit", "type": "exit"},
        ],
        {"type": "object", "properties": {"n": {"type": "integer"}}},
    )


def test_a_node_on_a_cycle_reads_itself_and_the_nodes_after_it_on_the_cycle():
    document = loop()

    assert paths(document, "step") == ["$.entry", "$.entry.n", "$.step", "$.step.i", "$.more"]
    assert paths(document, "more") == ["$.entry", "$.entry.n", "$.step", "$.step.i", "$.more"]
    # Off the cycle, a node reads those before it, never itself.
    assert paths(document, "result") == ["$.entry", "$.entry.n", "$.step", "$.step.i", "$.more"]
    assert "$.result" not in paths(document, "result")
    assert paths(document, "exit")[-2:] == ["$.result", "$.result.last"]


def test_an_unknown_node_is_offered_nothing():
    assert offered(count_files(), "no_such_node") == []
    assert offered(count_files(), "") == []


def with_file_info() -> dict[str, Any]:
    """count_files with a call of get_file_info (whose tool has an outputSchema)."""
    document = count_files()
    node(document, "count_files_node")["next"] = "info"
    nodes(document).insert(
        3,
        {
            "id": "info",
            "type": "mcp",
            "server": "filesystem",
            "tool": "get_file_info",
            "args": {"path": "$.entry.directory"},
            "next": "exit",
        },
    )
    return document


def test_an_mcp_node_offers_its_tools_output_schema():
    info = [value for value in offered(with_file_info(), "exit") if value["node"] == "info"]

    origin = "the tool's outputSchema"
    assert [(v["path"], v["type"], v["origin"]) for v in info] == [
        ("$.info", "object", origin),
        ("$.info.size", "integer", origin),
        ("$.info.modified", "string", origin),
        ("$.info.isDirectory", "boolean", origin),
    ]


def test_an_mcp_node_whose_tool_is_not_known_offers_its_output_alone():
    def unknown(server: str) -> dict[str, ToolSchema] | None:
        return None

    info = [
        value
        for value in offered(with_file_info(), "exit", tools_of=unknown)
        if value["node"] == "info"
    ]

    assert info == [
        {
            "path": "$.info",
            "type": "",
            "description": "the output of 'info': not known",
            "node": "info",
            "origin": "not known",
        }
    ]


def test_a_transform_offers_the_shape_inferred_from_its_expression():
    document = count_files()
    node(document, "count_files_node")["transform"]["expr"] = (
        '{ "count": $count($.list_directory_node.content), "where": $.entry.directory, '
        '"summary": { "ok": true } }'
    )

    found = [
        (value["path"], value["type"], value["origin"])
        for value in offered(document, "exit")
        if value["node"] == "count_files_node"
    ]

    origin = "the value the transform builds"
    assert found == [
        ("$.count_files_node", "object", origin),
        ("$.count_files_node.count", "number", origin),
        ("$.count_files_node.where", "string", origin),
        ("$.count_files_node.summary", "object", origin),
        ("$.count_files_node.summary.ok", "boolean", origin),
    ]


def test_a_definition_with_more_text_than_validation_reads_is_offered_nothing():
    document = count_files()
    assert paths(document, "list_directory_node") != []
    document["tools"][0]["description"] = "x" * (all_checks.MAX_CHARS + 1)

    assert offered(document, "list_directory_node") == []


def test_a_definition_with_more_nodes_than_validation_reads_is_offered_nothing():
    document = count_files()
    extra = [
        {"id": f"spare{i}", "type": "transform", "transform": {"expr": "1"}, "next": "exit"}
        for i in range(all_checks.MAX_NODES - len(nodes(document)) + 1)
    ]
    nodes(document).extend(extra)

    assert offered(document, "list_directory_node") == []
    nodes(document).pop()  # MAX_NODES exactly: read
    assert paths(document, "list_directory_node") == ["$.entry", "$.entry.directory"]
