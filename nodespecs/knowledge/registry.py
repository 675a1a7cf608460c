"""The in-memory registry that knowledge queries read.

Building it (serialising every spec, indexing it for search) takes milliseconds per hundred
specs, so it is built once per process and reused until the catalog changes
(nodespecs/snapshots.py: with a shared cache, every instance sees an admin's edit at its next
query; without one, within a second).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Max

from nodespecs.knowledge.names import NameResolver
from nodespecs.knowledge.search import SearchIndex
from nodespecs.knowledge.serialization import serialize_spec
from nodespecs.knowledge.specformat import NODE_TYPES
from nodespecs.models import DOCUMENT_FIELDS, NodeSpec
from nodespecs.snapshots import StampedSnapshot

GENERATION_KEY = "nodespecs:catalog-generation"


class Registry:
    """An immutable view of the catalog: serialisations, a name resolver and a search index."""

    def __init__(self, documents: Iterable[dict[str, Any]]):
        documents = list(documents)
        self._documents = {(doc["node_type"], doc["subtype"]): doc for doc in documents}
        self._details: dict[tuple[str, str], dict[str, Any]] = {}
        aliases = {
            (doc["node_type"], alias): (doc["node_type"], doc["subtype"])
            for doc in documents
            for alias in doc.get("aliases") or []
        }
        self.resolver = NameResolver(self._documents.keys(), aliases)
        # A provider tool that its server no longer offers (`available: False`) is still
        # found by name, to say so, but is neither listed nor searched.
        listed = [doc for doc in documents if doc.get("available", True)]
        self.index = SearchIndex(listed)
        self.types: dict[str, list[str]] = {node_type: [] for node_type in NODE_TYPES}
        for node_type, subtype in sorted((doc["node_type"], doc["subtype"]) for doc in listed):
            self.types.setdefault(node_type, []).append(subtype)

    def has_detail(self, key: tuple[str, str]) -> bool:
        """Whether `detail(key)` is built already (a cache hit, for the metrics)."""
        return key in self._details

    def detail(self, key: tuple[str, str]) -> dict[str, Any]:
        """The full agent-facing serialisation of a spec, built at first use and then reused."""
        detail = self._details.get(key)
        if detail is None:
            detail = self._details[key] = serialize_spec(self._documents[key])
        return detail


def _table_stamp() -> str:
    stamp = NodeSpec.objects.aggregate(count=Count("id"), changed=Max("updated_at"))
    return f"{stamp['count']}:{stamp['changed']}"


def _build() -> Registry:
    return Registry(NodeSpec.objects.values(*DOCUMENT_FIELDS, "available"))


_snapshot = StampedSnapshot(GENERATION_KEY, _table_stamp, _build)


def catalog_changed() -> None:
    """Tell every process that the catalog changed, once the change is committed."""
    _snapshot.changed()


def needs_database() -> bool:
    """Whether the next `current_registry()` call may query the database (to check the
    table or rebuild); callers in an event loop then run it in a thread."""
    return _snapshot.needs_database()


def current_registry() -> Registry:
    """The registry for the catalog as it is now, rebuilt only when it has changed."""
    return _snapshot.get()


def refresh_registry() -> Registry:
    """`current_registry()`, checking the table as soon as `needs_database()` asks for it
    (for threads that may query)."""
    return _snapshot.refresh()
