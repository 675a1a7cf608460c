"""The execution history of one run, and the history functions expressions call.

The history is kept three ways, each updated in O(1) as a node finishes, so a loop of n
iterations costs O(n) overall however its expressions look back:

- ``outputs``: every execution's output in order (``$previousNode``), and ``nodes`` the id of
  each execution's node;
- ``by_node``: each node's outputs in order (``$executionCount``, ``$nodeExecution``,
  ``$nodeExecutions``);
- ``context``: each node's latest output, the ``$`` every expression is evaluated against
  (``$.node_id``). It is one dict updated in place, never rebuilt or copied.

The three hold the same output objects, never copies, and every output is kept because
``$previousNode(n)`` and ``$nodeExecution(id, i)`` may reach any of them: a run's memory grows
with its executions and is bounded by ``maxNodeExecutions`` (itself capped by the server's
ceiling). Each function is O(1) but ``$nodeExecutions(id)``, which copies that node's list
(O(its executions)), so a loop calling it every iteration is quadratic within that bound.
"""

from __future__ import annotations

from typing import Any

from jsonata import Jsonata


class RunHistory:
    """What one run has executed so far; its ``bindings`` are the history functions."""

    __slots__ = ("bindings", "by_node", "context", "nodes", "outputs")

    def __init__(self) -> None:
        self.outputs: list[Any] = []
        self.nodes: list[str] = []
        self.by_node: dict[str, list[Any]] = {}
        self.context: dict[str, Any] = {}
        # Built once per run; they read the history as it is when they are called.
        self.bindings = {
            "previousNode": Jsonata.JLambda(self.previous_node),
            "executionCount": Jsonata.JLambda(self.execution_count),
            "nodeExecution": Jsonata.JLambda(self.node_execution),
            "nodeExecutions": Jsonata.JLambda(self.node_executions),
        }

    def record(self, node_id: str, output: Any) -> None:
        """Add a finished execution."""
        self.outputs.append(output)
        self.nodes.append(node_id)
        self.by_node.setdefault(node_id, []).append(output)
        self.context[node_id] = output

    def previous_node(self, offset: Any = 1) -> Any:
        """``$previousNode(offset?)``: the output of the execution ``offset`` steps back."""
        steps = _whole_number("$previousNode(offset)", offset)
        index = len(self.outputs) - steps
        return self.outputs[index] if steps > 0 and index >= 0 else None

    def execution_count(self, node_id: Any = None) -> int:
        """``$executionCount(id)``: how many times the node has run so far."""
        return len(self.by_node.get(_node_id("$executionCount(id)", node_id), ()))

    def node_execution(self, node_id: Any = None, index: Any = None) -> Any:
        """``$nodeExecution(id, index)``: 0 is the first, -1 the latest; out of range is null."""
        outputs = self.by_node.get(_node_id("$nodeExecution(id, index)", node_id), [])
        position = _whole_number("$nodeExecution(id, index)", index)
        return outputs[position] if -len(outputs) <= position < len(outputs) else None

    def node_executions(self, node_id: Any = None) -> list[Any]:
        """``$nodeExecutions(id)``: the outputs of every run of the node, oldest first."""
        return list(self.by_node.get(_node_id("$nodeExecutions(id)", node_id), ()))


def _node_id(function: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f'{function} needs a node id string, as in "node_id"; got {value!r}')
    return value


def _whole_number(function: str, value: Any) -> int:
    # JSONata numbers arrive as int or float; 2.0 is as good as 2.
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise ValueError(f"{function} needs a whole number; got {value!r}")
    return int(value)
