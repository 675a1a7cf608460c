"""mcp nodes: the server is known, the tool exists there, and the args fit its inputSchema."""

from __future__ import annotations

import pytest

from graphs.engine.checks.all_checks import ToolSchema
from tests.graphs.validation.helpers import (
    codes,
    count_files,
    fixed,
    flat,
    node,
    only,
    validate,
)

pytestmark = pytest.mark.timeout(30)


def _call(document, **fields):
    call = node(document, "list_directory_node")
    call.update(fields)
    return call


def test_an_unknown_server_suggests_the_closest_known_one():
    document = count_files()
    _call(document, server="filesytem")

    problem = only(validate(document, registered_servers=["github"]), "unknown_server")

    assert (problem.severity, problem.node) == ("error", "list_directory_node")
    assert problem.path == "/tools/0/nodes/1/server"
    assert "unknown server 'filesytem'" in problem.message
    assert "did you mean 'filesystem'?" in problem.message
    assert "servers: filesystem, github" in problem.message
    assert fixed(document, problem) == []


def test_a_registered_provider_may_be_named_without_being_declared():
    # Drafts declare it as the registry shows it (graphs/authoring/drafts.py), so it is no problem.
    document = count_files()
    del document["mcpServers"]

    assert validate(document, registered_servers=["filesystem"]) == []


def test_a_server_whose_tools_are_unknown_is_not_checked_and_says_so():
    document = count_files()
    _call(document, tool="no_such_tool", args={"anything": 1})

    problems = validate(document, tools_of=lambda _server: None)

    problem = only(problems, "tools_unknown")
    assert (problem.severity, problem.node, problem.path) == (
        "warning",
        None,
        "/mcpServers/filesystem",
    )
    assert "its tools are not known here" in problem.message
    assert problem.fix is None
    assert codes(problems) == ["tools_unknown"]


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_an_unknown_tool_suggests_the_closest(form):
    document = count_files()
    _call(document, tool="list_dir")
    if form == "flat":
        document = flat(document)

    problem = only(validate(document), "unknown_tool")

    assert problem.path == ("/tools/0/nodes/1/tool" if form == "nested" else "/nodes/1/tool")
    assert "server 'filesystem' has no tool 'list_dir'; did you mean 'list_directory'?" in (
        problem.message
    )
    assert "its tools: get_file_info, list_directory, read_text_file" in problem.message
    assert fixed(document, problem) == []


def test_a_tool_written_as_its_node_spec_name_is_corrected():
    document = count_files()
    _call(document, tool="mcp-filesystem-list_directory")

    problem = only(validate(document), "unknown_tool")

    assert problem.fix == [
        {"op": "replace", "path": "/tools/0/nodes/1/tool", "value": "list_directory"}
    ]
    assert fixed(document, problem) == []


def test_a_missing_required_argument_is_taken_from_the_entry_when_it_has_it():
    document = count_files()
    document["tools"][0]["inputSchema"]["properties"]["path"] = {"type": "string"}
    _call(document, args={})

    problem = only(validate(document), "arg_missing")

    assert (problem.severity, problem.path) == ("error", "/tools/0/nodes/1/args")
    assert "tool 'list_directory' requires the argument 'path' (string)" in problem.message
    assert problem.fix == [
        {"op": "add", "path": "/tools/0/nodes/1/args/path", "value": "$.entry.path"}
    ]
    assert fixed(document, problem) == []


def test_a_missing_required_argument_without_a_likely_value_has_no_fix():
    document = count_files()
    _call(document, args={})

    problem = only(validate(document), "arg_missing")

    assert problem.fix is None


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_an_unknown_argument_is_moved_to_the_one_it_resembles(form):
    document = count_files()
    _call(document, args={"paht": "$.entry.directory"})
    if form == "flat":
        document = flat(document)

    problems = validate(document)
    problem = only(problems, "arg_unknown")

    assert problem.path == (
        "/tools/0/nodes/1/args/paht" if form == "nested" else "/nodes/1/args/paht"
    )
    assert "takes no argument 'paht'; did you mean 'path'?" in problem.message
    assert problem.fix == [
        {"op": "move", "from": problem.path, "path": problem.path.replace("paht", "path")}
    ]
    # The required `path` is missing too, and the same move fixes it.
    assert only(problems, "arg_missing").fix == problem.fix
    assert fixed(document, problem) == []


def test_an_unknown_argument_like_none_is_removed():
    document = count_files()
    _call(document, args={"path": "$.entry.directory", "recursive": True})

    problem = only(validate(document), "arg_unknown")

    assert "remove it, or use its arguments: path" in problem.message
    assert problem.fix == [{"op": "remove", "path": "/tools/0/nodes/1/args/recursive"}]
    assert fixed(document, problem) == []


def test_an_open_input_schema_takes_any_argument():
    document = count_files()
    _call(document, tool="read_text_file", args={"path": "/x", "encoding": "utf-8"})
    schema = ToolSchema(
        {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": True}
    )

    assert validate(document, tools_of=lambda _s: {"read_text_file": schema}) == []


@pytest.mark.parametrize(
    ("written", "converted"),
    [("10", 10), ("2.5", 2.5), ({"literal": "7"}, 7)],
)
def test_a_literal_of_the_wrong_type_is_converted_when_nothing_is_lost(written, converted):
    document = count_files()
    _call(document, tool="read_text_file", args={"path": "$.entry.directory", "head": written})

    problem = only(validate(document), "arg_wrong_type")

    where = "/tools/0/nodes/1/args/head" + ("/literal" if isinstance(written, dict) else "")
    assert (problem.severity, problem.path) == ("error", where)
    assert "is a string, but tool 'read_text_file' takes a number here" in problem.message
    assert problem.fix == [{"op": "replace", "path": where, "value": converted}]
    assert fixed(document, problem) == []


def test_a_literal_of_the_wrong_type_that_cannot_be_converted():
    document = count_files()
    _call(document, args={"path": ["/a", "/b"]})

    problem = only(validate(document), "arg_wrong_type")

    assert "['/a', '/b'] is a array, but tool 'list_directory' takes a string" in problem.message
    assert problem.fix is None


@pytest.mark.parametrize(
    ("argument", "expression", "gives", "takes"),
    [
        ("head", '$string($.entry.directory) & "/"', "string", "number"),  # its own type
        ("path", "$count($.entry.directory)", "number", "string"),
        ("head", "$.entry.depth", "boolean", "number"),  # the entry's inputSchema says so
    ],
)
def test_an_expression_argument_of_a_known_wrong_type_is_an_error(
    argument, expression, gives, takes
):
    document = count_files()
    document["tools"][0]["inputSchema"]["properties"]["depth"] = {"type": "boolean"}
    args = {"path": "$.entry.directory", argument: expression}
    _call(document, tool="read_text_file", args=args)

    problem = only(validate(document), "arg_expression_type")

    assert (problem.severity, problem.path) == ("error", f"/tools/0/nodes/1/args/{argument}")
    assert f"the expression gives a {gives}" in problem.message
    assert f"takes a {takes} here" in problem.message
    assert problem.fix is None  # converting it is the author's choice


def test_an_expression_argument_in_the_expr_form_points_at_its_text():
    document = count_files()
    _call(document, args={"path": {"expr": "$count($.entry.directory)"}})

    problem = only(validate(document), "arg_expression_type")

    assert problem.path == "/tools/0/nodes/1/args/path/expr"


def test_an_argument_read_from_an_upstream_tools_output_of_another_type_is_a_warning():
    document = count_files()
    nodes = document["tools"][0]["nodes"]
    nodes.insert(
        1,
        {
            "id": "info",
            "type": "mcp",
            "server": "filesystem",
            "tool": "get_file_info",
            "args": {"path": "$.entry.directory"},
            "next": "list_directory_node",
        },
    )
    nodes[0]["next"] = "info"
    _call(document, args={"path": "$.info.size"})

    problem = only(validate(document), "arg_flow_type")

    assert (problem.severity, problem.node) == ("warning", "list_directory_node")
    assert "gives a integer (from an upstream tool's outputSchema)" in problem.message


def test_arguments_of_unknown_type_are_left_alone():
    document = count_files()
    _call(document, args={"path": "$lookup($.entry, 'directory')"})

    assert validate(document) == []
