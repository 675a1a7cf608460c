"""test_workflow's mocks of approval nodes (graphs/execution/mocks.py): a decision by node id,
checked against the node (its decisions, its form), kept on the run beside the mcp nodes'
answers, and given back to the engine as the node's whole output."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from graphs.engine.definition import Node
from graphs.execution.mocks import (
    MOCK_DECIDER,
    MockRefused,
    call_mocks,
    decided_by_mocks,
    mock_answers,
    mocked_decisions,
)
from graphs.models import Workflow
from nodespecs.callers import Caller
from tests.graph_files import OPERATOR

TESTER = Caller(actor="key:tester", scopes=frozenset({"tools:execute", "workflows:write"}))

pytestmark = pytest.mark.timeout(30)

REFUNDS = """
version: "1.0"
server: {name: refunds, version: "1.0.0"}
mcpServers:
  pay: {type: streamableHttp, url: "http://127.0.0.1:9/mcp"}
tools:
  - name: refund
    description: Refunds a customer once a reviewer approves.
    inputSchema: {type: object, properties: {amount: {type: number}}}
    nodes:
      - {id: entry, type: entry, next: approve}
      - id: approve
        type: approval
        message: '"Refund " & $string($.entry.amount) & "?"'
        form:
          type: object
          properties:
            reason: {type: string, maxLength: 20}
            urgent: {type: boolean}
          required: [reason]
        timeoutMs: 60000
        routes: {approved: pay, rejected: exit, timeout: exit}
      - id: confirm
        type: approval
        message: '"Sure?"'
        routes: {approved: exit, rejected: exit}
      - id: pay
        type: mcp
        server: pay
        tool: refund
        args: {amount: "$.entry.amount"}
        next: confirm
      - {id: exit, type: exit}
"""


@pytest.fixture
def version(db):
    from graphs.authoring.files import graph_import

    graph_import(text=REFUNDS, caller=OPERATOR)
    return Workflow.objects.get(name="refund").current_version


def _mocks(version, mocks):
    return mock_answers(version, mocks, mock_all=False, caller=TESTER)


def test_an_approval_is_mocked_with_its_decision_beside_the_mcp_nodes_answers(version):
    mocks = _mocks(
        version,
        {
            "approve": {"decision": "approved", "form": {"reason": "duplicate"}},
            "confirm": {"decision": "rejected", "comment": "not today"},
            "pay": {"ok": True},
        },
    )

    assert mocks["approve"] == {
        "decision": "approved",
        "comment": "",
        "form": {"reason": "duplicate"},
    }
    assert mocks["confirm"] == {"decision": "rejected", "comment": "not today", "form": {}}
    assert set(call_mocks(mocks)) == {"pay"}  # what the runtime reads as CallToolResults
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    assert mocked_decisions(mocks, now=now) == {
        "approve": {
            "decision": "approved",
            "by": {"kind": "mock", "id": "", "name": "test_workflow"},
            "comment": "",
            "form": {"reason": "duplicate"},
            "decided_at": "2026-11-26T12:00:00+00:00",
        },
        "confirm": {
            "decision": "rejected",
            "by": MOCK_DECIDER,
            "comment": "not today",
            "form": {},
            "decided_at": "2026-11-26T12:00:00+00:00",
        },
    }


def test_the_engines_decided_answers_a_mocked_approval_and_lets_another_wait(version):
    mocks = _mocks(version, {"approve": {"decision": "timeout"}})
    decided = decided_by_mocks(mocks)

    assert decided is not None
    output = decided(Node("approve", "approval"))
    assert output is not None
    assert (output["decision"], output["by"]["kind"]) == ("timeout", "mock")
    assert datetime.fromisoformat(output["decided_at"]).tzinfo is not None
    assert decided(Node("confirm", "approval")) is None
    assert decided_by_mocks(_mocks(version, {"pay": {"ok": True}})) is None
    assert decided_by_mocks(None) is None


@pytest.mark.parametrize(
    ("mock", "message"),
    [
        ({"decision": "approve"}, "decision 'approve' is not one of approved, rejected, timeout"),
        ("approved", "mock it with its decision"),
        ({"decision": "approved", "by": "me"}, r"unknown key\(s\) by"),
        ({"decision": "approved", "comment": 3}, "comment must be text"),
        ({"decision": "approved"}, "field 'reason' is required"),
        (
            {"decision": "approved", "form": {"reason": "x", "colour": "red"}},
            "field 'colour' is not in the form; its fields: reason, urgent",
        ),
        (
            {"decision": "rejected", "form": {"reason": "x", "urgent": "yes"}},
            "field 'urgent': must be true or false",
        ),
        ({"decision": "timeout", "form": {"reason": "x"}}, "a timeout is no one's answer"),
    ],
)
def test_a_bad_decision_mock_is_refused_saying_why(version, mock, message):
    with pytest.raises(MockRefused, match=message):
        _mocks(version, {"approve": mock})


def test_a_node_that_never_times_out_cannot_be_mocked_timing_out(version):
    with pytest.raises(MockRefused, match="has no timeoutMs, so it never times out"):
        _mocks(version, {"confirm": {"decision": "timeout"}})


def test_an_unknown_node_names_the_approval_nodes_among_what_can_be_mocked(version):
    with pytest.raises(MockRefused, match=r"mock one of: pay, pay\.refund, approve, confirm"):
        _mocks(version, {"aprove": {"decision": "approved"}})


def test_other_node_types_still_cannot_be_mocked(version):
    with pytest.raises(MockRefused, match="is a entry node; only mcp nodes"):
        _mocks(version, {"entry": {"decision": "approved"}})
