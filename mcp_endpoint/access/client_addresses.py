"""The client addresses that allow-lists grant by: `/metrics` without a key
(METRICS_ALLOWED_ADDRESSES) and the REST internal endpoints (MCP_INTERNAL_NETWORKS).

Under uvicorn, the address a request arrives with is not always its peer's: from a peer it
trusts with proxy headers (`--forwarded-allow-ips`, which defaults to the variable
FORWARDED_ALLOW_IPS and, without it, to 127.0.0.1), uvicorn takes the client's address from
the `X-Forwarded-For` header. Started without the flag and without a proxy in front, anyone
who reaches it through the host itself writes the address they are granted as. So an
allow-list reads an address only where it cannot come from that header: when the request
carries none, or when the operator named the proxies that write it (FORWARDED_ALLOW_IPS, the
variable uvicorn reads as well; docs/operations.md, "Behind a proxy"). A request that
carries the header with no proxy named matches no allow-list: it must show a key.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from functools import lru_cache

from django.conf import settings

# The header uvicorn's proxy support reads the client's address from.
FORWARDED_FOR = "x-forwarded-for"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(addresses: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(address, strict=False) for address in addresses)


def address_readable(headers: Mapping[str, str]) -> bool:
    """Whether the address of a request with these headers (names in lower case, or a
    case-insensitive mapping) is its peer's or a proxy's the operator named, never one its
    sender wrote."""
    return bool(settings.FORWARDED_ALLOW_IPS) or FORWARDED_FOR not in headers


def allow_listed(address: str, headers: Mapping[str, str], networks: Sequence[str]) -> bool:
    """Whether a request from `address` with these headers is in one of `networks`
    (addresses or CIDR networks), its address read only as `address_readable` allows."""
    if not networks or not address_readable(headers):
        return False
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(client in network for network in _networks(tuple(networks)))
