"""Safe YAML loading for definitions that come from authors and uploads.

``yaml.safe_load`` builds no arbitrary objects, but it still accepts ways of making a small
text expensive: sheer size, aliases that expand a few bytes into millions of nodes (the
"billion laughs" document), and deep nesting (libyaml's composer recurses on the C stack and
crashes the process; PyYAML's pure-Python reader takes seconds over a few thousand brackets).
All three are refused by a first pass over libyaml's event stream, which keeps its own
stack, before any node or object is built. Anchors and aliases are otherwise allowed, so an
author can reuse a schema.
"""

from __future__ import annotations

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


def load_yaml(text: str, *, max_bytes: int = 1_000_000) -> Any:
    """Parse YAML text safely; DefinitionError if it is too large, too deep, malformed or an
    alias bomb."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise DefinitionError(
            f"the YAML text is {size} bytes, over the limit of {max_bytes}; "
            "split the tools into several definitions"
        )
    try:
        _check_shape(text)
        return yaml.load(text, Loader=_Loader)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        # The libyaml of PyYAML 6.0.4 and later stops deep flow collections in its scanner,
        # which reads ahead of the events `_check_shape` counts.
        if "maximum nesting depth" in str(exc):
            raise DefinitionError(_TOO_DEEP) from exc
        raise DefinitionError(f"the text is not valid YAML: {exc}") from exc


def _check_shape(text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, aliases to themselves, and alias bombs."""
    open_counts: list[int] = []  # nodes in each collection being read, innermost last
    open_anchors: list[str | None] = []
    anchored: dict[str, int] = {}  # anchor -> nodes in its value, aliases expanded
    written = total = 0
    for event in yaml.parse(text, Loader=_Loader):
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
