"""A workflow's graph drawn as SVG, server-side: no script, no asset to load.

Nodes are laid out in columns by their distance from the entry (breadth first), in the order
they are reached; edges that go back to an earlier column (loops) are drawn as arcs. A run's
path can be highlighted: nodes it executed, the edges it took, and the node that failed (read
from the history by `graphs.history.selectors.run_path`, without loading the run's executions).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

BOX_WIDTH, BOX_HEIGHT = 150, 44
COLUMN_GAP, ROW_GAP, MARGIN = 60, 26, 20
# A drawing wider than its page scales down to fit (stylesheets give it `max-width: 100%`)
# but no further than this, where its 12 px text is still readable: then its box scrolls.
MIN_SCALE = 0.5
COLORS = {
    "entry": "#e0f2fe",
    "exit": "#e0f2fe",
    "mcp": "#ede9fe",
    "transform": "#dcfce7",
    "switch": "#fef9c3",
    "approval": "#ffedd5",
}
# Corner radius of a node's box by type: an approval, where a run waits for a person, is drawn
# as a pill, so that it stands out from the boxes that run on their own.
CORNERS = {"approval": BOX_HEIGHT / 2}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str = ""


def graph_edges(nodes: Iterable[Mapping[str, Any]]) -> list[Edge]:
    """The edges of a node list in the YAML format: `next`, switch conditions and default,
    and an approval's routes, each labelled with its decision."""
    edges = []
    for node in nodes:
        source = node["id"]
        if node.get("next"):
            edges.append(Edge(source, node["next"]))
        for position, condition in enumerate(node.get("conditions") or []):
            edges.append(Edge(source, condition["target"], str(position + 1)))
        if node.get("default"):
            edges.append(Edge(source, node["default"], "default"))
        # Decisions going to the same node share one edge, labelled with all of them.
        decided: dict[str, list[str]] = {}
        routes = node.get("routes")
        for decision, target in routes.items() if isinstance(routes, Mapping) else ():
            if isinstance(target, str):
                decided.setdefault(target, []).append(str(decision))
        edges += [Edge(source, target, " / ".join(names)) for target, names in decided.items()]
    return edges


def _columns(nodes: list[Mapping[str, Any]], edges: list[Edge]) -> dict[str, tuple[int, int]]:
    """(column, row) of each node: breadth first from the entry; unreachable ones last."""
    following: dict[str, list[str]] = {}
    for edge in edges:
        following.setdefault(edge.source, []).append(edge.target)
    entry = next((n["id"] for n in nodes if n.get("type") == "entry"), nodes[0]["id"])
    depth = {entry: 0}
    queue = deque([entry])
    while queue:
        current = queue.popleft()
        for target in following.get(current, []):
            if target not in depth:
                depth[target] = depth[current] + 1
                queue.append(target)
    last = max(depth.values(), default=0) + 1
    rows: dict[int, int] = {}
    place = {}
    for node in sorted(nodes, key=lambda n: depth.get(n["id"], last)):
        column = depth.get(node["id"], last)
        place[node["id"]] = (column, rows.get(column, 0))
        rows[column] = rows.get(column, 0) + 1
    return place


def draw_graph(
    nodes: list[Mapping[str, Any]],
    *,
    visited: Collection[str] = (),
    taken: Collection[tuple[str, str]] = (),
    failed: str = "",
) -> str:
    """The SVG markup of a graph; `visited` nodes and `taken` edges of a run are highlighted
    and the `failed` node is marked. All text is escaped."""
    if not nodes:
        return ""
    edges = graph_edges(nodes)
    place = _columns(nodes, edges)

    def box(node_id: str) -> tuple[int, int]:
        column, row = place[node_id]
        return (MARGIN + column * (BOX_WIDTH + COLUMN_GAP), MARGIN + row * (BOX_HEIGHT + ROW_GAP))

    width = MARGIN * 2 + (max(c for c, _ in place.values()) + 1) * (BOX_WIDTH + COLUMN_GAP)
    height = MARGIN * 2 + (max(r for _, r in place.values()) + 1) * (BOX_HEIGHT + ROW_GAP) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
        f'font-size="12" style="min-width: {round(width * MIN_SCALE)}px">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" fill="#64748b"/></marker></defs>'
    ]
    for edge in edges:
        if edge.target not in place:
            continue
        (x1, y1), (x2, y2) = box(edge.source), box(edge.target)
        is_taken = (edge.source, edge.target) in taken
        stroke = "#2563eb" if is_taken else "#94a3b8"
        stroke_width = 2.5 if is_taken else 1.2
        start: tuple[float, float]
        end: tuple[float, float]
        if place[edge.target][0] > place[edge.source][0]:
            start = (x1 + BOX_WIDTH, y1 + BOX_HEIGHT / 2)
            end = (x2, y2 + BOX_HEIGHT / 2)
            path = f"M {start[0]} {start[1]} L {end[0]} {end[1]}"
        else:
            # A loop back (or a same-column edge): an arc below the boxes.
            start = (x1 + BOX_WIDTH / 2, y1 + BOX_HEIGHT)
            end = (x2 + BOX_WIDTH / 2, y2 + BOX_HEIGHT)
            sag = BOX_HEIGHT + ROW_GAP / 2 + 10
            path = (
                f"M {start[0]} {start[1]} C {start[0]} {start[1] + sag} "
                f"{end[0]} {end[1] + sag} {end[0]} {end[1]}"
            )
        parts.append(
            f'<path class="edge{" taken" if is_taken else ""}" d="{path}" fill="none" '
            f'stroke="{stroke}" stroke-width="{stroke_width}" marker-end="url(#arrow)"/>'
        )
        if edge.label:
            mid_x, mid_y = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2 - 4
            parts.append(
                f'<text x="{mid_x}" y="{mid_y}" fill="#475569" text-anchor="middle">'
                f"{escape(edge.label)}</text>"
            )
    for node in nodes:
        node_id = node["id"]
        x, y = box(node_id)
        state = "failed" if node_id == failed else "visited" if node_id in visited else ""
        stroke = {"failed": "#dc2626", "visited": "#2563eb"}.get(state, "#64748b")
        stroke_width = 3 if state else 1
        fill = COLORS.get(str(node.get("type")), "#f1f5f9")
        corner = CORNERS.get(str(node.get("type")), 6)
        parts.append(
            f'<g class="node {escape(state)}" data-node-id="{escape(node_id)}">'
            f"<title>{escape(node_id)} ({escape(str(node.get('type')))})</title>"
            f'<rect x="{x}" y="{y}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="{corner}" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="{stroke_width}"/>'
            f'<text x="{x + BOX_WIDTH / 2}" y="{y + 18}" text-anchor="middle" '
            f'font-weight="bold">{escape(_fit(node_id))}</text>'
            f'<text x="{x + BOX_WIDTH / 2}" y="{y + 34}" text-anchor="middle" fill="#475569">'
            f"{escape(_subtitle(node))}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _fit(text: str, limit: int = 22) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _subtitle(node: Mapping[str, Any]) -> str:
    if node.get("type") == "mcp":
        return _fit(f"{node.get('server')}.{node.get('tool')}")
    if node.get("type") == "approval":
        return _fit(f"approval by {node.get('approvers') or 'reviewers'}")
    return str(node.get("type"))
