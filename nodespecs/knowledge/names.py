"""Resolving the node names agents write to the catalog's canonical (type, subtype) keys.

Agents trained on older docs write `ACTION_NODE`, `human_loop_node`, `TRIGGER_MANUAL`,
`OPENAI_NODE` or `HTTP_REQUST`. Each correction is reported so the agent learns the right
name; a name that cannot be resolved gets the closest valid names. Plain Python.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from nodespecs.knowledge.specformat import NODE_TYPES, normalise_node_type

Key = tuple[str, str]

# How close a misspelt subtype must be to a real one to be corrected without asking.
_SUBTYPE_CUTOFF = 0.85
_TYPE_CUTOFF = 0.8


def _one_edit_apart(a: str, b: str) -> bool:
    """True when one insertion, deletion, substitution or swap turns `a` into `b`."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k in range(len(a)) if a[k] != b[k]), len(a))
    if len(a) < len(b):
        return a[i:] == b[i + 1 :]
    return a[i + 1 :] == b[i + 1 :] or (
        a[i + 2 :] == b[i + 2 :] and a[i : i + 2] == b[i : i + 2][::-1]
    )


def provider_node_name(provider: str, tool: str) -> str:
    """The node name of a provider's MCP tool, as seed 004 writes it: `mcp-{provider}-{tool}`,
    the tool's name with each character outside [A-Za-z0-9_] replaced by `_`."""
    return f"mcp-{provider}-{re.sub(r'[^A-Za-z0-9_]', '_', tool)}"


def provider_subtype(node_name: str) -> str:
    """The spec subtype of a provider node name: `mcp-files-read_file` → MCP_FILES_READ_FILE.

    The resolver reads a subtype the same way (upper case, `-` → `_`), so agents can ask for
    a provider's tool by either spelling."""
    return node_name.upper().replace("-", "_")


def _is_provider_node_name(raw: str, subtype: str) -> bool:
    return raw.startswith("mcp-") and provider_subtype(raw) == subtype


class UnknownNodeType(ValueError):
    """A node type that is not one of the eight, even after correction."""


@dataclass
class Resolution:
    key: Key | None
    corrections: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    @property
    def warning(self) -> str | None:
        if not self.corrections or self.key is None:
            return None
        return "Auto-corrected: " + "; ".join(self.corrections) + "."


def resolve_node_type(raw: str) -> tuple[str, str | None]:
    """Return (canonical type, correction note or None); raise `UnknownNodeType`."""
    if not isinstance(raw, str) or not raw.strip():
        raise UnknownNodeType(f"node_type is empty; use one of {', '.join(NODE_TYPES)}")
    name = normalise_node_type(raw)
    if name not in NODE_TYPES:
        close = difflib.get_close_matches(name, NODE_TYPES, n=1, cutoff=_TYPE_CUTOFF)
        if not close:
            raise UnknownNodeType(f"{raw!r} is not a node type; use one of {', '.join(NODE_TYPES)}")
        name = close[0]
    if name == raw:
        return name, None
    if raw.strip().upper().endswith("_NODE") and raw.strip().upper()[: -len("_NODE")] == name:
        return name, f"'{raw}' → '{name}'. Please use correct format without '_NODE' suffix"
    return name, f"'{raw}' → '{name}'"


class NameResolver:
    """Resolves names against one catalog: its keys and the aliases its specs declare."""

    def __init__(self, keys: Iterable[Key], aliases: dict[Key, Key]):
        self._keys = set(keys)
        self._aliases = dict(aliases)
        self._subtypes_by_type: dict[str, list[str]] = {}
        for node_type, subtype in sorted(self._keys):
            self._subtypes_by_type.setdefault(node_type, []).append(subtype)
        self._all_names = [f"{t}/{s}" for t, s in sorted(self._keys)]

    def resolve(self, raw_type: str, raw_subtype: str, *, approximate: bool = True) -> Resolution:
        """Find the spec an agent meant, saying what was corrected.

        `approximate` allows matching misspelt subtypes and suggesting the closest names,
        which compares the name with every name in the catalog; without it only exact names,
        older names and prefix or suffix forms are found, at a cost independent of the
        catalog's size.
        """
        try:
            node_type, type_note = resolve_node_type(raw_type)
        except UnknownNodeType:
            suggestions = self._closest(f"{raw_type}/{raw_subtype}") if approximate else []
            return Resolution(None, suggestions=suggestions)
        corrections = [type_note] if type_note else []
        if not isinstance(raw_subtype, str) or not raw_subtype.strip():
            return Resolution(None, corrections, self._subtypes_of(node_type)[:5])
        subtype = raw_subtype.strip().upper().replace("-", "_").replace(" ", "_")
        found = self._find_subtype(node_type, subtype, approximate=approximate)
        if found is None:
            suggestions = self._closest(f"{node_type}/{subtype}", node_type) if approximate else []
            return Resolution(None, corrections, suggestions)
        key, how = found
        # A provider tool's `mcp-…` node name is one of its two spellings, not a mistake.
        if how or (key[1] != raw_subtype and not _is_provider_node_name(raw_subtype, key[1])):
            note = f"'{raw_subtype}' → '{key[1]}'"
            corrections.append(f"{note} ({how})" if how else note)
        if key[0] != node_type:
            corrections.append(f"'{node_type}' → '{key[0]}' ({subtype} is a {key[0]} node)")
        return Resolution(key, corrections)

    def _find_subtype(
        self, node_type: str, subtype: str, *, approximate: bool
    ) -> tuple[Key, str] | None:
        if (node_type, subtype) in self._keys:
            return (node_type, subtype), ""
        alias = self._aliases.get((node_type, subtype))
        if alias:
            return alias, f"'{subtype}' is an older name of {alias[0]}/{alias[1]}"
        # TRIGGER_MANUAL, HUMAN_SLACK, MEMORY_BUFFER: older names carried the type as a prefix.
        for prefix in (f"{node_type}_", node_type.split("_")[0] + "_"):
            if subtype.startswith(prefix) and (node_type, subtype[len(prefix) :]) in self._keys:
                return (node_type, subtype[len(prefix) :]), "type prefix removed"
        if subtype.endswith("_NODE") and (node_type, subtype[: -len("_NODE")]) in self._keys:
            return (node_type, subtype[: -len("_NODE")]), "'_NODE' suffix removed"
        if not approximate:
            return None
        close = difflib.get_close_matches(
            subtype, self._subtypes_of(node_type), n=1, cutoff=_SUBTYPE_CUTOFF
        )
        if close:
            return (node_type, close[0]), "closest match to a misspelt name"
        # Short names fall under the ratio cutoff after one slip ("IFF"); one edit is enough.
        one_edit = [s for s in self._subtypes_of(node_type) if _one_edit_apart(subtype, s)]
        if len(one_edit) == 1:
            return (node_type, one_edit[0]), "closest match to a misspelt name"
        # The right subtype under the wrong type, when that subtype is unique in the catalog.
        owners = [t for t in NODE_TYPES if (t, subtype) in self._keys]
        if len(owners) == 1:
            return (owners[0], subtype), ""
        return None

    def _subtypes_of(self, node_type: str) -> list[str]:
        return self._subtypes_by_type.get(node_type, [])

    def _closest(self, name: str, node_type: str | None = None) -> list[str]:
        pool = [f"{node_type}/{s}" for s in self._subtypes_of(node_type)] if node_type else []
        close = difflib.get_close_matches(name, pool, n=3, cutoff=0.5)
        for candidate in difflib.get_close_matches(name, self._all_names, n=5, cutoff=0.5):
            if candidate not in close and len(close) < 5:
                close.append(candidate)
        return close or pool[:5]
