"""The `Origin` rule of the MCP endpoints: which web pages may call them.

Browsers send `Origin` on cross-site requests; a page from another site must not reach the
endpoint (DNS rebinding). An origin is read strictly as the RFC 6454 serialisation, `scheme
"://" host [":" port]`, and anything else is refused: a lenient URL parser reads
`http://127.0.0.1:8765.evil.com` as host 127.0.0.1, which is how such a check is passed.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from django.conf import settings
from django.http.request import split_domain_port

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_ORIGIN = re.compile(
    r"(?P<scheme>https?)://(?P<host>[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?",
    re.ASCII,
)


class Origin(NamedTuple):
    scheme: str
    host: str  # lower case; an IPv6 address keeps its brackets
    port: int


def parse_origin(origin: str) -> Origin | None:
    """The scheme, host and port of a serialised origin, or None if it is not one.

    No path, user, query or fragment; the port is a number up to 65535; the default port of
    the scheme is filled in, so `http://a` and `http://a:80` are the same origin.
    """
    match = _ORIGIN.fullmatch(origin.lower())
    if match is None:
        return None
    scheme = match["scheme"]
    port = int(match["port"]) if match["port"] else _DEFAULT_PORTS[scheme]
    if not 0 < port <= 65535:
        return None
    return Origin(scheme, match["host"], port)


def origin_allowed(origin: str, host: str) -> bool:
    """Whether a request with this `Origin` header may reach an endpoint served at `host`.

    Passes: an origin listed in MCP_ALLOWED_ORIGINS; the same origin as the request's Host;
    a local page (localhost, 127.0.0.1, [::1] on any port) calling a local server.
    """
    if origin in settings.MCP_ALLOWED_ORIGINS:
        return True
    parsed = parse_origin(origin)
    if parsed is None:
        return False
    domain, port = split_domain_port(host)
    if not domain:
        return False
    if parsed.host == domain:
        # A Host without a port is the scheme's default port of the page's own scheme.
        request_port = int(port) if port else _DEFAULT_PORTS[parsed.scheme]
        if parsed.port == request_port:
            return True
    return parsed.host in LOCAL_HOSTS and domain in LOCAL_HOSTS
