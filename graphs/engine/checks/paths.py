"""Paths through a tool's graph, for validation: what the entry reaches, what reaches an exit,
and which nodes can have run before a given one. Plain Python.

Every function here is iterative (no recursion however long the graph) and linear in its
nodes and edges, but ``Precedence``, which costs nodes x components / 64 word operations
(big-int bitsets over the strongly connected components): well under a second at the
largest graph a definition can hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def reachable(start: Iterable[str], edges: Mapping[str, Sequence[str]]) -> set[str]:
    """The nodes reachable from ``start`` (themselves included) along ``edges``."""
    seen = set(start)
    pending = list(seen)
    while pending:
        for target in edges.get(pending.pop(), ()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def reversed_edges(edges: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each node's predecessors."""
    back: dict[str, list[str]] = {node: [] for node in edges}
    for source, targets in edges.items():
        for target in targets:
            back.setdefault(target, []).append(source)
    return back


class Precedence:
    """Which nodes can have run before a node in some run: those with a path to it of one
    edge or more (a node on a cycle can precede itself)."""

    def __init__(self, edges: Mapping[str, Sequence[str]]) -> None:
        nodes = list(edges)
        self._bit = {node: 1 << index for index, node in enumerate(nodes)}
        component = _components(nodes, edges)
        members: dict[int, int] = {}
        for node, number in component.items():
            members[number] = members.get(number, 0) | self._bit[node]
        cyclic = {
            component[node]
            for node in nodes
            for target in edges[node]
            if component.get(target) == component[node]
        }
        before: dict[int, int] = {}
        incoming: dict[int, list[int]] = {}
        for node in nodes:
            for target in edges[node]:
                if target in component and component[target] != component[node]:
                    incoming.setdefault(component[target], []).append(component[node])
        # Tarjan numbers components in reverse topological order: the sources come last.
        for number in sorted(members, reverse=True):
            bits = members[number] if number in cyclic else 0
            for source in incoming.get(number, ()):
                bits |= before[source] | members[source]
            before[number] = bits
        self._before = {node: before[component[node]] for node in nodes}

    def can_precede(self, earlier: str, later: str) -> bool:
        """Whether ``earlier`` can have run before ``later`` in some run."""
        return bool(self._before.get(later, 0) & self._bit.get(earlier, 0))


def _components(nodes: list[str], edges: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Tarjan's strongly connected components, iteratively; numbered sinks first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    component: dict[str, int] = {}
    known = {node: [target for target in edges.get(node, ()) if target in edges] for node in nodes}
    counter = components = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = known[node]
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            # All its edges followed: pass the low link up, close a component at its root.
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = components
                    if member == node:
                        break
                components += 1
    return component
