"""The checks of an approval node's fields: its message, who decides, its form, its timeout
and its routes. Plain Python; graphs/engine/checks/structure.py runs them with every node's.

An approval goes on along ``routes[decision]``: it needs an `approved` and a `rejected`
route, and a `timeout` route exactly when it has a `timeoutMs` (a timeout route without
one is never taken; a timeout without a route would leave the run nowhere to go). Its form
is checked by graphs/engine/stops/approval_forms.py. How long a node may wait is bounded by the
server (``timeout_above_ceiling``: the engine is given the ceiling, it reads no setting).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Collection, Mapping

from graphs.engine.checks.problems import Finding, Keys, finding, op_move, op_remove, op_replace
from graphs.engine.definition import APPROVERS, DECISIONS, Node
from graphs.engine.errors import located
from graphs.engine.stops.approval_forms import form_problems

#: Where a field of the node is written, by the name messages give it (NodeLayout.keys).
KeysOf = Callable[[str | None], Keys]

_MESSAGE_EXAMPLE = 'message: \'"Refund " & $string($.entry.amount) & "?"\''


def approval_findings(
    tool: str, node: Node, keys: KeysOf, unread: Collection[str] = ()
) -> list[Finding]:
    """The problems of an approval node's fields; ``unread`` are the fields parsing could not
    read (already reported: not reported again)."""
    where = functools.partial(located, tool, node.id)
    found: list[Finding] = []
    if node.message is None:
        found.append(
            finding(
                "missing_field",
                where("message"),
                "missing; an approval node needs the JSONata expression of what the person is "
                f"asked, as {_MESSAGE_EXAMPLE}",
                keys(None),
                node=node.id,
            )
        )
    elif not isinstance(node.message, str):
        found.append(
            finding(
                "invalid_field",
                where("message"),
                f"must be a string, a JSONata expression, got {node.message!r}; a fixed text is "
                "written in quotes inside it, as message: '\"Approve the refund?\"'",
                keys("message"),
                node=node.id,
            )
        )
    if node.approvers not in APPROVERS:
        close = (
            difflib.get_close_matches(node.approvers, APPROVERS, n=1)
            if isinstance(node.approvers, str)
            else []
        )
        found.append(
            finding(
                "invalid_field",
                where("approvers"),
                f"{node.approvers!r} is not who may decide; use one of {', '.join(APPROVERS)} "
                "(reviewers: people with the right to decide, on the Approvals page or over "
                "REST; caller: the user of the client that called the workflow)",
                keys("approvers"),
                node=node.id,
                fix=[op_replace(keys("approvers"), close[0])] if close else None,
            )
        )
    if node.form is not None:
        found += [
            finding(
                "invalid_form",
                where("form"),
                problem.message,
                (*keys("form"), *problem.keys),
                node=node.id,
            )
            for problem in form_problems(node.form)
        ]
    timeout = node.timeout_ms
    timeout_ok = timeout is None or (
        isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > 0
    )
    if not timeout_ok:
        found.append(
            finding(
                "invalid_field",
                where("timeoutMs"),
                f"must be a whole number of milliseconds above 0 (86400000 is a day), got "
                f"{timeout!r}",
                keys("timeoutMs"),
                node=node.id,
            )
        )
    if "routes" not in unread:
        found += _route_findings(tool, node, keys)
    return found


def _route_findings(tool: str, node: Node, keys: KeysOf) -> list[Finding]:
    where = functools.partial(located, tool, node.id)
    routes = node.routes
    found = []
    meant = set()  # decisions a misspelt key is moved to: not reported missing as well
    for decision in routes:
        if decision in DECISIONS:
            continue
        field = f"routes.{decision}"
        close = [
            name
            for name in difflib.get_close_matches(str(decision), DECISIONS, n=1, cutoff=0.6)
            if name not in routes
        ]
        hint = f"did you mean {close[0]!r}? " if close else ""
        meant.update(close)
        found.append(
            finding(
                "unknown_decision",
                where(field),
                f"{decision!r} is no decision; {hint}routes are named by decision: "
                f"{', '.join(DECISIONS)}",
                keys(field),
                node=node.id,
                fix=[op_move(keys(field), keys(f"routes.{close[0]}"))] if close else None,
            )
        )
    at = keys("routes") if routes else keys(None)
    for decision, when in (("approved", "approves"), ("rejected", "rejects")):
        if decision not in routes and decision not in meant:
            found.append(
                finding(
                    "missing_route",
                    where(f"routes.{decision}"),
                    f"missing: the node to go to when the person {when}; an approval node "
                    "needs routes for approved and rejected",
                    at,
                    node=node.id,
                )
            )
    if "timeout" in routes and node.timeout_ms is None:
        found.append(
            finding(
                "timeout_route_unused",
                where("routes.timeout"),
                "is never taken: the node has no timeoutMs, so it waits until someone decides; "
                "set timeoutMs (how long to wait, in milliseconds) or remove this route",
                keys("routes.timeout"),
                node=node.id,
                fix=[op_remove(keys("routes.timeout"))],
            )
        )
    if node.timeout_ms is not None and "timeout" not in routes:
        found.append(
            finding(
                "missing_route",
                where("routes.timeout"),
                "missing: the node has a timeoutMs, so its wait can time out, and the run then "
                "needs a node to go to; add `timeout: <node id>` under routes, or remove "
                "timeoutMs to wait until someone decides",
                at,
                node=node.id,
            )
        )
    return found


def approval_timeout_above_ceiling_message(value: int, highest: int, setting: str) -> str:
    """What an approval node waiting longer than the server allows is told (import, save and
    validation)."""
    return (
        f"timeoutMs is {value}, above this server's ceiling of {highest} for how long an "
        f"approval may wait (setting {setting}): set timeoutMs to {highest} or less, or ask an "
        "operator to raise the ceiling."
    )


def timeout_above_ceiling(
    tool: str, node: Node, keys: KeysOf, highest: int, setting: str
) -> Finding | None:
    """The problem of an approval node whose timeoutMs is above the server's ceiling (a fix
    lowers it to the ceiling); None when it is within, or not a usable number."""
    value = node.timeout_ms
    if node.type != "approval" or not isinstance(value, int) or isinstance(value, bool):
        return None
    if value <= highest:
        return None
    return finding(
        "timeout_above_ceiling",
        located(tool, node.id, "timeoutMs"),
        approval_timeout_above_ceiling_message(value, highest, setting),
        keys("timeoutMs"),
        node=node.id,
        fix=[op_replace(keys("timeoutMs"), highest)],
    )


def approval_output_schema(node: Node) -> dict[str, object]:
    """The shape of an approval node's output: the decision, who made it, the comment, the
    form's values and when (what expressions downstream may read)."""
    decisions = [name for name in DECISIONS if name != "timeout" or node.timeout_ms is not None]
    form = node.form if isinstance(node.form, Mapping) else {}
    properties = form.get("properties")
    fields = dict(properties) if isinstance(properties, Mapping) else {}
    return {
        "type": "object",
        "properties": {
            "decision": {"type": "string", "enum": decisions},
            "by": {
                "type": ["object", "null"],
                "properties": {
                    "kind": {"type": "string"},
                    "id": {},
                    "name": {"type": "string"},
                },
                "additionalProperties": False,
            },
            "comment": {"type": "string"},
            "form": {
                "type": "object",
                "properties": fields,
                "additionalProperties": False,
            },
            "decided_at": {"type": "string", "format": "date-time"},
        },
        "required": ["decision", "by", "comment", "form", "decided_at"],
        "additionalProperties": False,
    }
