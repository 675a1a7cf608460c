"""What differs between two JSON values, place by place: for comparing two runs and for an
example's result against what a version answers now.

Objects are compared key by key and arrays index by index (an item inserted at the front
shows as every later index changed: a reviewer reads positions, as the run's outputs have
them). Each difference names its place as a JSON Pointer (RFC 6901) and gives both values;
a side that has nothing there has no key. The walk stops after `limit` differences and says
how many places it did not look at, so two large payloads cost at most `limit` entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The most differences reported for one pair of values.
MAX_DIFFERENCES = 100
#: Below this depth two values are compared whole (one difference for the subtree), so a
#: deeply nested payload cannot exhaust the stack.
MAX_DEPTH = 64


@dataclass
class Differences:
    """The differences found, in document order, and whether the walk stopped early."""

    items: list[dict[str, Any]] = field(default_factory=list)
    # True when there were more than the limit: `items` holds the first ones.
    cut: bool = False

    def as_json(self) -> dict[str, Any]:
        """As the REST API and the pages give it."""
        return {"items": self.items, "cut": self.cut}


def differences(a: Any, b: Any, *, limit: int = MAX_DIFFERENCES) -> Differences:
    """Where `a` and `b` differ: `{"path", "a", "b"}` per place (a side without the place
    has no key), at most `limit` of them."""
    found = Differences()
    _walk(a, b, "", found, limit, 0)
    return found


def _same(a: Any, b: Any) -> bool:
    # JSON has one number type: 1 and 1.0 are the same value, true and 1 are not.
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _walk(a: Any, b: Any, path: str, found: Differences, limit: int, depth: int) -> None:
    if found.cut:
        return
    deeper = depth < MAX_DEPTH
    if deeper and isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(key for key in b if key not in a)]:
            _side(a, b, key, f"{path}/{_escaped(str(key))}", found, limit, depth)
        return
    if deeper and isinstance(a, list) and isinstance(b, list):
        a_items, b_items = dict(enumerate(a)), dict(enumerate(b))
        for index in range(max(len(a), len(b))):
            _side(a_items, b_items, index, f"{path}/{index}", found, limit, depth)
        return
    if not _same(a, b):
        _add(found, {"path": path, "a": a, "b": b}, limit)


def _side(
    a: dict[Any, Any],
    b: dict[Any, Any],
    key: Any,
    path: str,
    found: Differences,
    limit: int,
    depth: int,
) -> None:
    if key in a and key in b:
        _walk(a[key], b[key], path, found, limit, depth + 1)
    elif key in a:
        _add(found, {"path": path, "a": a[key]}, limit)
    else:
        _add(found, {"path": path, "b": b[key]}, limit)


def _add(found: Differences, item: dict[str, Any], limit: int) -> None:
    if len(found.items) >= limit:
        found.cut = True
        return
    found.items.append(item)


def _escaped(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
