"""Safe YAML loading for definitions that come from authors and uploads.

``yaml.safe_load`` builds no arbitrary objects, but it still accepts two ways of making a
small text expensive: sheer size, and aliases that expand a few bytes into millions of nodes
(the "billion laughs" document). Both are refused here before any Python object is built.
Anchors and aliases are otherwise allowed, so an author can reuse a schema.
"""

from __future__ import annotations

from typing import Any

import yaml

from graphs.engine.errors import DefinitionError

# The pure-Python loader, not libyaml's CSafeLoader: the C composer recurses on the C stack
# and crashes the process on a deeply nested document, where this one raises RecursionError.
_Loader = yaml.SafeLoader

#: Deepest nesting of sequences and mappings accepted; real definitions nest about ten deep,
#: and a bound here keeps every later walk over the data (copies, checks) shallow.
MAX_DEPTH = 100

#: How many nodes aliases may add to a document beyond the nodes written out in it. Reusing
#: a schema a few dozen times stays far below; a billion-laughs document goes far above.
MAX_ALIAS_EXPANSION = 100_000


def load_yaml(text: str, *, max_bytes: int = 1_000_000) -> Any:
    """Parse YAML text safely; DefinitionError if it is too large, malformed or an alias bomb."""
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise DefinitionError(
            f"the YAML text is {size} bytes, over the limit of {max_bytes}; "
            "split the tools into several definitions"
        )
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_expansion(root)
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise DefinitionError(f"the text is not valid YAML: {exc}") from exc
    except RecursionError as exc:
        raise DefinitionError(
            "the YAML is nested too deeply to load; flatten its structure"
        ) from exc
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node) -> None:
    """Refuse documents nested too deeply, or whose aliases loop or expand them too far."""
    expanded: dict[int, int] = {}  # id(node) -> node count once every alias is expanded
    in_progress: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise DefinitionError(
                f"the YAML nests more than {MAX_DEPTH} levels deep; flatten its structure"
            )
        key = id(node)
        if key in expanded:
            return expanded[key]
        if key in in_progress:
            raise DefinitionError(
                "the YAML refers to itself through an alias (an anchor used inside its own "
                "value); write the value out instead"
            )
        in_progress.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(item, depth + 1) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(
                size(key_node, depth + 1) + size(value, depth + 1) for key_node, value in node.value
            )
        in_progress.discard(key)
        expanded[key] = total
        return total

    # Memoising by node makes this linear in the nodes written, however large the expansion.
    total = size(root, 0)
    if total - len(expanded) > MAX_ALIAS_EXPANSION:
        raise DefinitionError(
            f"the YAML's aliases expand it to {total} nodes from {len(expanded)} written; "
            f"at most {MAX_ALIAS_EXPANSION} more are allowed (this looks like an alias bomb); "
            "write repeated values out or reuse fewer anchors"
        )
