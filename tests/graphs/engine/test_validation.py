"""Every problem of a definition is found before it runs, named by tool, node and field."""

from __future__ import annotations

import copy

import pytest

from graphs.engine import (
    DefinitionError,
    Node,
    ToolGraph,
    compile_tool,
    parse_definition,
    parse_tool,
)
from tests.graphs.engine.helpers import OBJECT, chain, tool, transform

ENTRY = {"id": "entry", "type": "entry", "next": "exit"}
EXIT = {"id": "exit", "type": "exit"}


def problems(raw_tool, servers=("filesystem",)) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        parse_tool(raw_tool, server_names=servers)
    assert str(caught.value) == "\n".join(caught.value.problems)
    return caught.value.problems


def test_an_unknown_server_is_named_with_the_servers_that_exist():
    raw = chain(
        {
            "id": "list_directory_node",
            "type": "mcp",
            "server": "filesytem",
            "tool": "list_directory",
            "args": {},
        }
    )
    raw["name"] = "count_files"

    assert problems(raw) == [
        "tool 'count_files', node 'list_directory_node', field 'server': unknown server "
        "'filesytem'; defined servers: filesystem"
    ]


def test_a_tool_without_an_entry_node():
    assert problems(tool(EXIT)) == [
        "tool 't': no entry node; a tool has exactly one node with `type: entry`"
    ]


def test_a_tool_with_two_entry_nodes():
    [problem] = problems(tool(ENTRY, {"id": "again", "type": "entry", "next": "exit"}, EXIT))

    assert problem.startswith("tool 't': 2 entry nodes (entry, again)")


def test_a_tool_without_an_exit_node_or_with_two():
    assert "tool 't': no exit node" in problems(tool({**ENTRY, "next": "entry"}))[0]
    assert problems(tool(ENTRY, EXIT, {"id": "exit2", "type": "exit"}))[0].startswith(
        "tool 't': 2 exit nodes (exit, exit2)"
    )


def test_a_next_that_names_no_node_suggests_the_closest_one():
    problem = problems(chain(transform("shape", "1", next="exti")))[0]

    assert problem == (
        "tool 't', node 'shape', field 'next': no node 'exti' in this tool; did you mean "
        "'exit'? nodes: entry, shape, exit"
    )


def test_switch_targets_and_defaults_that_name_no_node():
    raw = tool(
        {**ENTRY, "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"rule": {"==": [1, 1]}, "target": "nowhere"}],
            "default": "void",
        },
        EXIT,
    )

    found = problems(raw)

    assert found[0].startswith("tool 't', node 'route', field 'conditions[0].target': no node")
    assert found[1].startswith("tool 't', node 'route', field 'default': no node 'void'")


def test_a_node_that_cannot_be_reached_from_the_entry():
    [problem] = problems(tool(ENTRY, transform("orphan", "1", next="exit"), EXIT))

    assert problem.startswith("tool 't', node 'orphan': unreachable from the entry node 'entry'")


def test_jsonata_that_does_not_parse_names_the_field_and_the_reason():
    [problem] = problems(chain(transform("shape", "{ 'a': ")))

    assert problem.startswith(
        "tool 't', node 'shape', field 'transform.expr': JSONata does not parse:"
    )


def test_jsonata_in_args_that_does_not_parse_mentions_the_literal_escape():
    raw = chain(
        {
            "id": "call",
            "type": "mcp",
            "server": "filesystem",
            "tool": "x",
            "args": {"outer": [{"price": "$5 off"}]},
        }
    )

    [problem] = problems(raw)

    assert problem.startswith("tool 't', node 'call', field 'args.outer[0].price': JSONata")
    assert "{literal: '$5 off'}" in problem


def test_an_expr_object_with_other_keys_is_ambiguous():
    raw = chain(
        {
            "id": "call",
            "type": "mcp",
            "server": "filesystem",
            "tool": "x",
            "args": {"q": {"expr": "$.entry", "other": 1}},
        }
    )

    [problem] = problems(raw)

    assert problem.startswith("tool 't', node 'call', field 'args.q': an object with an `expr`")


@pytest.mark.parametrize("rule", [True, "entry.ok", ["==", 1, 1], {"==": [1, 1], "!=": [1, 2]}])
def test_a_json_logic_rule_that_is_not_an_object_with_one_operator(rule):
    raw = tool(
        {**ENTRY, "next": "route"},
        {"id": "route", "type": "switch", "conditions": [{"rule": rule, "target": "exit"}]},
        EXIT,
    )

    [problem] = problems(raw)

    assert problem.startswith("tool 't', node 'route', field 'conditions[0].rule': a rule must")


def test_rule_operators_and_var_paths_are_checked():
    rules = [{"and": [{"frobnicate": [1]}]}, {"==": [{"var": "entry.items.0"}, 1]}]
    raw = tool(
        {**ENTRY, "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"rule": rule, "target": "exit"} for rule in rules],
        },
        EXIT,
    )

    unknown, not_jsonata = problems(raw)

    assert unknown.startswith(
        "tool 't', node 'route', field 'conditions[0].rule': unknown operator"
    )
    assert "(at rule.and[0].frobnicate)" in unknown
    assert not_jsonata.startswith("tool 't', node 'route', field 'conditions[1].rule': the path")
    assert '"entry.items[0]"' in not_jsonata


def test_an_unknown_node_type_lists_the_types():
    [problem] = problems(
        tool({**ENTRY, "next": "loop"}, {"id": "loop", "type": "while", "next": "exit"}, EXIT)
    )

    assert problem == (
        "tool 't', node 'loop', field 'type': unknown node type 'while'; use one of entry, mcp, "
        "transform, switch, approval, exit"
    )


def test_unknown_keys_are_named_with_the_keys_allowed():
    found = problems(chain(transform("shape", "1", expr_typo=1)) | {"inputschema": {}})

    assert found == [
        "tool 't': unknown key(s) inputschema; it allows name, description, inputSchema, "
        "outputSchema, nodes",
        "tool 't', node 'shape': unknown key(s) expr_typo; a transform node allows id, type, "
        "transform, next",
    ]


@pytest.mark.parametrize(
    ("node_id", "suggestion"), [("list-dir", "list_dir"), ("1st", "n_1st"), ("null", "n_null")]
)
def test_node_ids_that_expressions_cannot_reach_are_refused_with_a_usable_id(node_id, suggestion):
    [problem] = problems(
        tool({**ENTRY, "next": node_id}, transform(node_id, "1", next="exit"), EXIT)
    )

    assert problem.startswith(f"tool 't', node '{node_id}', field 'id': expressions read")
    assert problem.endswith(f"try '{suggestion}'")


def test_duplicate_node_ids():
    found = problems(
        tool(
            {**ENTRY, "next": "shape"},
            transform("shape", "1", next="exit"),
            transform("shape", "2", next="exit"),
            EXIT,
        )
    )

    assert found == [
        "tool 't', node 'shape', field 'id': 2 nodes have this id; ids must be unique within a tool"
    ]


def test_missing_required_fields_and_wrong_types():
    raw = chain(
        {
            "id": "call",
            "type": "mcp",
            "tool": 5,
            "args": [],
            "timeout": 0,
            "retry": {"count": -1, "backoff": "soon"},
        }
    )

    assert problems(raw) == [
        "tool 't', node 'call', field 'server': missing; a mcp node needs it",
        "tool 't', node 'call', field 'tool': must be a string, got 5",
        "tool 't', node 'call', field 'args': must be an object of the tool's arguments (values "
        "may be expressions), or one expression giving that object; got []",
        "tool 't', node 'call', field 'timeout': must be a positive number of seconds",
        "tool 't', node 'call', field 'retry.count': must be a whole number, 0 or more",
        "tool 't', node 'call', field 'retry.backoff': must be a number of seconds, 0 or more",
    ]


def test_a_rule_less_condition_must_be_the_last_one():
    raw = tool(
        {**ENTRY, "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"target": "exit"}, {"rule": {"==": [1, 1]}, "target": "exit"}],
        },
        EXIT,
    )

    [problem] = problems(raw)

    assert problem.startswith("tool 't', node 'route', field 'conditions[0]': a condition without")


@pytest.mark.parametrize("value", [0, -5, "1000", True, 1.5])
def test_bad_limit_values(value):
    raw = {
        "version": "1",
        "server": {"name": "s", "version": "1"},
        "executionLimits": {"maxNodeExecutions": value},
        "tools": [chain()],
    }

    with pytest.raises(DefinitionError) as caught:
        parse_definition(raw)

    assert caught.value.problems == [
        f"field 'executionLimits.maxNodeExecutions': must be a whole number above 0, got {value!r}"
    ]


def test_server_settings_problems_name_the_server_and_field():
    raw = {
        "version": "1",
        "server": {"name": "s", "version": "1"},
        "tools": [chain()],
        "mcpServers": {
            "a": {"args": []},
            "b": {"type": "carrier-pigeon", "url": "http://x"},
            "c": {"url": "ftp://x"},
            "d": {"command": "x", "env": {"PORT": 80}},
        },
    }

    with pytest.raises(DefinitionError) as caught:
        parse_definition(raw)

    assert caught.value.problems == [
        "server 'a': give either `command` (a stdio server) or `url` (an HTTP or SSE server)",
        "server 'b', field 'type': unknown transport 'carrier-pigeon'; use stdio, streamableHttp "
        "or sse",
        "server 'c', field 'url': must be an http:// or https:// URL",
        "server 'd', field 'env': must map names to strings (quote numbers: \"8080\")",
    ]


def test_every_problem_of_a_definition_is_reported_at_once():
    raw = {
        "version": "1",
        "server": {"name": "s"},
        "tools": [
            chain(transform("a", "(")) | {"name": "one"},
            chain() | {"name": "one"},
            tool(EXIT) | {"name": "two"},
        ],
    }

    with pytest.raises(DefinitionError) as caught:
        parse_definition(raw)

    assert caught.value.problems == [
        "field 'server.version': missing",
        "tool 'one', node 'a', field 'transform.expr': JSONata does not parse: Expected ) "
        "before end of expression (at character 1)",
        "tool 'two': no entry node; a tool has exactly one node with `type: entry`",
    ]
    raw["tools"] = raw["tools"][1:2] * 2
    raw["server"]["version"] = "1"
    with pytest.raises(DefinitionError, match="tool 'one': 2 tools have this name"):
        parse_definition(raw)


def test_compile_tool_checks_a_tool_that_was_not_parsed():
    built = ToolGraph(
        "built",
        "",
        OBJECT,
        None,
        (
            Node("entry", "entry", next="shape"),
            Node("shape", "transform", expr="$.", next="gone"),
            Node("exit", "exit"),
        ),
    )

    with pytest.raises(DefinitionError) as caught:
        compile_tool(built)

    assert [problem.split(":")[0] for problem in caught.value.problems] == [
        "tool 'built', node 'shape', field 'next'",
        "tool 'built', node 'exit'",
        "tool 'built', node 'shape', field 'transform.expr'",
    ]


def test_the_raw_tool_is_not_changed_by_parsing():
    raw = chain(transform("shape", "1"))
    before = copy.deepcopy(raw)

    parse_tool(raw, server_names=[])

    assert raw == before


@pytest.mark.parametrize("name", ["", "count files", "x" * 129, 7])
def test_tool_names_must_be_mcp_tool_names(name):
    [problem] = problems(chain() | {"name": name})

    assert problem.startswith(f"tool #1, field 'name': {name!r} is not a tool name")
