"""The graph drawing (graphs/history/drawing.py) and the timeline's summary of a node
(graphs/pages/display.py) for an approval node: its own colour and shape, and its routes drawn
as edges labelled with their decisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from graphs.history.drawing import COLORS, Edge, draw_graph, graph_edges
from graphs.pages.display import Evaluated, evaluated

pytestmark = pytest.mark.timeout(10)

NODES: list[Mapping[str, Any]] = [
    {"id": "entry", "type": "entry", "next": "approve"},
    {
        "id": "approve",
        "type": "approval",
        "message": '"Refund?"',
        "approvers": "caller",
        "timeoutMs": 1000,
        "routes": {"approved": "refund", "rejected": "exit", "timeout": "exit"},
    },
    {"id": "refund", "type": "transform", "transform": {"expr": "1"}, "next": "exit"},
    {"id": "exit", "type": "exit"},
]


def test_an_approvals_routes_are_edges_labelled_with_their_decisions():
    assert graph_edges(NODES) == [
        Edge("entry", "approve"),
        Edge("approve", "refund", "approved"),
        Edge("approve", "exit", "rejected / timeout"),  # one edge per target
        Edge("refund", "exit"),
    ]


def test_an_approval_is_drawn_in_its_own_colour_as_a_pill_with_who_decides():
    svg = draw_graph(NODES, visited=["entry", "approve"], taken=[("entry", "approve")])

    box = svg[svg.index('data-node-id="approve"') :]
    box = box[: box.index("</g>")]
    assert f'fill="{COLORS["approval"]}"' in box
    assert len({COLORS["approval"], COLORS["switch"], COLORS["transform"], COLORS["mcp"]}) == 4
    assert 'rx="22.0"' in box  # half the box's height: a pill, where others have corners of 6
    assert "approval by caller" in box
    assert ">approved</text>" in svg
    assert ">rejected / timeout</text>" in svg


def test_the_timeline_says_who_an_approval_asks_and_what():
    detail = {"approvers": "reviewers", "form": None, "timeout_ms": 5, "message": "Refund 3?"}

    assert evaluated("approval", detail) == Evaluated(
        summary="asks the reviewers",
        label="Asked",
        value={"message": "Refund 3?", "timeout_ms": 5},
    )
    mocked = evaluated("approval", {**detail, "mocked": True})
    assert mocked.summary == "decision mocked"
