"""Structure: everything import refuses comes back as error problems with codes, pointers in
the form submitted, and fixes that remove them; plus the paths of the graph."""

from __future__ import annotations

import pytest

from graphs.engine import DefinitionError, parse_definition
from graphs.engine.format.parsing import read_definition
from tests.graphs.validation.helpers import (
    codes,
    count_files,
    fixed,
    flat,
    node,
    nodes,
    only,
    validate,
)

pytestmark = pytest.mark.timeout(30)


def test_seed_003s_count_files_has_no_problem_in_either_form():
    assert validate(count_files()) == []
    assert validate(flat(count_files())) == []


def test_import_reports_the_same_words_as_before():
    # The texts import has always given, now taken from the findings validation reads too.
    document = count_files()
    node(document, "list_directory_node")["nxt"] = "x"
    node(document, "count_files_node")["next"] = "exti"
    with pytest.raises(DefinitionError) as caught:
        parse_definition(document)
    assert caught.value.problems == [finding.text for finding in read_definition(document).findings]
    assert caught.value.problems[0] == (
        "tool 'count_files', node 'list_directory_node': unknown key(s) nxt; a mcp node allows "
        "id, type, server, tool, args, next, timeout, retry"
    )


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_an_unknown_key_close_to_an_allowed_one_is_moved_there(form):
    document = count_files()
    call = node(document, "list_directory_node")
    call["nxt"] = call.pop("next")
    if form == "flat":
        document = flat(document)

    problem = only(validate(document), "unknown_key")

    assert problem.severity == "error"
    assert problem.node == "list_directory_node"
    assert problem.path == ("/tools/0/nodes/1/nxt" if form == "nested" else "/nodes/1/nxt")
    assert "unknown key 'nxt'; did you mean 'next'?" in problem.message
    assert fixed(document, problem) == []


def test_an_unknown_key_far_from_any_is_removed():
    document = count_files()
    document["metadata"] = {"owner": "me"}

    problem = only(validate(document), "unknown_key")

    assert (problem.path, problem.node) == ("/metadata", None)
    assert "remove it" in problem.message
    assert problem.fix == [{"op": "remove", "path": "/metadata"}]
    assert fixed(document, problem) == []


def test_a_missing_version_is_added():
    document = count_files()
    del document["version"]

    problem = only(validate(document), "missing_field")

    assert (problem.severity, problem.path) == ("error", "")
    assert "field 'version': missing" in problem.message
    assert fixed(document, problem) == []


def test_a_required_node_field_missing_is_named():
    document = count_files()
    del node(document, "count_files_node")["next"]

    problems = validate(document)
    problem = only(problems, "missing_field")

    assert (problem.node, problem.path) == ("count_files_node", "/tools/0/nodes/2")
    assert "field 'next': missing; a transform node needs it" in problem.message
    assert problem.fix is None
    # The exit is unreachable now, but the node without `next` is not reported as a dead end.
    assert "no_path_to_exit" not in codes(problems)


def test_a_field_of_the_wrong_type():
    document = count_files()
    node(document, "count_files_node")["next"] = 3

    problem = only(validate(document), "invalid_field")

    assert (problem.node, problem.path) == ("count_files_node", "/tools/0/nodes/2/next")
    assert "must be a string, got 3" in problem.message


def test_a_tool_name_mcp_cannot_serve_is_made_one():
    document = count_files()
    document["tools"][0]["name"] = "count files!"

    problem = only(validate(document), "invalid_tool_name")

    assert problem.path == "/tools/0/name"
    assert "'count files!' is not a tool name" in problem.message
    assert problem.fix == [{"op": "replace", "path": "/tools/0/name", "value": "count_files_"}]
    assert fixed(document, problem) == []


def test_two_tools_with_one_name():
    document = count_files()
    document["tools"].append(document["tools"][0])

    problem = only(validate(document), "duplicate_tool_name")

    assert problem.path == "/tools/1/name"
    assert "2 tools have this name; tool names must be unique" in problem.message


def test_an_input_schema_without_its_type_gets_it():
    document = count_files()
    del document["tools"][0]["inputSchema"]["type"]

    problem = only(validate(document), "invalid_schema")

    assert problem.path == "/tools/0/inputSchema"
    assert "must be a JSON Schema of an object" in problem.message
    assert fixed(document, problem) == []


def test_a_node_that_is_not_a_mapping():
    document = count_files()
    nodes(document).insert(1, "list_directory_node")

    problem = only(validate(document), "invalid_node")

    assert (problem.path, problem.node) == ("/tools/0/nodes/1", None)
    assert "a node must be a mapping with a string `id` and a `type`" in problem.message


def test_a_misspelt_node_type_is_corrected():
    document = count_files()
    node(document, "count_files_node")["type"] = "transfrom"

    problem = only(validate(document), "unknown_node_type")

    assert problem.path == "/tools/0/nodes/2/type"
    assert "unknown node type 'transfrom'; use one of entry, mcp, transform" in problem.message
    assert fixed(document, problem) == []


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_duplicate_node_ids_point_at_the_second(form):
    document = count_files()
    nodes(document).insert(3, {"id": "count_files_node", "type": "exit"})
    if form == "flat":
        document = flat(document)

    problems = [p for p in validate(document) if p.code == "duplicate_node_id"]

    assert problems, codes(validate(document))
    assert problems[0].path == "/tools/0/nodes/3/id" if form == "nested" else "/nodes/3/id"
    assert problems[0].node == "count_files_node"
    assert "rename this one" in problems[0].message


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_an_unusable_id_is_renamed_with_the_edges_to_it(form):
    document = count_files()
    node(document, "count_files_node")["id"] = "count-files"
    node(document, "list_directory_node")["next"] = "count-files"
    if form == "flat":
        document = flat(document)

    problem = only(validate(document), "invalid_node_id")

    assert problem.node == "count-files"
    assert problem.path == ("/tools/0/nodes/2/id" if form == "nested" else "/nodes/2/id")
    assert "try 'count_files'" in problem.message
    assert len(problem.fix) == 2  # the id, and the `next` naming it
    assert fixed(document, problem) == []


@pytest.mark.parametrize("node_type", ["entry", "exit"])
def test_a_tool_needs_exactly_one_entry_and_one_exit(node_type):
    document = count_files()
    nodes(document).append({"id": f"another_{node_type}", "type": node_type, "next": "exit"})
    if node_type == "exit":
        del nodes(document)[-1]["next"]

    problem = only(validate(document), f"{node_type}_count")

    assert problem.path == "/tools/0/nodes"
    assert f"2 {node_type} nodes" in problem.message
    assert f"a tool has exactly one node with `type: {node_type}`" in problem.message


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_a_forgotten_exit_that_the_edges_name_is_added(form):
    document = count_files()
    del nodes(document)[-1]
    if form == "flat":
        document = flat(document)

    problems = validate(document)
    problem = only(problems, "exit_count")

    assert problem.path == ("/tools/0/nodes" if form == "nested" else "/nodes")
    assert "no exit node" in problem.message
    after = fixed(document, problem)
    assert "unknown_target" in codes(problems)
    assert after == []  # the edge to it is right now, too


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_a_target_naming_no_node_suggests_the_closest(form):
    document = count_files()
    node(document, "count_files_node")["next"] = "exti"
    if form == "flat":
        document = flat(document)

    problems = validate(document)
    problem = only(problems, "unknown_target")

    assert problem.node == "count_files_node"
    assert problem.path == ("/tools/0/nodes/2/next" if form == "nested" else "/nodes/2/next")
    assert "no node 'exti' in this tool" in problem.message
    assert "did you mean 'exit'" in problem.message
    assert fixed(document, problem) == []


def test_an_unreachable_node():
    document = count_files()
    nodes(document).insert(
        3, {"id": "orphan", "type": "transform", "transform": {"expr": "1"}, "next": "exit"}
    )

    problem = only(validate(document), "unreachable_node")

    assert (problem.node, problem.path) == ("orphan", "/tools/0/nodes/3")
    assert "unreachable from the entry node 'entry'" in problem.message


def test_a_flat_node_no_entry_reaches():
    document = flat(count_files())
    document["nodes"].append({"id": "orphan", "type": "exit", "tool": "count_files"})

    problem = only(validate(document), "unreachable_node")

    assert (problem.node, problem.path) == ("orphan", "/nodes/4")
    assert "no tool's entry node leads to it" in problem.message


def test_nodes_given_both_ways():
    document = flat(count_files())
    document["tools"][0]["nodes"] = []

    problem = only(validate(document), "nodes_both_forms")

    assert problem.path == "/nodes"
    assert "either at the top level" in problem.message


def _switch_loop(default: str | None = None) -> dict:
    document = count_files()
    tool = document["tools"][0]
    tool["nodes"] = [
        {"id": "entry", "type": "entry", "next": "step"},
        {
            "id": "step",
            "type": "transform",
            "transform": {"expr": "$executionCount('step')"},
            "next": "check",
        },
        {
            "id": "check",
            "type": "switch",
            "conditions": [{"rule": {"<": [{"var": "step"}, 3]}, "target": "step"}],
            **({"default": default} if default else {}),
        },
        {"id": "exit", "type": "exit"},
    ]
    del document["mcpServers"]
    tool["outputSchema"] = None
    del tool["outputSchema"]
    return document


def test_a_switch_without_a_default_is_a_warning_fixed_with_the_exit():
    document = _switch_loop()
    # The loop never leaves either: every node after the entry is a dead end.
    document_with_exit_branch = _switch_loop()
    document_with_exit_branch["tools"][0]["nodes"][2]["conditions"].append(
        {"rule": {">=": [{"var": "step"}, 3]}, "target": "exit"}
    )

    problem = only(validate(document_with_exit_branch), "switch_no_default")

    assert (problem.severity, problem.node) == ("warning", "check")
    assert problem.path == "/tools/0/nodes/2"
    assert "a run in which none of its conditions holds fails at this node" in problem.message
    assert problem.fix is None  # it already goes to the exit: no default is likely
    problem = only(validate(document), "switch_no_default")
    assert problem.fix == [{"op": "add", "path": "/tools/0/nodes/2/default", "value": "exit"}]
    assert fixed(document, problem) == []


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_a_node_from_which_no_exit_is_reachable_is_an_error(form):
    # entry -> route: to the exit, or into a loop (step, again) that never leaves.
    document = _switch_loop()
    document["tools"][0]["nodes"] = [
        {"id": "entry", "type": "entry", "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"rule": {"var": "entry.directory"}, "target": "step"}],
            "default": "exit",
        },
        {"id": "step", "type": "transform", "transform": {"expr": "1"}, "next": "again"},
        {
            "id": "again",
            "type": "switch",
            "conditions": [{"rule": {"==": [1, 1]}, "target": "step"}],
        },
        {"id": "exit", "type": "exit"},
    ]
    if form == "flat":
        document = flat(document)

    problems = [p for p in validate(document) if p.code == "no_path_to_exit"]

    assert [p.node for p in problems] == ["step", "again"]
    problem = problems[0]
    assert problem.severity == "error"
    assert problem.path == ("/tools/0/nodes/2" if form == "nested" else "/nodes/2")
    assert "no path from this node reaches the exit" in problem.message
    assert problem.fix == [
        {
            "op": "add",
            "path": "/tools/0/nodes/3/default" if form == "nested" else "/nodes/3/default",
            "value": "exit",
        }
    ]
    assert fixed(document, problem) == []


def test_a_switch_with_neither_condition_nor_default():
    document = _switch_loop()
    document["tools"][0]["nodes"][2]["conditions"] = []

    problem = only(validate(document), "switch_empty")

    assert problem.path == "/tools/0/nodes/2"
    assert "needs at least one condition or a `default`" in problem.message


def test_a_fallback_condition_that_is_not_last():
    document = _switch_loop()
    conditions = document["tools"][0]["nodes"][2]["conditions"]
    conditions.insert(0, {"target": "exit"})

    problem = only(validate(document), "invalid_condition")

    assert problem.path == "/tools/0/nodes/2/conditions/0"
    assert "a condition without `rule` is the fallback, so it must come last" in problem.message


def test_the_reference_implementations_fallback_condition_counts_as_the_default():
    document = _switch_loop()
    document["tools"][0]["nodes"][2]["conditions"].append({"target": "exti"})

    problem = only(validate(document), "unknown_target")

    assert problem.path == "/tools/0/nodes/2/conditions/1/target"
    assert fixed(document, problem) == []


def test_an_entry_naming_another_tool():
    document = count_files()
    nodes(document)[0]["tool"] = "other"

    problem = only(validate(document), "node_tool_mismatch")

    assert problem.path == "/tools/0/nodes/0/tool"
    assert "names tool 'other', but the node is in tool 'count_files'" in problem.message


def test_a_bad_server_entry():
    document = count_files()
    document["mcpServers"]["filesystem"]["cmd"] = "x"

    problem = only(validate(document), "invalid_server")

    assert problem.path == "/mcpServers/filesystem"
    assert "unknown key(s) cmd" in problem.message


def test_a_bad_limit():
    document = count_files()
    document["executionLimits"]["maxNodeExecutions"] = -1

    problem = only(validate(document), "invalid_limit")

    assert problem.path == "/executionLimits/maxNodeExecutions"
    assert "must be a whole number above 0, got -1" in problem.message


def test_not_a_mapping():
    problem = only(validate(["tools"]), "not_a_mapping")

    assert (problem.path, problem.node) == ("", None)
    assert "the definition must be a mapping" in problem.message


def test_a_tool_that_is_not_a_mapping():
    document = count_files()
    document["tools"].append("count_files")

    problem = only(validate(document), "invalid_tool")

    assert (problem.path, problem.node) == ("/tools/1", None)
    assert "tool #2: must be a mapping with name, description" in problem.message


def test_a_flat_tool_without_its_entry():
    document = flat(count_files())
    document["nodes"][0]["tool"] = "other"

    problem = only(validate(document), "entry_count")

    assert problem.path == "/tools/0"
    assert "the top-level nodes hold 0 entry nodes with tool: count_files" in problem.message
