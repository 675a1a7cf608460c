"""The node knowledge service: what agents ask about the catalog, answered as plain data.

These functions are the contract of the MCP tools `get_node_types`, `get_node_details` and
`search_nodes` (see seeds 000 and 001); the MCP and REST layers only parse and format.
Each takes an optional `registry` so that tests and benchmarks can query a catalog that is
not in the database.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import SynchronousOnlyOperation

from nodespecs import telemetry
from nodespecs.knowledge.detail_levels import DETAIL_LEVELS, view_at
from nodespecs.knowledge.names import UnknownNodeType, resolve_node_type
from nodespecs.knowledge.registry import Registry, current_registry
from nodespecs.knowledge.search import words
from nodespecs.knowledge.specformat import NODE_TYPES

MAX_SEARCH_RESULTS = 100
# The longest name a spec can have (NodeSpec.subtype); correcting a name compares it with
# the catalog's names, at a cost that grows with its length.
MAX_NAME_CHARACTERS = 200
UNAVAILABLE_WARNING = (
    "Unavailable: the MCP server of this provider node no longer offers its tool, so a "
    "workflow cannot run it. Choose another node, or refresh the provider if the tool is back."
)
MAX_NODES_PER_CALL = 50
#: Names of one get_node_details call that are matched approximately when not exact.
MAX_APPROXIMATE_PER_CALL = 5
#: Names suggested for a node that was not found.
MAX_SUGGESTIONS = 5
#: Nodes of one get_node_details call described in a thread that runs an event loop: exact
#: names are dictionary lookups, but each description is copied and encoded.
EVENT_LOOP_NODES = 5


class KnowledgeError(ValueError):
    """A request the service cannot answer; the message says how to fix it."""


def not_in_event_loop(work: str) -> None:
    """Refuse `work`, whose cost grows with what the caller sent, in a thread running an
    event loop, where it would hold up every other request. Raises Django's
    `SynchronousOnlyOperation`, on which the ASGI app does the whole request again on a
    worker thread (mcp_endpoint/transports/asgi.py)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise SynchronousOnlyOperation(f"{work} is not done in the event loop.")


@dataclass(frozen=True)
class NodeTypes:
    node_types: dict[str, list[str]]
    warning: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The seed's response shape (type → subtypes), plus `warning` when one applies."""
        result: dict[str, Any] = dict(self.node_types)
        if self.warning:
            result["warning"] = self.warning
        return result


def _check_name_length(field: str, value: object) -> None:
    """Refuse a name longer than any spec's before comparing it with the catalog's names."""
    if isinstance(value, str) and len(value) > MAX_NAME_CHARACTERS:
        raise KnowledgeError(
            f"{field} has {len(value)} characters; the limit is {MAX_NAME_CHARACTERS}. "
            "Call get_node_types for the valid names."
        )


def _type_filter(raw: str | None) -> tuple[str | None, str | None]:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, None
    _check_name_length("type_filter", raw)
    try:
        node_type, note = resolve_node_type(raw)
    except UnknownNodeType as exc:
        raise KnowledgeError(f"type_filter: {exc}") from None
    return node_type, (f"Auto-corrected type_filter: {note}." if note else None)


def get_node_types(
    type_filter: str | None = None, *, registry: Registry | None = None
) -> NodeTypes:
    """All node types with their sorted subtypes, or only `type_filter`'s.

    A filter one `_NODE` suffix, case or typo away from a type is corrected with a warning;
    any other bad filter raises `KnowledgeError` listing the valid types.
    """
    registry = registry or current_registry()
    node_type, warning = _type_filter(type_filter)
    if node_type is None:
        return NodeTypes({t: list(registry.types.get(t, [])) for t in NODE_TYPES})
    return NodeTypes({node_type: list(registry.types.get(node_type, []))}, warning)


def _view(
    detail: dict[str, Any], *, include_examples: bool, include_schemas: bool
) -> dict[str, Any]:
    """A shallow copy of a full serialisation with the optional parts left out."""
    view = dict(detail)
    if not include_examples:
        view.pop("examples", None)
    if not include_schemas:
        view.pop("input_params_schema", None)
        view.pop("output_params_schema", None)
        for ports in ("input_ports", "output_ports"):
            view[ports] = [
                {**port, "data_format": None, "validation_schema": None} for port in view[ports]
            ]
    return view


def get_node_details(
    nodes: list[dict[str, Any]],
    include_examples: bool = True,
    include_schemas: bool = True,
    *,
    detail: str | None = None,
    registry: Registry | None = None,
) -> list[dict[str, Any]]:
    """Full specs for each requested `{node_type, subtype}`, in request order; with `detail`
    (`minimal`, `standard` or `full`, see detail_levels.py) that view of each instead, and
    the `include_*` flags are ignored.

    Names are corrected where the intent is clear (`ACTION_NODE`, case, older aliases,
    near-miss subtypes) and the entry then carries a `warning`; so does a provider's tool
    that its server no longer offers (with `available: false`). A node that cannot be found
    gets an entry with an `error` and `suggestions`; the other entries are unaffected.
    The returned dicts share nested data with the registry: treat them as read-only.
    """
    if not isinstance(nodes, list) or not nodes:
        raise KnowledgeError(
            'nodes must be a non-empty list such as [{"node_type": "ACTION", '
            '"subtype": "HTTP_REQUEST"}]; call get_node_types to see valid names.'
        )
    if len(nodes) > MAX_NODES_PER_CALL:
        raise KnowledgeError(
            f"nodes has {len(nodes)} entries; ask for at most {MAX_NODES_PER_CALL} per call."
        )
    if detail is not None and detail not in DETAIL_LEVELS:
        raise KnowledgeError(
            f"detail must be one of {', '.join(DETAIL_LEVELS)}, or left out for the answer "
            "the include_* flags shape."
        )
    for position, request in enumerate(nodes):
        if isinstance(request, dict):
            for field in ("node_type", "subtype"):
                _check_name_length(f"nodes[{position}].{field}", request.get(field))
    if len(nodes) > EVENT_LOOP_NODES:
        not_in_event_loop(f"Describing more than {EVENT_LOOP_NODES} nodes")
    registry = registry or current_registry()
    results = []
    approximations = hits = misses = 0
    for position, request in enumerate(nodes):
        if not isinstance(request, dict):
            results.append(
                {"error": f"nodes[{position}] must be an object with node_type and subtype."}
            )
            continue
        raw_type, raw_subtype = request.get("node_type"), request.get("subtype")
        if not isinstance(raw_type, str) or not isinstance(raw_subtype, str):
            results.append(
                {
                    "node_type": raw_type,
                    "subtype": raw_subtype,
                    "error": f"nodes[{position}] needs string fields node_type and subtype.",
                }
            )
            continue
        # Exact names first; matching a misspelling compares it with every name in the
        # catalog, so a call gets that for a few names only, whatever its length.
        resolution = registry.resolver.resolve(raw_type, raw_subtype, approximate=False)
        approximated = resolution.key is None and approximations < MAX_APPROXIMATE_PER_CALL
        if approximated:
            not_in_event_loop("Matching a name that is not exact")
            approximations += 1
            resolution = registry.resolver.resolve(raw_type, raw_subtype)
        if resolution.key is None:
            suggestions = (
                _suggestions(registry, raw_type, raw_subtype, resolution.suggestions)
                if approximated
                else []
            )
            hint = f" Closest valid names: {', '.join(suggestions)}." if suggestions else ""
            if not approximated:
                hint = (
                    f" Only the first {MAX_APPROXIMATE_PER_CALL} names of a call that are not "
                    "exact are matched approximately; ask for this one in a call of its own."
                )
            results.append(
                {
                    "node_type": raw_type,
                    "subtype": raw_subtype,
                    "error": f"Node specification not found: {raw_type}/{raw_subtype}.{hint} "
                    "Call get_node_types for every valid name.",
                    "suggestions": suggestions,
                }
            )
            continue
        cached = registry.has_detail(resolution.key)
        hits, misses = hits + cached, misses + (not cached)
        if detail is None:
            view = _view(
                registry.detail(resolution.key),
                include_examples=include_examples,
                include_schemas=include_schemas,
            )
        else:
            view = view_at(registry.detail(resolution.key), detail)
        warnings = [resolution.warning] if resolution.warning else []
        if view.get("available") is False:
            warnings.append(UNAVAILABLE_WARNING)
        if warnings:
            view["warning"] = " ".join(warnings)
        results.append(view)
    telemetry.knowledge_cache(hits, misses)
    return results


def _suggestions(
    registry: Registry, node_type: str, subtype: str, close_names: list[str]
) -> list[str]:
    """The specs an agent most likely meant by an unknown name, best first.

    Candidates are a search over the subtype's words (`SEND_EMAIL` → "send email") and the
    names spelt alike; those of a type sharing a word with the one asked for (`ACTION` →
    `EXTERNAL_ACTION`) come first, then those whose subtype shares one of its words
    (`HTTP_PUSH` → `HTTP_REQUEST`), each group in search order.
    """
    hits = registry.index.search(" ".join(words(subtype)), limit=2 * MAX_SUGGESTIONS)
    candidates = [f"{key[0]}/{key[1]}" for key in (hit.key for hit in hits)]
    candidates += [name for name in close_names if name not in candidates]
    asked_type, asked_words = set(words(node_type)), set(words(subtype))

    def rank(position: int) -> tuple[bool, bool, int]:
        candidate_type, candidate_subtype = candidates[position].split("/", 1)
        return (
            not asked_type & set(words(candidate_type)),
            not asked_words & set(words(candidate_subtype)),
            position,
        )

    best = sorted(range(len(candidates)), key=rank)[:MAX_SUGGESTIONS]
    return [candidates[position] for position in best]


def _check_query_size(query: str) -> None:
    """Refuse a query over the length or term limits before any of it is stemmed."""
    limit = settings.KNOWLEDGE_MAX_QUERY_CHARACTERS
    if len(query) > limit:
        raise KnowledgeError(
            f"query has {len(query)} characters; the limit is {limit} "
            "(KNOWLEDGE_MAX_QUERY_CHARACTERS). Describe what the node should do in a sentence "
            "or two, e.g. 'send an email'."
        )
    limit, term_count = settings.KNOWLEDGE_MAX_QUERY_TERMS, len(words(query))
    if term_count > limit:
        raise KnowledgeError(
            f"query has {term_count} terms (words and numbers); the limit is {limit} "
            "(KNOWLEDGE_MAX_QUERY_TERMS). Describe what the node should do in a sentence or two."
        )


def search_nodes(
    query: str,
    max_results: int = 10,
    include_details: bool = False,
    type_filter: str | None = None,
    *,
    registry: Registry | None = None,
) -> list[dict[str, Any]]:
    """Specs ranked by relevance to a natural-language query, best first, with scores.

    Without `include_details` each result is a summary (type, subtype, name, description,
    score, matched terms); with it, the full spec plus the score.
    """
    if not isinstance(query, str) or not query.strip():
        raise KnowledgeError(
            "query is empty; describe what the node should do, e.g. 'send an email'."
        )
    if (
        isinstance(max_results, bool)
        or not isinstance(max_results, int)
        or not (1 <= max_results <= MAX_SEARCH_RESULTS)
    ):
        raise KnowledgeError(f"max_results must be a whole number from 1 to {MAX_SEARCH_RESULTS}.")
    _check_query_size(query)
    registry = registry or current_registry()
    node_type, _ = _type_filter(type_filter)
    results = []
    ready = 0
    for hit in registry.index.search(query, limit=max_results, node_type=node_type):
        ready += registry.has_detail(hit.key)
        detail = registry.detail(hit.key)
        if include_details:
            result = dict(detail)
        else:
            result = {
                "node_type": detail["node_type"],
                "subtype": detail["subtype"],
                "display_name": detail["display_name"],
                "description": detail["description"],
                "tags": detail["tags"],
            }
        result["relevance_score"] = hit.score
        result["matched_terms"] = list(hit.matched_terms)
        results.append(result)
    telemetry.knowledge_cache(ready, len(results) - ready)
    return results
