"""What a client that follows the MCP authorization spec finds where it looks for OAuth.

Such a client (the Inspector without a key, mcp-remote without a header, fastmcp's
`auth="oauth"`, the chat apps' web connectors) answers a 401 by fetching the protected
resource metadata (RFC 9728), the authorization server metadata (RFC 8414, or OpenID
discovery), then registering (`POST /register`, RFC 7591); older ones try `/authorize` and
`/token` directly. This server does not offer OAuth (issue 30 will): each of those URLs
answers 404 with this body, which says that the server takes API keys, how to send one and
where keys come from, so that the client shows its user something to act on.
"""

from __future__ import annotations

from mcp_endpoint.access.auth import KEY_HOW

# The longest part of a request's path an answer quotes.
QUOTED_PATH_CHARACTERS = 100


def oauth_absent(path: str) -> dict[str, str]:
    """The body of the 404 at an OAuth discovery or registration URL (`path`)."""
    return {
        "error": "oauth_not_offered",
        "error_description": (
            f"No OAuth at {path[:QUOTED_PATH_CHARACTERS]}: this server does not offer OAuth; "
            f"it takes API keys. With every request, {KEY_HOW}"
        ),
    }
