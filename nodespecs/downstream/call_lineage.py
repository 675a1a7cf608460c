"""The lineage of a downstream MCP call: the workflow runs, one calling the next, that made it.

A workflow run sends its lineage with every MCP call it makes: the lineage it was itself
called with (empty for a call from outside) and then itself, as hops `workflow/run`
(`count_files/812`). It travels twice, so that this service reads it whatever carries the
call back: in the request's `_meta` under `META_KEY` (every transport, stdio included), and
in the HTTP header `HEADER` of the request that carries the call (Streamable HTTP and
legacy SSE). Called again, this service refuses a chain that is too deep or that comes back
to a workflow already in it (`graphs.execution.lineage`).

The header is set per call on a pooled HTTP session by `carry_lineage`, an httpx request
hook that reads the lineage `sending` made current: the SDK sends each message in the
context of the task that sent it (its `ContextSendStream`), so the POST of a call sees the
lineage of that call and no other.

A lineage is a courtesy between our own instances, not a proof: a caller can always send
less. It stops recursion through this service's own client; the per-caller share of the
run threads (`graphs.execution.direct_turns`) bounds whatever comes back another way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx2

META_KEY = "io.switchyard/lineage"
HEADER = "Switchyard-Lineage"
# More hops than any depth allowed (GRAPHS_MAX_CALL_DEPTH is at most 32) are not read: the
# chain is refused anyway, and reading stays cheap whatever a caller sends.
MAX_HOPS = 64
_MAX_HEADER_CHARS = MAX_HOPS * 180
# A workflow's name is a tool name; a run is named by its id.
_HOP = re.compile(r"([A-Za-z0-9_.-]{1,128})(?:/([0-9]{1,20}))?")
# What an unreadable hop becomes: it still counts toward the depth, and matches no workflow.
UNREADABLE = "?"


@dataclass(frozen=True)
class Hop:
    """One workflow run in a chain of calls: the workflow's name, and the run's id ("" when
    not known)."""

    workflow: str
    run: str = ""

    def __str__(self) -> str:
        return f"{self.workflow}/{self.run}" if self.run else self.workflow


Lineage = tuple[Hop, ...]


def _hop(text: Any) -> Hop:
    matched = _HOP.fullmatch(text.strip()) if isinstance(text, str) else None
    if matched is None:
        return Hop(UNREADABLE)
    return Hop(matched[1], matched[2] or "")


def from_meta(value: Any) -> Lineage:
    """A lineage from its JSON form (a request's `_meta[META_KEY]`, a run's stored copy): a
    list of hops. Anything else is no lineage."""
    if not isinstance(value, list):
        return ()
    return tuple(_hop(item) for item in value[:MAX_HOPS])


def from_header(value: str | None) -> Lineage:
    """A lineage from its header form: hops separated by commas."""
    if not value:
        return ()
    parts = value[:_MAX_HEADER_CHARS].split(",", MAX_HOPS)[:MAX_HOPS]
    return tuple(_hop(part) for part in parts if part.strip())


def longest(*lineages: Lineage) -> Lineage:
    """Of the lineages a request carries (its `_meta`'s, its header's), the longest: both are
    ours and normally equal; if they differ, the one that says more is believed."""
    return max(lineages, key=len, default=())


def extended(lineage: Lineage, workflow: str, run_id: int) -> Lineage:
    """The lineage a run's own calls carry: the run's, then the run itself."""
    return (*lineage, Hop(workflow, str(run_id)))


def as_json(lineage: Lineage) -> list[str]:
    """The JSON form (`_meta`, the history): a list of `workflow/run` strings."""
    return [str(hop) for hop in lineage]


def as_header(lineage: Lineage) -> str:
    """The header form: the hops separated by commas (ASCII, as hops are)."""
    return ",".join(str(hop) for hop in lineage)


_sending: ContextVar[Lineage] = ContextVar("switchyard_call_lineage", default=())


@contextmanager
def sending(lineage: Lineage) -> Iterator[None]:
    """Make `lineage` the one that the HTTP requests sent from this context carry (see
    `carry_lineage`), until the block ends."""
    token = _sending.set(lineage)
    try:
        yield
    finally:
        _sending.reset(token)


async def carry_lineage(request: httpx2.Request) -> None:
    """An httpx request hook: put the lineage of the call being sent in its `HEADER`,
    replacing any the connection's own headers set (an agent chooses those)."""
    lineage = _sending.get()
    if lineage:
        request.headers[HEADER] = as_header(lineage)
