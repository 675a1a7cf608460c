"""mcpGraph's earlier file form (top-level `nodes`, `tool:` on each entry and exit node) is
read as the nested form: imported, run and exported (as the nested form) unchanged."""

from __future__ import annotations

import time

import pytest
import yaml

from graphs.authoring.files import graph_export
from graphs.engine import DefinitionError
from graphs.engine.format.flat_form import nested_form
from graphs.engine.format.parsing import parse_definition
from graphs.execution.runs import RunRequest, workflow_call
from tests.graph_files import FILES, import_file

pytestmark = pytest.mark.timeout(30)

FLAT = (FILES / "flat_form.yaml").read_text()


def test_each_tool_gets_the_nodes_its_entry_reaches_in_file_order():
    definition = parse_definition(FLAT)

    nodes = {tool.name: [node.id for node in tool.nodes] for tool in definition.tools}
    assert nodes == {
        "double": ["start", "twice", "finish"],
        "sign_of": ["check", "sign", "positive", "not_positive", "done"],
    }


def test_a_flat_file_imports_runs_and_exports_in_the_nested_form(db):
    report = import_file("flat_form.yaml")

    assert sorted(report.created) == ["double", "sign_of"]
    assert workflow_call(RunRequest(name="double", arguments={"x": 21})).result == {"x": 42}
    outcome = workflow_call(RunRequest(name="sign_of", arguments={"x": -1}))
    assert outcome.result == {"sign": "zero or negative"}
    exported = yaml.safe_load(graph_export(name="flatForm"))
    assert "nodes" not in exported
    assert [len(tool["nodes"]) for tool in exported["tools"]] == [3, 5]
    assert parse_definition(graph_export(name="flatForm")) == parse_definition(FLAT)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda raw: raw["nodes"].pop(1),  # sign_of's entry
            "tool 'sign_of': the top-level nodes hold 0 entry nodes with tool: sign_of; "
            "give it exactly one",
        ),
        (
            lambda raw: raw["nodes"].append({"id": "stray", "type": "transform"}),
            "field 'nodes', node 'stray': no tool's entry node leads to it",
        ),
        (
            lambda raw: raw["tools"][0].update(nodes=[]),
            "field 'nodes': give the nodes either at the top level",
        ),
        (lambda raw: raw.update(nodes="start"), "field 'nodes': must be a list of nodes"),
    ],
)
def test_what_cannot_be_shared_out_is_a_problem_that_says_so(change, problem):
    raw = yaml.safe_load(FLAT)
    change(raw)

    with pytest.raises(DefinitionError) as refused:
        parse_definition(raw)

    assert any(found.startswith(problem) for found in refused.value.problems), (
        refused.value.problems
    )


def test_sharing_out_grows_with_the_nodes_not_tools_times_nodes():
    """An author's largest file: 5,000 tools of two nodes each (10,000 nodes); scanning every
    node for every tool would take 50 million steps."""
    count = 5000
    tools = [{"name": f"t{i}"} for i in range(count)]
    nodes = []
    for i in range(count):
        nodes += [
            {"id": f"e{i}", "type": "entry", "tool": f"t{i}", "next": f"x{i}"},
            {"id": f"x{i}", "type": "exit", "tool": f"t{i}"},
        ]

    # CPU time, not the wall's: a loaded machine must not fail a bound on the work done.
    started = time.process_time()
    nested, problems = nested_form({"tools": tools, "nodes": nodes})

    assert time.process_time() - started < 1.0
    assert not problems
    assert [node["id"] for node in nested["tools"][4321]["nodes"]] == ["e4321", "x4321"]
