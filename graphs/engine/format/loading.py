"""Safe YAML loading for definitions that come from authors and uploads.

``yaml.safe_load`` builds no arbitrary objects, but it still accepts ways of making a small
text expensive: sheer size, aliases that expand a few bytes into millions of nodes (the
"billion laughs" document), and deep nesting (libyaml's composer recurses on the C stack and
crashes the process; PyYAML's pure-Python reader takes seconds over a few thousand brackets).
All three are refused by a first pass over libyaml's event stream, which keeps its own
stack, before any node or object is built. Anchors and aliases are otherwise allowed, so an
author can reuse a schema.

That pass also counts what a caller may bound (`Counted`): the values written, and the graph
nodes (the items of `nodes` and of each tool's `nodes`). Building the objects is what costs:
660 KB of 6,000 small nodes took 1.6 s to read before validation refused it for its nodes;
counted on the way, it is refused in 0.08 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from graphs.engine.errors import DefinitionError

# libyaml when it is compiled in: tens of times faster than the pure-Python loader.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Deepest nesting of sequences and mappings accepted; real definitions nest about ten deep.
MAX_DEPTH = 100
_TOO_DEEP = f"the YAML nests more than {MAX_DEPTH} levels deep; flatten its structure"
#: How many nodes aliases may add to a document beyond the nodes written out in it. Reusing
#: a schema a few dozen times stays far below; a billion-laughs document goes far above.
MAX_ALIAS_EXPANSION = 100_000

_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
# Where a definition lists its graph nodes, as key paths (None: any item of a sequence).
_NODE_LISTS = (("nodes",), ("tools", None, "nodes"))


class DefinitionTooLarge(DefinitionError):
    """YAML text that holds more than a `Counted` bound, refused before it is built."""


@dataclass(frozen=True)
class Counted:
    """The most values (scalars and collections, mapping keys not counted) and graph nodes
    YAML text may hold, counted as it is read."""

    values: int
    nodes: int


def load_yaml(text: str, *, max_bytes: int = 1_000_000, counted: Counted | None = None) -> Any:
    """Parse YAML text safely; DefinitionError if it is too large, too deep, malformed or an
    alias bomb, and DefinitionTooLarge if it holds more than `counted` says."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise DefinitionError(
            f"the YAML text is {size} bytes, over the limit of {max_bytes}; "
            "split the tools into several definitions"
        )
    try:
        _check_shape(text, counted)
        return yaml.load(text, Loader=_Loader)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        # The libyaml of PyYAML 6.0.4 and later stops deep flow collections in its scanner,
        # which reads ahead of the events `_check_shape` counts.
        if "maximum nesting depth" in str(exc):
            raise DefinitionError(_TOO_DEEP) from exc
        raise DefinitionError(f"the text is not valid YAML: {exc}") from exc


def _check_shape(text: str, counted: Counted | None = None) -> None:
    """Refuse nesting deeper than MAX_DEPTH, aliases to themselves, alias bombs, and more
    than `counted` allows."""
    open_counts: list[int] = []  # nodes in each collection being read, innermost last
    open_anchors: list[str | None] = []
    anchored: dict[str, int] = {}  # anchor -> nodes in its value, aliases expanded
    written = total = 0
    counter = _Counter(counted) if counted is not None else None
    for event in yaml.parse(text, Loader=_Loader):
        if counter is not None:
            counter.see(event)
        if isinstance(event, _OPENS):
            if len(open_counts) == MAX_DEPTH:
                raise DefinitionError(_TOO_DEEP)
            open_counts.append(1)
            open_anchors.append(event.anchor)
            written += 1
            continue
        if isinstance(event, _CLOSES):
            count, anchor = open_counts.pop(), open_anchors.pop()
        elif isinstance(event, yaml.ScalarEvent):
            count, anchor = 1, event.anchor
            written += 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise DefinitionError(
                    f"the YAML alias *{event.anchor} is inside its own anchor, which makes the "
                    "value contain itself; write the value out instead"
                )
            # The parser names the anchor of every alias (the stubs type it as optional).
            count = anchored.get(event.anchor, 1) if event.anchor is not None else 1
            anchor = None
        else:  # stream and document boundaries
            continue
        if anchor is not None:
            anchored[anchor] = count
        if open_counts:
            open_counts[-1] += count
        else:
            total += count
    if total - written > MAX_ALIAS_EXPANSION:
        raise DefinitionError(
            f"the YAML's aliases expand it to {total} nodes from {written} written; at most "
            f"{MAX_ALIAS_EXPANSION} more are allowed (this looks like an alias bomb); write "
            "repeated values out or reuse fewer anchors"
        )


class _Counter:
    """Counts the values and graph nodes of YAML text, event by event, and refuses the text
    as soon as either passes its bound. Knows, for each collection being read, its key path
    from the document and, for a mapping, whether a key or a value comes next."""

    def __init__(self, bounds: Counted) -> None:
        self.bounds = bounds
        self.values = self.nodes = 0
        # Per open collection: its path, whether it is a mapping, and a mapping's key whose
        # value comes next (None while a key comes next).
        self.open: list[tuple[tuple[str | None, ...], bool, list[Any]]] = []

    def see(self, event: yaml.Event) -> None:
        if isinstance(event, _CLOSES):
            self.open.pop()
            return
        if not isinstance(event, (*_OPENS, yaml.ScalarEvent, yaml.AliasEvent)):
            return  # stream and document boundaries
        path: tuple[str | None, ...] = ()
        if self.open:
            parent_path, is_mapping, pending_key = self.open[-1]
            if is_mapping and not pending_key:  # a key: not a value, and names the next one
                key = event.value if isinstance(event, yaml.ScalarEvent) else ""
                pending_key.append(key)
                if isinstance(event, _OPENS):  # a collection as a key: no node is in it
                    self.open.append(((*parent_path, ""), _is_mapping(event), []))
                return
            if is_mapping:
                path = (*parent_path, pending_key.pop())
            else:
                path = (*parent_path, None)
                if parent_path in _NODE_LISTS:
                    self.nodes += 1
        self.values += 1
        if isinstance(event, _OPENS):
            self.open.append((path, _is_mapping(event), []))
        if self.values > self.bounds.values:
            raise DefinitionTooLarge(
                f"the definition holds more than {self.bounds.values:,} values, more than "
                "validation reads; split its tools into several definitions"
            )
        if self.nodes > self.bounds.nodes:
            raise DefinitionTooLarge(
                f"the definition has more than {self.bounds.nodes:,} nodes, more than "
                "validation reads; split it into several workflows (one can call another as "
                "an mcp node)"
            )


def _is_mapping(event: yaml.Event) -> bool:
    return isinstance(event, yaml.MappingStartEvent)
