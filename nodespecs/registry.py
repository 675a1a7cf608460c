"""The in-memory registry that knowledge queries read.

Building it (serialising every spec, indexing it for search) takes milliseconds per hundred
specs, so it is built once and reused until the catalog changes. A change to any spec bumps
a generation token in Django's cache; each process compares its registry's token with the
cache's before answering, so with a shared cache (Redis) every instance sees an admin's edit
at its next query.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

from nodespecs.names import NameResolver
from nodespecs.search import SearchIndex
from nodespecs.serialization import serialize_spec
from nodespecs.specformat import NODE_TYPES

GENERATION_KEY = "nodespecs:catalog-generation"


class Registry:
    """An immutable view of the catalog: serialisations, a name resolver and a search index."""

    def __init__(
        self, documents: Iterable[dict[str, Any]], generation: str = "", table_stamp: str = ""
    ):
        documents = list(documents)
        self.generation = generation
        # The table's (count, last change) when this registry was read from it.
        self.table_stamp = table_stamp
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

    def detail(self, key: tuple[str, str]) -> dict[str, Any]:
        """The full agent-facing serialisation of a spec, built at first use and then reused."""
        detail = self._details.get(key)
        if detail is None:
            detail = self._details[key] = serialize_spec(self._documents[key])
        return detail


_lock = threading.Lock()
_current: Registry | None = None
_checked_at = 0.0

# Besides the cache token, each process compares the table's (count, last change) with its
# registry at most this often, so a change made elsewhere without a shared cache (another
# process, a bulk load) is still seen within a second.
TABLE_CHECK_SECONDS = 1.0


def catalog_changed() -> None:
    """Tell every process that the catalog changed (call after the change is committed)."""
    cache.set(GENERATION_KEY, uuid.uuid4().hex, timeout=None)


def _generation() -> str:
    generation = cache.get(GENERATION_KEY)
    if generation is None:
        # A cold or flushed cache: start a new generation so no stale registry is trusted.
        cache.add(GENERATION_KEY, uuid.uuid4().hex, timeout=None)
        generation = cache.get(GENERATION_KEY)
    return generation


def _table_stamp() -> str:
    from django.db.models import Count, Max

    from nodespecs.models import NodeSpec

    stamp = NodeSpec.objects.aggregate(count=Count("id"), changed=Max("updated_at"))
    return f"{stamp['count']}:{stamp['changed']}"


def needs_database() -> bool:
    """Whether the next `current_registry()` call may query the database (to check the
    table or rebuild); callers in an event loop then run it in a thread."""
    registry = _current
    return (
        registry is None
        or registry.generation != _generation()
        or time.monotonic() - _checked_at >= TABLE_CHECK_SECONDS
    )


def current_registry() -> Registry:
    """The registry for the catalog as it is now, rebuilt only when it has changed."""
    global _current, _checked_at
    generation = _generation()
    registry = _current
    now = time.monotonic()
    if registry is not None and registry.generation == generation:
        if now - _checked_at < TABLE_CHECK_SECONDS:
            return registry
        _checked_at = now
        if registry.table_stamp == _table_stamp():
            return registry
    with _lock:
        if _current is not None and _current is not registry and _current.generation == generation:
            return _current
        from nodespecs.models import DOCUMENT_FIELDS, NodeSpec

        stamp = _table_stamp()
        rows = NodeSpec.objects.values(*DOCUMENT_FIELDS, "available")
        _current = Registry(rows, generation, stamp)
        _checked_at = time.monotonic()
        return _current
