"""The MCP resources: node specs at `nodespec://{node_type}/{subtype}`, and workflow runs at
`run://{run_id}` (run_tools.py), both JSON.

Reading any resource needs the scope `resources:read` (dispatch.REQUIRED_SCOPES). A run holds
its caller's arguments and results, so reading one needs `runs:read` as well, as its REST and
tool forms do: `read_scope` names the scope a URI needs beyond `resources:read`, and dispatch
checks it before reading, as it checks each of its own tools' scopes. A node spec is the same
for every caller and changes rarely, so clients may cache it (core.CACHE_HINTS); a run changes
while it runs and is not every caller's to see, so `read` marks it never to be cached.
"""

from __future__ import annotations

from typing import Any

from mcp import types

from mcp_endpoint.features import extensions, run_tools
from mcp_endpoint.jsonrpc.encoding import json_text
from nodespecs.knowledge import service as knowledge
from nodespecs.knowledge.registry import current_registry

SCHEME = "nodespec://"
MIME_TYPE = "application/json"

TEMPLATE = types.ResourceTemplate(
    uri_template=SCHEME + "{node_type}/{subtype}",
    name="node-spec",
    title="Node spec",
    description=(
        "The full specification of one workflow node, as get_node_details returns it, "
        "e.g. nodespec://ACTION/HTTP_REQUEST."
    ),
    mime_type=MIME_TYPE,
)

RUN_TEMPLATE = types.ResourceTemplate(
    uri_template=run_tools.RUN_SCHEME + "{run_id}",
    name="run",
    title="Workflow run",
    description=(
        "A workflow run and its first node executions, as get_run returns them without a "
        "cursor, e.g. run://42 (needs the scope runs:read as well). It changes while the run "
        "goes on, so it is never to be cached."
    ),
    mime_type=MIME_TYPE,
)

# The scope reading a resource needs beyond resources:read, by the start of its URI.
_SCOPES_BY_SCHEME = {run_tools.RUN_SCHEME: run_tools.SCOPE}


def subscribable() -> set[str]:
    """The URIs a client may subscribe to: none of the catalog's (they never change), an
    extension's own (mcp_endpoint/features/extensions.py)."""
    return extensions.installed().subscribable


def templates() -> list[types.ResourceTemplate]:
    extra = extensions.installed().templates
    return [TEMPLATE, RUN_TEMPLATE, *(template for template, _ in extra)]


def read_scope(uri: str) -> str | None:
    """The scope reading `uri` needs beyond resources:read (runs:read for a run), or None."""
    return next(
        (scope for scheme, scope in _SCOPES_BY_SCHEME.items() if uri.startswith(scheme)), None
    )


class ResourceNotFound(LookupError):
    """No resource at that URI; the message says what exists."""


def list_resources() -> list[types.Resource]:
    """Every node spec as a resource, in catalog order (type, then subtype)."""
    registry = current_registry()
    resources = []
    for node_type, subtypes in registry.types.items():
        for subtype in subtypes:
            detail = registry.detail((node_type, subtype))
            resources.append(
                types.Resource(
                    uri=f"{SCHEME}{node_type}/{subtype}",
                    name=f"{node_type}/{subtype}",
                    title=detail["display_name"],
                    description=detail["description"],
                    mime_type=MIME_TYPE,
                )
            )
    extra = extensions.installed().resources
    return [*resources, *(resource for resource, _ in extra.values())]


def read(uri: str) -> types.ReadResourceResult:
    """The answer to `resources/read` of `uri`, once the caller's `read_scope(uri)` has been
    checked: a run's (never to be cached, ttlMs 0 and private: it changes while the run goes
    on, and it is not every caller's to see), or `read_resource`'s. Raises
    `ResourceNotFound`."""
    if uri.startswith(run_tools.RUN_SCHEME):
        try:
            contents = run_tools.run_contents(uri)
        except run_tools.NotARun as exc:
            raise ResourceNotFound(str(exc)) from None
        return types.ReadResourceResult(contents=contents, ttl_ms=0, cache_scope="private")
    return types.ReadResourceResult(contents=read_resource(uri))


def read_resource(uri: str) -> list[Any]:
    """The JSON of one spec (or an extra resource); raises `ResourceNotFound` otherwise.
    Runs are read by `read` alone, after their scope is checked."""
    extension = extensions.installed()
    if uri in extension.resources:
        return extension.resources[uri][1]()
    for _, reader in extension.templates:
        contents = reader(uri)
        if contents is not None:
            return contents
    if not uri.startswith(SCHEME) or uri.count("/") != 3:
        raise ResourceNotFound(
            f"No resource {uri[:100]!r}: node specs are at nodespec://NODE_TYPE/SUBTYPE, "
            "e.g. nodespec://ACTION/HTTP_REQUEST, and runs at run://ID."
        )
    node_type, subtype = uri[len(SCHEME) :].split("/")
    try:
        [detail] = knowledge.get_node_details([{"node_type": node_type, "subtype": subtype}])
    except knowledge.KnowledgeError:  # a name over the length limit
        raise ResourceNotFound(
            f"No resource {uri[:100]!r}…: a node type or subtype has at most "
            f"{knowledge.MAX_NAME_CHARACTERS} characters."
        ) from None
    if "error" in detail:
        raise ResourceNotFound(f"No resource {uri!r}. {detail['error']}")
    canonical = f"{SCHEME}{detail['node_type']}/{detail['subtype']}"
    return [types.TextResourceContents(uri=canonical, mime_type=MIME_TYPE, text=json_text(detail))]


def complete_template_argument(name: str, value: str, context: dict[str, Any]) -> list[str]:
    """Completions for the template's `node_type` and `subtype` variables."""
    registry = current_registry()
    prefix = value.upper()
    if name == "node_type":
        return [t for t in registry.types if t.startswith(prefix)]
    if name == "subtype":
        node_type = (context or {}).get("node_type", "").upper()
        pool = registry.types.get(node_type) or sorted(
            {s for ss in registry.types.values() for s in ss}
        )
        return [s for s in pool if s.startswith(prefix)]
    return []
