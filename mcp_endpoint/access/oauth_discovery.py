"""What a client that follows the MCP authorization spec finds where it looks for OAuth.

Such a client (the Inspector without a key, mcp-remote without a header, fastmcp's
`auth="oauth"`, the chat apps' web connectors) answers a 401 by fetching the protected
resource metadata its challenge names (RFC 9728), then the authorization server's metadata
(RFC 8414), then registers and signs its user in.

Each MCP endpoint is a protected resource of its own, named by its URL: `/mcp`, a workflow
group's `/mcp/<slug>`, the legacy transport's `/sse` (whose `/messages` belongs to it). A
token is bound to one of them (RFC 8707): one asked for `/mcp/a` is refused at `/mcp/b`.

With OAuth turned off (OAUTH_ENABLED), every one of those URLs answers 404 with
`oauth_absent`, which says that the server takes API keys, how to send one and where keys
come from, so that the client shows its user something to act on.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from mcp_endpoint.access.challenges import KEY_HOW
from mcp_endpoint.access.oauth_scopes import BASIC_SCOPES
from mcp_endpoint.models import Scope

# The longest part of a request's path an answer quotes.
QUOTED_PATH_CHARACTERS = 100
PROTECTED_RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"
# The legacy HTTP+SSE transport: one resource, its stream and the endpoint its messages go to.
SSE_RESOURCE_PATH = "/sse"
LEGACY_MESSAGES_PATH = "/messages"
MCP_PATH = "/mcp"
# What a 401 asks a client to request, in the challenge's `scope` (the MCP spec's scope
# selection takes it before scopes_supported).
CHALLENGE_SCOPE = " ".join(BASIC_SCOPES)


def resource_path(path: str) -> str | None:
    """The path of the protected resource a request to `path` is for: `/mcp`, `/mcp/<slug>`
    or `/sse` (for `/messages` too); None for any other path."""
    if path == LEGACY_MESSAGES_PATH:
        return SSE_RESOURCE_PATH
    if path in (MCP_PATH, SSE_RESOURCE_PATH):
        return path
    slug = path.removeprefix(MCP_PATH + "/")
    if slug != path and slug and "/" not in slug:
        return path
    return None


def origin_of(scheme: str, host: str) -> str:
    """The origin a request reached, as resource and issuer URLs begin: scheme and host in
    lower case (RFC 3986, 6.2.2.1), the port kept as sent."""
    return f"{scheme.lower()}://{host.lower()}"


def resource_url(origin: str, path: str) -> str | None:
    """The URL naming the protected resource a request to `path` at `origin` is for, or None
    when `path` is not an MCP endpoint."""
    found = resource_path(path)
    return None if found is None else origin + found


def resource_metadata_url(resource: str) -> str:
    """Where the metadata of `resource` is published: the well-known URL with the resource's
    path as its suffix (RFC 9728, 3.1)."""
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{PROTECTED_RESOURCE_WELL_KNOWN}{parts.path}"


def authorization_server(origin: str) -> str:
    """The issuer of the tokens this service takes: the external one an operator named
    (OAUTH_EXTERNAL_ISSUER), or this service itself at `origin`."""
    return settings.OAUTH_EXTERNAL_ISSUER or origin


def protected_resource_metadata(resource: str, authorization_server: str) -> dict[str, Any]:
    """The RFC 9728 document of `resource`, whose tokens `authorization_server` issues."""
    return {
        "resource": resource,
        "authorization_servers": [authorization_server],
        "scopes_supported": list(Scope.values),
        "bearer_methods_supported": ["header"],
        "resource_name": "Switchyard",
    }


def oauth_absent(path: str) -> dict[str, str]:
    """The body of the 404 at an OAuth discovery or registration URL (`path`): while OAuth is
    turned off, that the server takes API keys; while it is on, where its metadata is."""
    if settings.OAUTH_ENABLED:
        return {
            "error": "not_found",
            "error_description": (
                f"Nothing at {path[:QUOTED_PATH_CHARACTERS]}. This server's OAuth metadata is "
                "at /.well-known/oauth-authorization-server (RFC 8414), each MCP endpoint's at "
                "/.well-known/oauth-protected-resource/<its path> (RFC 9728); it offers no "
                "OpenID Connect."
            ),
        }
    return {
        "error": "oauth_not_offered",
        "error_description": (
            f"No OAuth at {path[:QUOTED_PATH_CHARACTERS]}: this server does not offer OAuth; "
            f"it takes API keys. With every request, {KEY_HOW}"
        ),
    }
