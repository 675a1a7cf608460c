"""validate_workflow's checks of an approval node: its problems with pointers and fixes, what
expressions downstream may read of its output, and the server's ceiling on its timeoutMs."""

from __future__ import annotations

import copy

import pytest

from graphs.engine.checks.all_checks import LimitCeiling
from tests.graphs.engine.test_approval_definition import APPROVE
from tests.graphs.validation.helpers import codes, fixed, flat, node, only, validate

pytestmark = pytest.mark.timeout(30)

CEILING = LimitCeiling("timeoutMs", 3_600_000, "GRAPHS_MAX_APPROVAL_TIMEOUT_MS")


def refunds() -> dict:
    """A definition whose one tool asks for approval before a refund."""
    return {
        "version": "1.0",
        "server": {"name": "refunds", "version": "1.0.0"},
        "tools": [
            {
                "name": "refund",
                "description": "Refunds a customer once a reviewer approves",
                "inputSchema": {
                    "type": "object",
                    "properties": {"amount": {"type": "number"}, "customer": {"type": "string"}},
                },
                "outputSchema": {"type": "object", "properties": {"done": {"type": "string"}}},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "approve"},
                    copy.deepcopy(APPROVE),
                    {
                        "id": "refund",
                        "type": "transform",
                        "transform": {"expr": '{"done": $.approve.decision}'},
                        "next": "exit",
                    },
                    {
                        "id": "decline",
                        "type": "transform",
                        "transform": {"expr": '{"done": $.approve.comment}'},
                        "next": "exit",
                    },
                    {
                        "id": "escalate",
                        "type": "transform",
                        "transform": {"expr": '{"done": "escalated"}'},
                        "next": "exit",
                    },
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


def test_a_workflow_with_an_approval_has_no_problem_in_either_form():
    assert validate(refunds()) == []
    assert validate(flat(refunds())) == []
    assert validate(refunds(), approval_timeout_ceiling=CEILING) != []  # a day is above an hour


def test_a_misspelt_decision_is_moved_to_the_decision_meant():
    document = refunds()
    routes = node(document, "approve")["routes"]
    routes["approve"] = routes.pop("approved")

    problem = only(validate(document), "unknown_decision")

    assert (problem.severity, problem.node) == ("error", "approve")
    assert problem.path == "/tools/0/nodes/1/routes/approve"
    assert "'approve' is no decision; did you mean 'approved'?" in problem.message
    assert fixed(document, problem) == []


def test_a_timeout_route_never_taken_is_removed():
    document = refunds()
    del node(document, "approve")["timeoutMs"]
    problems = validate(document)

    problem = only(problems, "timeout_route_unused")

    assert problem.path == "/tools/0/nodes/1/routes/timeout"
    # Once the route is gone, the node it led to is unreachable: a problem of its own.
    assert codes(fixed(document, problem)) == ["unreachable_node"]


def test_approvers_close_to_a_known_one_is_replaced_by_it():
    document = refunds()
    node(document, "approve")["approvers"] = "Caller"

    problem = only(validate(document), "invalid_field")

    assert problem.path == "/tools/0/nodes/1/approvers"
    assert "use one of reviewers, caller" in problem.message
    assert fixed(document, problem) == []


def test_a_missing_route_and_a_bad_form_are_errors_at_their_place():
    document = refunds()
    approve = node(document, "approve")
    del approve["routes"]["rejected"]
    approve["form"]["properties"]["reason"]["pattern"] = "^[a-z]+$"

    problems = validate(document)

    route = only(problems, "missing_route")
    assert (route.path, route.node) == ("/tools/0/nodes/1/routes", "approve")
    form = only(problems, "invalid_form")
    assert form.path == "/tools/0/nodes/1/form/properties/reason/pattern"
    assert "keyword 'pattern' is not allowed for a string" in form.message


def test_the_flat_form_points_at_the_node_in_the_list():
    document = refunds()
    node(document, "approve")["timeoutMs"] = 0
    document = flat(document)

    problem = only(validate(document), "invalid_field")

    assert problem.path == "/nodes/1/timeoutMs"


def test_a_timeout_above_the_servers_ceiling_names_the_setting_and_is_lowered():
    document = refunds()

    problem = only(validate(document, approval_timeout_ceiling=CEILING), "timeout_above_ceiling")

    assert problem.path == "/tools/0/nodes/1/timeoutMs"
    assert "timeoutMs is 86400000, above this server's ceiling of 3600000" in problem.message
    assert "GRAPHS_MAX_APPROVAL_TIMEOUT_MS" in problem.message
    assert fixed(document, problem, approval_timeout_ceiling=CEILING) == []


def test_expressions_know_the_shape_of_an_approvals_output():
    document = refunds()
    node(document, "refund")["transform"]["expr"] = '{"done": $.approve.decison}'
    node(document, "decline")["transform"]["expr"] = '{"done": $.approve.form.reasn}'

    problems = validate(document)

    assert codes(problems) == ["field_not_produced", "field_not_produced"]
    first, second = problems
    assert "has no field 'decison'" in first.message
    assert "did you mean 'decision'?" in first.message
    assert fixed(document, first) != []  # the other one is still there
    assert "has no field 'reasn'" in second.message


def test_the_message_is_checked_like_any_expression():
    document = refunds()
    node(document, "approve")["message"] = '"Refund " & $.entri.amount'

    problem = only(validate(document), "node_reference_unknown")

    assert problem.path == "/tools/0/nodes/1/message"
    assert problem.fix == [
        {"op": "replace", "path": "/tools/0/nodes/1/message", "value": '"Refund " & $.entry.amount'}
    ]


def test_an_approvals_output_given_to_the_exit_is_checked_against_the_output_schema():
    document = refunds()
    node(document, "approve")["routes"]["approved"] = "exit"
    del document["tools"][0]["nodes"][2]  # refund, now unreachable
    document["tools"][0]["outputSchema"] = {
        "type": "object",
        "properties": {"done": {"type": "string"}},
        "required": ["done"],
    }

    problem = only(validate(document), "exit_output_mismatch")

    assert problem.severity == "warning"  # the decision's shape is the runtime's, not certain
    assert problem.node == "approve"
