"""JSONata, JSON Logic and data flow: what expressions read, and what the exit returns."""

from __future__ import annotations

import pytest

from graphs.engine import DefinitionError, parse_definition
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


def _transform(document, expr):
    node(document, "count_files_node")["transform"]["expr"] = expr
    return document


def _routed(rule, *, target="count_files_node"):
    """count_files with a switch between the call and the count: rule -> target, else the
    count (not the exit: the exit would return the switch's output, the target's id)."""
    document = count_files()
    node(document, "list_directory_node")["next"] = "route"
    document["tools"][0]["nodes"].insert(
        2,
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"rule": rule, "target": target}],
            "default": "count_files_node",
        },
    )
    return document


def test_a_jsonata_syntax_error_gives_its_position():
    document = _transform(count_files(), '{ "count": $count($.list_directory_node.content }')

    problem = only(validate(document), "expression_syntax")

    assert (problem.severity, problem.node) == ("error", "count_files_node")
    assert problem.path == "/tools/0/nodes/2/transform/expr"
    assert "JSONata does not parse" in problem.message
    assert "Expected ), got } (at character 49)" in problem.message


def test_a_regex_re2_cannot_run():
    document = _transform(count_files(), "$match($.entry.directory, /(?=a)b/)")

    problem = only(validate(document), "regex_refused")

    assert problem.path == "/tools/0/nodes/2/transform/expr"
    assert "lookahead `(?=` is not supported" in problem.message


def test_an_expression_too_long_to_parse_here():
    document = _transform(count_files(), "1" + " + 1" * 3000)

    problem = only(validate(document), "expression_too_long")

    assert "12,001 characters long, over the limit of 10,000" in problem.message


def test_an_expression_nested_too_deeply_is_refused_not_raised():
    document = _transform(count_files(), "(" * 4000 + "1" + ")" * 4000)

    problem = only(validate(document), "expression_syntax")

    assert "nests too deeply" in problem.message
    # Import says the same where it used to raise RecursionError.
    with pytest.raises(DefinitionError, match="nests too deeply"):
        parse_definition(document)


def test_an_expr_object_with_another_key():
    document = count_files()
    node(document, "list_directory_node")["args"] = {"path": {"expr": "$.entry.directory", "x": 1}}

    problem = only(validate(document), "invalid_expression_object")

    assert problem.path == "/tools/0/nodes/1/args/path"
    assert "wrap it: {literal: {...}}" in problem.message


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_a_node_reference_naming_no_node_suggests_the_closest(form):
    document = _transform(
        count_files(), '{ "count": $count($split($.list_dir_node.content, "x")) }'
    )
    if form == "flat":
        document = flat(document)

    problem = only(validate(document), "node_reference_unknown")

    assert (problem.severity, problem.node) == ("error", "count_files_node")
    assert problem.path == (
        "/tools/0/nodes/2/transform/expr" if form == "nested" else "/nodes/2/transform/expr"
    )
    assert "reads the output of node 'list_dir_node', but this tool has no such node" in (
        problem.message
    )
    assert "did you mean 'list_directory_node'?" in problem.message
    assert problem.fix[0]["value"] == (
        '{ "count": $count($split($.list_directory_node.content, "x")) }'
    )
    assert fixed(document, problem) == []


def test_a_bare_name_and_a_switch_var_read_nodes_too():
    document = _routed({"==": [{"var": "entri.directory"}, "/tmp"]})

    problem = only(validate(document), "node_reference_unknown")

    assert problem.path == "/tools/0/nodes/2/conditions/0/rule/==/0/var"
    assert fixed(document, problem) == []


def test_names_inside_predicates_and_json_logic_scopes_are_the_items_not_nodes():
    document = _routed(
        {"some": [{"var": "list_directory_node.items"}, {"==": [{"var": "kind"}, "file"]}]}
    )
    _transform(document, '{ "count": $count($.list_directory_node.items[kind = "file"]) }')

    assert "node_reference_unknown" not in codes(validate(document))


def test_a_node_that_cannot_have_run_before_is_a_warning():
    document = count_files()
    node(document, "list_directory_node")["args"] = {"path": "$.count_files_node.count"}

    problem = only(validate(document), "node_not_run_before")

    assert (problem.severity, problem.node) == ("warning", "list_directory_node")
    assert problem.path == "/tools/0/nodes/1/args/path"
    assert "'count_files_node', which cannot have run before 'list_directory_node'" in (
        problem.message
    )


def test_a_node_on_a_loop_may_read_its_own_last_output():
    document = _routed({"<": [{"var": "count_files_node.count"}, 3]}, target="list_directory_node")
    node(document, "list_directory_node")["next"] = "count_files_node"
    node(document, "count_files_node")["next"] = "route"

    assert "node_not_run_before" not in codes(validate(document))


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_a_history_function_naming_no_node(form):
    document = _transform(count_files(), '{ "count": $executionCount("list_directory") }')
    if form == "flat":
        document = flat(document)

    problem = only(validate(document), "history_node_unknown")

    assert problem.severity == "error"
    assert problem.path.endswith("/2/transform/expr")
    assert "$executionCount('list_directory') names no node of this tool" in problem.message
    assert "did you mean 'list_directory_node'?" in problem.message
    assert fixed(document, problem) == []


def test_a_field_the_entry_does_not_take():
    document = count_files()
    node(document, "list_directory_node")["args"] = {"path": "$.entry.directroy"}

    problem = only(validate(document), "field_not_produced")

    assert (problem.severity, problem.path) == ("warning", "/tools/0/nodes/1/args/path")
    assert "reads `entry.directroy`, but the entry 'entry' (the tool's inputSchema)" in (
        problem.message
    )
    assert "did you mean 'directory'?" in problem.message
    assert fixed(document, problem) == []


def test_a_field_an_upstream_tool_does_not_return():
    document = count_files()
    call = node(document, "list_directory_node")
    call.update(tool="get_file_info")
    _transform(document, '{ "count": $.list_directory_node.sise }')

    problem = only(validate(document), "field_not_produced")

    assert "the output of 'list_directory_node' (its tool's outputSchema)" in problem.message
    assert "(it declares size, modified, isDirectory)" in problem.message
    assert fixed(document, problem) == []


def test_a_field_a_transform_does_not_build():
    document = count_files()
    node(document, "count_files_node")["next"] = "route"
    document["tools"][0]["nodes"].insert(
        3,
        {
            "id": "route",
            "type": "switch",
            "conditions": [
                {"rule": {"==": [{"var": "count_files_node.cuont"}, 0]}, "target": "exit"}
            ],
            "default": "exit",
        },
    )

    problems = validate(document)
    problem = only(problems, "field_not_produced")

    assert (problem.node, problem.path) == ("route", "/tools/0/nodes/3/conditions/0/rule/==/0/var")
    assert "the value node 'count_files_node' builds has no field 'cuont'" in problem.message
    assert fixed(document, problem)
    # The switch's output, its target's id, is what the exit returns here: a text.
    assert "exit_output_mismatch" in codes(problems)


def test_an_unknown_json_logic_operator_is_renamed_to_the_one_meant():
    document = _routed({"eq": [{"var": "entry.directory"}, "/tmp"]})

    problem = only(validate(document), "rule_unknown_operator")

    assert (problem.severity, problem.path) == ("error", "/tools/0/nodes/2/conditions/0/rule/eq")
    assert "unknown operator 'eq'" in problem.message
    assert "did you mean '=='?" in problem.message
    assert fixed(document, problem) == []


@pytest.mark.parametrize("operator", ["method", "log"])
def test_a_blocked_json_logic_operator_is_named(operator):
    document = _routed({"and": [True, {operator: ["abc"]}]})

    problem = only(validate(document), "rule_blocked_operator")

    assert problem.path == f"/tools/0/nodes/2/conditions/0/rule/and/1/{operator}"
    assert f"the `{operator}` operator is" in problem.message
    assert problem.fix is None


@pytest.mark.parametrize(
    ("rule", "where", "says"),
    [
        ({"==": [1]}, "/==", "`==` takes 2 argument(s), not 1"),
        ({"!": [1, 2]}, "/!", "`!` takes 1 argument(s), not 2"),
        ({"or": [{"<": [1, 2, 3, 4]}]}, "/or/0/<", "`<` takes 2 to 3 argument(s), not 4"),
        ({"map": [[1]]}, "/map", "`map` takes [array, rule]"),
    ],
)
def test_a_json_logic_operator_with_the_wrong_number_of_arguments(rule, where, says):
    document = _routed(rule)

    problem = only(validate(document), "rule_wrong_arity")

    assert problem.severity == "error"
    assert problem.path == "/tools/0/nodes/2/conditions/0/rule" + where
    assert says in problem.message


def test_a_rule_that_is_not_an_operator_object():
    document = _routed([{"==": [1, 1]}])

    problem = only(validate(document), "rule_invalid")

    assert problem.path == "/tools/0/nodes/2/conditions/0/rule"
    assert "a rule must be a JSON Logic object with one operator" in problem.message


def test_a_var_path_that_is_not_jsonata():
    document = _routed({"var": "entry.items.0"})

    problem = only(validate(document), "expression_syntax")

    assert problem.path == "/tools/0/nodes/2/conditions/0/rule/var"
    assert 'rather than "entry.items.0"' in problem.message


def test_the_exit_value_missing_what_the_output_schema_declares_is_renamed():
    document = _transform(
        count_files(), '{ "cuont": $count($split($.list_directory_node.content, "x")) }'
    )

    problem = only(validate(document), "exit_output_mismatch")

    assert (problem.severity, problem.node) == ("warning", "count_files_node")
    assert problem.path == "/tools/0/nodes/2/transform/expr"
    assert "none of the properties the tool's outputSchema declares (count)" in problem.message
    assert fixed(document, problem) == []


def test_the_exit_value_misspelling_a_required_output():
    document = count_files()
    schema = document["tools"][0]["outputSchema"]
    schema["properties"]["files"] = {"type": "array"}
    schema["required"] = ["count"]
    _transform(document, '{ "cont": 1, "files": [] }')

    problem = only(validate(document), "exit_output_mismatch")

    assert "no 'count', a property the tool's outputSchema requires" in problem.message
    assert "it has 'cont' instead" in problem.message
    assert fixed(document, problem) == []


def test_the_exit_value_of_the_wrong_type():
    document = _transform(count_files(), '{ "count": "many" }')

    problem = only(validate(document), "exit_output_mismatch")

    assert "whose 'count' is a string, but the tool's outputSchema declares number" in (
        problem.message
    )
    assert problem.fix is None


def test_the_exit_value_that_is_certainly_not_an_object_is_an_error():
    document = _transform(count_files(), '$count($split($.list_directory_node.content, "x"))')

    problem = only(validate(document), "exit_output_mismatch")

    assert problem.severity == "error"  # every run ending there fails: import refuses it
    assert "a number, not an object as the tool's outputSchema asks" in problem.message
    assert "declares no `result` property to hold it" in problem.message


def test_a_var_path_that_is_not_text():
    document = _routed({"==": [{"var": ["entry", 1, 2]}, 1]})

    problem = only(validate(document), "rule_wrong_arity")
    assert problem.path == "/tools/0/nodes/2/conditions/0/rule/==/0/var"

    document = _routed({"==": [{"var": 3}, 1]})

    problem = only(validate(document), "rule_invalid_path")
    assert problem.path == "/tools/0/nodes/2/conditions/0/rule/==/0/var"
    assert "a path must be a JSONata string such as" in problem.message
