"""Definitions too large to validate are refused while their text is read (issue 25, item 10):
660 KB of 6,000 small nodes, under the byte limit, was built whole (1.6 s) before validation
counted its nodes. The values and the graph nodes are counted in the YAML's event stream,
and the text is refused as soon as either passes what validation reads."""

from __future__ import annotations

import time

import pytest

from bench.hostile_inputs import many_nodes
from graphs.authoring.validation import validate_workflow
from nodespecs.callers import Caller

API = Caller("key:counted", scopes=frozenset({"tools:read", "workflows:write"}))


@pytest.mark.django_db
def test_a_definition_with_too_many_nodes_is_refused_while_it_is_read():
    # 6,000 nodes in 660 KB: read whole before validation counted its nodes.
    text = many_nodes(6000)
    assert len(text.encode()) < 1_000_000
    started = time.process_time()  # CPU time: a loaded machine must not fail the bound

    report = validate_workflow(text, caller=API)

    took = time.process_time() - started
    [problem] = report.problems
    assert problem.code == "definition_too_large"
    assert "has more than 2,000 nodes" in problem.message
    assert took < 0.8, f"{took:.2f} s"


@pytest.mark.django_db
def test_the_nodes_of_the_flat_form_are_counted_too():
    lines = ["version: '1.0'", "server: {name: flat, version: 1.0.0}", "nodes:"]
    lines += [f"- {{id: n{index}, type: exit, tool: t}}" for index in range(2001)]

    [problem] = validate_workflow("\n".join(lines), caller=API).problems

    assert problem.code == "definition_too_large"
    assert "has more than 2,000 nodes" in problem.message


@pytest.mark.django_db
def test_a_definition_with_too_many_values_is_refused_while_it_is_read():
    # 250,000 numbers in 750 KB, under every other bound.
    text = many_nodes(1) + "\n  numbers: [" + ", ".join(["1"] * 250_000) + "]"
    # CPU time, not the wall's: a loaded machine must not fail a bound on the work done.
    started = time.process_time()

    [problem] = validate_workflow(text, caller=API).problems

    assert problem.code == "definition_too_large"
    assert "holds more than 200,000 values" in problem.message
    assert time.process_time() - started < 1.0


@pytest.mark.django_db
def test_keys_and_lists_named_nodes_elsewhere_are_not_graph_nodes():
    text = many_nodes(3).replace(
        "  inputSchema: {type: object}",
        "  inputSchema: {type: object, default: {nodes: [" + ", ".join(["1"] * 2500) + "]}}",
    )

    report = validate_workflow(text, caller=API)

    assert "definition_too_large" not in [problem.code for problem in report.problems]
