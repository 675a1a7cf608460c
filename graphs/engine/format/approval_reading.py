"""An approval node as written: its fields read into ``Node``'s. The checks of their values
are graphs/engine/checks/approval_nodes.py's, run with every node's structure checks."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from graphs.engine.checks.problems import Finding, Keys, finding
from graphs.engine.definition import DECISIONS
from graphs.engine.errors import located


def read_approval(
    raw: Mapping[str, Any], tool: str, node_id: str, found: list[Finding], at: Keys
) -> tuple[dict[str, Any], frozenset[str]]:
    """The ``Node`` fields of an approval node, and the fields that could not be read (a
    `routes` that is not a mapping, reported here)."""
    routes = raw.get("routes")
    unread: frozenset[str] = frozenset()
    if routes is None:
        routes = {}
    elif isinstance(routes, Mapping):
        routes = dict(routes)
    else:
        found.append(
            finding(
                "invalid_field",
                located(tool, node_id, "routes"),
                f"must be a mapping of decision to node id ({', '.join(DECISIONS)}), as routes: "
                "{approved: refund, rejected: decline}; got "
                f"{type(routes).__name__}",
                (*at, "routes"),
                node=node_id,
            )
        )
        routes, unread = {}, frozenset({"routes"})
    form = raw.get("form")
    return {
        "next": None,  # an approval goes on along its routes (a `next` is an unknown key)
        "message": raw.get("message"),
        "approvers": raw.get("approvers", "reviewers"),
        "form": None if form is None else copy.deepcopy(form),
        "timeout_ms": raw.get("timeoutMs"),
        "routes": routes,
    }, unread
