"""Limits above the server's ceilings, changes that break a workflow's callers, and what
bounds validation's own work on hostile definitions."""

from __future__ import annotations

import itertools
import time

import pytest

from graphs.engine.checks.all_checks import LimitCeiling, ToolSchema
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

CEILINGS = [
    LimitCeiling("maxNodeExecutions", 10000, "GRAPHS_MAX_NODE_EXECUTIONS_CEILING"),
    LimitCeiling("maxExecutionTimeMs", 600000, "GRAPHS_MAX_EXECUTION_TIME_MS_CEILING"),
]
OLD = ToolSchema(
    {
        "type": "object",
        "properties": {"directory": {"type": "string"}, "pattern": {"type": "string"}},
        "required": ["directory"],
    },
    {"type": "object", "properties": {"count": {"type": "number"}, "names": {"type": "array"}}},
)


@pytest.mark.parametrize("form", ["nested", "flat"])
def test_a_limit_above_the_ceiling_is_lowered_to_it(form):
    document = count_files()
    document["executionLimits"]["maxNodeExecutions"] = 1_000_000_000
    if form == "flat":
        document = flat(document)

    problem = only(validate(document, ceilings=CEILINGS), "limit_above_ceiling")

    assert (problem.severity, problem.node) == ("error", None)
    assert problem.path == "/executionLimits/maxNodeExecutions"
    # The words an import refuses it with (graphs/execution/limits.py).
    assert problem.message == (
        "maxNodeExecutions is 1000000000, above this server's ceiling of 10000 (setting "
        "GRAPHS_MAX_NODE_EXECUTIONS_CEILING): set maxNodeExecutions to 10000 or less, or ask "
        "an operator to raise the ceiling."
    )
    assert problem.fix == [
        {"op": "replace", "path": "/executionLimits/maxNodeExecutions", "value": 10000}
    ]
    assert fixed(document, problem, ceilings=CEILINGS) == []


def test_a_default_above_a_lowered_ceiling_is_written_out():
    document = count_files()
    del document["executionLimits"]
    ceilings = [LimitCeiling("maxNodeExecutions", 500, "GRAPHS_MAX_NODE_EXECUTIONS_CEILING")]

    problem = only(validate(document, ceilings=ceilings), "limit_above_ceiling")

    assert problem.path == ""
    assert "maxNodeExecutions is 1000, above this server's ceiling of 500" in problem.message
    assert fixed(document, problem, ceilings=ceilings) == []


def test_no_change_breaks_no_caller():
    document = count_files()
    same = ToolSchema(document["tools"][0]["inputSchema"], document["tools"][0]["outputSchema"])

    assert validate(document, previous={"count_files": same}) == []


def test_changes_that_break_callers_are_warnings():
    document = count_files()
    schema = document["tools"][0]["inputSchema"]
    schema["properties"]["depth"] = {"type": "integer"}
    schema["required"] = ["directory", "depth"]
    document["tools"][0]["inputSchema"]["properties"]["directory"] = {"type": "array"}

    problems = validate(document, previous={"count_files": OLD})

    assert all(problem.severity == "warning" for problem in problems)
    removed = only(problems, "input_property_removed")
    assert removed.path == "/tools/0/inputSchema"
    assert "input 'pattern' is removed" in removed.message
    required = only(problems, "input_newly_required")
    assert required.path == "/tools/0/inputSchema/required/1"
    assert "input 'depth' is now required" in required.message
    changed = only(problems, "input_type_changed")
    assert changed.path == "/tools/0/inputSchema/properties/directory"
    assert "was a string and is now a array" in changed.message
    output = only(problems, "output_property_removed")
    assert output.path == "/tools/0/outputSchema"
    assert "output 'names' is removed" in output.message


def test_an_output_type_changed():
    document = count_files()
    document["tools"][0]["outputSchema"]["properties"]["names"] = {"type": "string"}
    _transform_count = node(document, "count_files_node")["transform"]
    _transform_count["expr"] = '{ "count": 1, "names": "a" }'

    problem = only(validate(document, previous={"count_files": OLD}), "output_type_changed")

    assert problem.path == "/tools/0/outputSchema/properties/names"
    assert "output 'names' was a array and is now a string" in problem.message


def test_a_renamed_tool_loses_its_callers():
    document = count_files()
    document["tools"][0]["name"] = "count_the_files"

    problem = only(validate(document, previous={"count_files": OLD}), "tool_renamed")

    assert problem.path == "/tools/0/name"
    assert "keep the name 'count_files'" in problem.message


def test_a_definition_too_deep_or_too_large_as_data_is_one_problem():
    deep: dict = {}
    inner = deep
    for _ in range(200):
        inner["x"] = {}
        inner = inner["x"]
    document = count_files()
    document["tools"][0]["description"] = deep

    [problem] = validate(document)
    assert (problem.code, problem.path) == ("definition_too_large", "")
    assert "nests more than 100 levels deep" in problem.message

    document = count_files()
    document["tools"][0]["description"] = "x" * 1_000_001
    [problem] = validate(document)
    assert "more than 1,000,000 characters" in problem.message


def test_the_jsonata_parsed_is_bounded_in_total():
    document = count_files()
    expression = "1" + " + 1" * 2400  # 9,601 characters, under the limit for one
    for index in range(8):
        document["tools"][0]["nodes"].insert(
            3 + index,
            {
                "id": f"t{index}",
                "type": "transform",
                "transform": {"expr": expression},
                "next": "exit",
            },
        )
    started = time.monotonic()

    problems = validate(document)

    assert time.monotonic() - started < 5
    too_long = [problem for problem in problems if problem.code == "expression_too_long"]
    assert too_long
    assert "longer together than this check parses" in too_long[0].message


def test_many_problems_are_capped():
    document = count_files()
    for index in range(300):
        document[f"extra_{index}"] = index

    problems = validate(document, max_problems=50)

    assert len(problems) == 51
    assert problems[-1].code == "too_many_problems"
    assert "250 more problem(s) are not shown" in problems[-1].message


@pytest.mark.parametrize("length", [1990, 2100])
def test_a_long_chain_is_checked_in_linear_time_and_a_longer_one_refused(length):
    document = count_files()
    chain = [
        {"id": f"n{index}", "type": "transform", "transform": {"expr": f"$.n{index - 1}"}}
        for index in range(1, length)
    ]
    for item, following in itertools.pairwise(chain):
        item["next"] = following["id"]
    chain[0]["transform"]["expr"] = "$.entry"
    # A loop with no way out: none of the chain reaches the exit, and each node says so.
    chain[-1]["next"] = "n1"
    document["tools"][0]["nodes"] = [
        {"id": "entry", "type": "entry", "next": "n1"},
        *chain,
        {"id": "exit", "type": "exit"},
    ]
    del document["tools"][0]["outputSchema"]
    started = time.monotonic()

    problems = validate(document)

    assert time.monotonic() - started < 5
    if length < 2000:
        assert set(codes(problems)) == {"no_path_to_exit", "unreachable_node", "too_many_problems"}
    else:
        [problem] = problems
        assert problem.code == "definition_too_large"
        assert "2,101 nodes, more than the 2,000 validation reads" in problem.message


def test_a_path_of_too_many_steps_is_not_parsed():
    document = count_files()
    node(document, "count_files_node")["transform"]["expr"] = "$.entry" + ".x" * 2600
    started = time.monotonic()

    problem = only(validate(document), "expression_too_long")

    assert time.monotonic() - started < 1  # parsed, it would take seconds
    assert "2,601 `.` path steps, over the limit of 500" in problem.message
