"""How deep JSON values nest: measured without recursion, and cut to a depth where they must be
answered or kept.

Whatever writes JSON here gives up somewhere past 250 levels of arrays and objects: orjson
and pydantic's serializer at 255, the standard library's encoder and every recursive walk
(masking secrets, measuring) at Python's recursion limit. A value nested deeper cannot be
answered, stored or shown: a workflow call whose answer could not be written once left its
caller waiting two minutes, and a run stored with such arguments broke `get_run` and
`list_runs` for every reader (issue 25, item 13). So requests are bounded at admission
(MCP_MAX_JSON_DEPTH, mcp_endpoint/protocol/core.py), and what a run makes or a row holds is cut to
`MAX_DEPTH` before it is answered or stored (`cut_to_depth`), the part left out marked.
"""

from __future__ import annotations

from typing import Any

#: The deepest a value is answered, stored or shown: far below where the encoders give up
#: (255, less the few levels of the messages that carry it), far above what real data needs.
MAX_DEPTH = 100
#: The key that marks a value the history keeps only in part (also graphs/execution/payloads.py's).
TRUNCATED_KEY = "_truncated"


def deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests arrays and objects more than `limit` levels deep (a scalar is
    0 levels, `[]` and `{}` are 1, `[[]]` is 2). Its cost grows with the value's size, never
    with the stack: any depth is measured."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending += [(child, depth + 1) for child in children if isinstance(child, dict | list)]
    return False


def too_deep_mark(limit: int) -> dict[str, Any]:
    """What stands for a part of a value below `limit` levels, which was not kept."""
    return {TRUNCATED_KEY: True, "reason": f"nested deeper than {limit} levels; not kept"}


def cut_to_depth(value: Any, limit: int = MAX_DEPTH) -> tuple[Any, bool]:
    """`value` nesting at most `limit` levels: each array or object at the last level that
    holds more arrays or objects replaced by `too_deep_mark`; and whether anything was.
    `value` itself, uncopied, when it is within the limit."""
    if not deeper_than(value, limit):
        return value, False
    root: list[Any] = [None]
    # Each item with the container and place its copy goes to, and its depth.
    pending: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 1)]
    while pending:
        item, parent, place, depth = pending.pop()
        if depth >= limit and deeper_than(item, 1):
            parent[place] = too_deep_mark(limit)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = dict.fromkeys(item)  # the keys in their order, filled below
            parent[place] = copy
            pending += [(child, copy, key, depth + 1) for key, child in item.items()]
        elif isinstance(item, list):
            parent[place] = listed = [None] * len(item)
            pending += [(child, listed, index, depth + 1) for index, child in enumerate(item)]
        else:
            parent[place] = item
    return root[0], True
