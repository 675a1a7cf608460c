"""How far workflow calls may chain through this service (issue 24, "No recursion").

A workflow call that comes back to this service carries its lineage: the runs whose calls led to it
(`nodespecs.downstream.call_lineage`). Before anything runs (no run thread taken, nothing recorded),
`call_refusal` refuses a call that would make a cycle (its workflow is already in the chain: it
would call itself again and again) or a chain deeper than `GRAPHS_MAX_CALL_DEPTH` workflow runs, the
called one included. A run that starts records the lineage it was called with (`Run.lineage`) and
sends it on, with itself added (`downstream_lineage`), with every MCP call it makes.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from nodespecs.downstream.call_lineage import Lineage, extended, from_meta


def _chain(lineage: Lineage, workflow: str) -> str:
    """The chain as people read it: "workflow a → workflow b → workflow a"."""
    return " → ".join(f"workflow {name}" for name in [*(hop.workflow for hop in lineage), workflow])


def call_refusal(lineage: Lineage, workflow: str) -> str | None:
    """Why a call of `workflow` that carries `lineage` must not run, naming the chain; None
    when it may."""
    if not lineage:
        return None  # a call from outside: the common case, and never refused
    most = settings.GRAPHS_MAX_CALL_DEPTH
    if any(hop.workflow == workflow for hop in lineage):
        return (
            f"Refused: workflow {workflow!r} is already in this chain of calls "
            f"({_chain(lineage, workflow)}), so it would call itself without end. A workflow "
            "may not call itself through this server, directly or through other workflows "
            f"(whatever GRAPHS_MAX_CALL_DEPTH, now {most}, allows): remove the mcp node that "
            "calls back, or test the workflow with mocks for it."
        )
    depth = len(lineage) + 1
    if depth > most:
        return (
            f"Refused: this call would make a chain of {depth} workflow calls "
            f"({_chain(lineage, workflow)}), deeper than GRAPHS_MAX_CALL_DEPTH ({most}) "
            "allows. Call the last workflow directly, or ask an operator to raise the setting."
        )
    return None


def stored(lineage: Lineage) -> list[str]:
    """A lineage as the history keeps it (`Run.lineage`)."""
    return [str(hop) for hop in lineage]


def downstream_lineage(recorded: Any, workflow: str, run_id: int) -> Lineage:
    """The lineage a run's own MCP calls carry: the one it recorded (`Run.lineage`), then the
    run itself."""
    return extended(from_meta(recorded), workflow, run_id)
