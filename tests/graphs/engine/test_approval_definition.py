"""The approval node as written (graphs/engine/format/approval_reading.py) and checked at import
(graphs/engine/checks/approval_nodes.py): its keys, its problems in import's words, and its round
trip through the YAML format."""

from __future__ import annotations

import copy

import pytest
import yaml

from graphs.engine import DefinitionError, Node, dump_yaml, parse_tool, tool_to_dict
from graphs.engine.compiler import compile_tool
from tests.graphs.engine.helpers import tool

pytestmark = pytest.mark.timeout(10)

APPROVE = yaml.safe_load(
    """
id: "approve"
type: "approval"
message: '"Refund " & $string($.entry.amount) & " to " & $.entry.customer & "?"'
approvers: "reviewers"
form:
  type: object
  properties:
    reason: {type: string, maxLength: 500}
timeoutMs: 86400000
routes:
  approved: "refund"
  rejected: "decline"
  timeout: "escalate"
"""
)


def refund_tool(approve: dict | None = None) -> dict:
    """Entry, the approval, a node for each decision (decline going on to escalate, so that
    every node is reached whichever routes are given), exit."""
    return tool(
        {"id": "entry", "type": "entry", "next": "approve"},
        APPROVE if approve is None else approve,
        {"id": "refund", "type": "transform", "transform": {"expr": "$.approve"}, "next": "exit"},
        {"id": "decline", "type": "transform", "transform": {"expr": '"no"'}, "next": "escalate"},
        {"id": "escalate", "type": "transform", "transform": {"expr": '"late"'}, "next": "exit"},
        {"id": "exit", "type": "exit"},
    )


def problems_of(approve: dict) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        parse_tool(refund_tool(approve), server_names=())
    return caught.value.problems


def approve_with(**changes) -> dict:
    node = copy.deepcopy(APPROVE)
    for key, value in changes.items():
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value
    return node


def test_the_issues_example_parses_to_the_node_fields():
    graph = parse_tool(refund_tool(), server_names=())

    assert graph.node("approve") == Node(
        "approve",
        "approval",
        message=APPROVE["message"],
        approvers="reviewers",
        form={"type": "object", "properties": {"reason": {"type": "string", "maxLength": 500}}},
        timeout_ms=86400000,
        routes={"approved": "refund", "rejected": "decline", "timeout": "escalate"},
    )
    assert compile_tool(graph).nodes["approve"].expression is not None


def test_approvers_defaults_to_reviewers_and_form_and_timeout_are_optional():
    approve = approve_with(approvers=None, form=None, timeoutMs=None)
    approve["routes"] = {"approved": "refund", "rejected": "decline"}
    graph = parse_tool(refund_tool(approve), server_names=())

    node = graph.node("approve")
    assert (node.approvers, node.form, node.timeout_ms) == ("reviewers", None, None)


@pytest.mark.parametrize(
    "approve",
    [
        APPROVE,
        {
            **approve_with(form=None, timeoutMs=None),
            "routes": {"approved": "refund", "rejected": "decline"},
        },
        approve_with(approvers="caller"),
    ],
)
def test_an_approval_round_trips_through_the_format_in_the_issues_key_order(approve):
    graph = parse_tool(refund_tool(approve), server_names=())

    written = tool_to_dict(graph)
    again = parse_tool(yaml.safe_load(dump_yaml(written)), server_names=())

    assert again == graph
    node = written["nodes"][1]
    keys = ["id", "type", "message", "approvers", "form", "timeoutMs", "routes"]
    assert list(node) == [key for key in keys if key in node]
    assert node["approvers"] == approve.get("approvers", "reviewers")  # always written


def test_an_unknown_key_names_the_keys_an_approval_allows():
    [problem] = problems_of(approve_with(next="refund"))

    assert problem == (
        "tool 't', node 'approve': unknown key(s) next; a approval node allows id, type, message, "
        "approvers, form, timeoutMs, routes"
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"message": None},
            "tool 't', node 'approve', field 'message': missing; an approval node needs the "
            "JSONata expression of what the person is asked",
        ),
        (
            {"message": ["Refund?"]},
            "tool 't', node 'approve', field 'message': must be a string, a JSONata expression",
        ),
        ({"message": '"Refund " &'}, "field 'message': JSONata does not parse"),
        (
            {"approvers": "managers"},
            "tool 't', node 'approve', field 'approvers': 'managers' is not who may decide; use "
            "one of reviewers, caller",
        ),
        (
            {"timeoutMs": -5},
            "field 'timeoutMs': must be a whole number of milliseconds above 0",
        ),
        ({"timeoutMs": 1.5}, "field 'timeoutMs': must be a whole number"),
        ({"timeoutMs": True}, "field 'timeoutMs': must be a whole number"),
        (
            {"routes": ["refund", "decline"]},
            "tool 't', node 'approve', field 'routes': must be a mapping of decision to node id "
            "(approved, rejected, timeout)",
        ),
        (
            {
                "routes": {
                    "approved": "refund",
                    "rejected": "decline",
                    "timeout": "escalate",
                    "x": 1,
                }
            },
            "field 'routes.x': 'x' is no decision; routes are named by decision: approved, "
            "rejected, timeout",
        ),
        (
            {"routes": {"approved": "refund", "timeout": "escalate"}},
            "field 'routes.rejected': missing: the node to go to when the person rejects",
        ),
        (
            {"routes": {"approved": "refund", "rejected": "decline"}},
            "field 'routes.timeout': missing: the node has a timeoutMs, so its wait can time out",
        ),
        (
            {"routes": {"approved": "refund", "rejected": "declined", "timeout": "escalate"}},
            "field 'routes.rejected': no node 'declined' in this tool; did you mean 'decline'?",
        ),
        (
            {"routes": {"approved": 3, "rejected": "decline", "timeout": "escalate"}},
            "field 'routes.approved': must be a string, got 3",
        ),
        (
            {"form": {"type": "object", "properties": {"items": {"type": "array"}}}},
            "field 'form': property 'items': type 'array' is not allowed",
        ),
    ],
)
def test_each_problem_of_an_approval_is_named_at_its_field(changes, expected):
    problems = problems_of(approve_with(**changes))

    assert any(expected in problem for problem in problems), problems


def test_a_timeout_route_without_a_timeout_is_never_taken():
    problems = problems_of(approve_with(timeoutMs=None))

    assert any(
        "field 'routes.timeout': is never taken: the node has no timeoutMs" in problem
        for problem in problems
    ), problems


def test_a_routes_value_that_is_not_a_mapping_is_reported_once():
    problems = problems_of(approve_with(routes="refund"))

    assert [problem for problem in problems if "routes" in problem] == [
        "tool 't', node 'approve', field 'routes': must be a mapping of decision to node id "
        "(approved, rejected, timeout), as routes: {approved: refund, rejected: decline}; got str"
    ]


def test_a_misspelt_decision_is_not_also_reported_missing():
    routes = {"approve": "refund", "rejected": "decline", "timeout": "escalate"}
    problems = [p for p in problems_of(approve_with(routes=routes)) if "routes" in p]

    assert len(problems) == 1
    assert "'approve' is no decision; did you mean 'approved'?" in problems[0]


def test_nodes_reached_only_through_routes_are_reachable():
    # decline and escalate are reached only from the approval's routes: no unreachable node.
    parse_tool(refund_tool(), server_names=())
