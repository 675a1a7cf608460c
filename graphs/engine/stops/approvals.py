"""A run that stops at an approval node, and the same run going on once it is decided.

The engine holds nothing while a person decides: it returns a ``Paused`` with everything the
run needs to go on (each execution's output so far, in order, and the time it has taken), and
``execute`` takes that back as a ``Resume`` (resuming.py) with the decision, in any process,
however much later. Keeping the ``Paused`` somewhere durable is the caller's business. Time
spent waiting does not count toward ``maxExecutionTimeMs``: only ``elapsed_ms`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphs.engine.stops.resuming import Execution

#: The longest message a person is shown (and a client is sent); a longer one is cut, marked
#: with an ellipsis, so that an expression cannot make every page and elicitation large.
MAX_MESSAGE_CHARS = 4000


@dataclass(frozen=True)
class Paused:
    """A run stopped at an approval node, waiting for a decision."""

    node_id: str
    # 1-based: how many times the approval node has now run, this one included.
    iteration: int
    # The approval node's 0-based position in the run's execution order.
    index: int
    # The node's message, evaluated: what the person is asked.
    message: str
    approvers: str
    form: dict[str, Any] | None
    timeout_ms: int | None
    # Every execution before the approval node, oldest first: what a resumed run rebuilds
    # its context and history functions from.
    executions: tuple[Execution, ...]
    # The run's time so far, which counts toward maxExecutionTimeMs.
    elapsed_ms: float
    # When the wait began (time.time()), for the approval node's duration.
    waited_since: float
