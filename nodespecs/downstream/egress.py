"""The egress policy: where this service may connect for an MCP server that an agent named.

A server declared in a workflow by an agent (an API key, a user who is not a superuser) is
reached only at public addresses. Every address its host resolves to is judged, not the text
of its URL, so every spelling of an address is judged alike: `2130706433`, `0177.0.0.1`,
`0x7f.1` and `localhost` all resolve to 127.0.0.1, and an IPv6 address that carries an IPv4
one (`::ffff:127.0.0.1`, 6to4 `2002::/16`, NAT64 `64:ff9b::/96`) is judged by the IPv4 address
it reaches. Refused: loopback, unspecified, link-local, multicast, carrier-grade NAT, private
(RFC 1918, IPv6 unique-local), cloud metadata, and every other address that is not globally
routable (reserved, broadcast, documentation...). An operator exempts networks with
EGRESS_ALLOWED_NETWORKS, and may refuse plain http with EGRESS_REQUIRE_HTTPS.

The policy is enforced when each connection is made, not when a URL is checked: under an
HTTP client's `CheckedTransport`, `CheckedNetworkBackend` resolves the host, judges every
address, and connects to an address it judged (the Host header and TLS SNI still name the
host), so a DNS answer that changes between a check and the connection (rebinding) cannot
bring it elsewhere, and a redirect or a reconnection is judged like the first connection. A
refused address fails before any packet is sent to it. `url_refusals` is the same judgement
for validation, ahead of any connection.

Used by `nodespecs.downstream.transports` (connections whose `Connection.egress_checked` is set),
`nodespecs.downstream.errors` (what a refusal says) and `graphs.authoring.validation`.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore2
import httpx2
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_SETTING = "EGRESS_ALLOWED_NETWORKS"
HTTPS_SETTING = "EGRESS_REQUIRE_HTTPS"

# The cloud providers' instance metadata services, which hand out credentials: named on their
# own so that the refusal says what the address is. Most are link-local or carrier-grade NAT
# anyway; Azure's WireServer is a public address.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS DNS
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer
        "fd00:ec2::254",  # AWS, over IPv6
        "fd00:ec2::253",  # AWS DNS, over IPv6
        "fd20:ce::254",  # GCP, over IPv6
    )
)
_CARRIER_GRADE_NAT = ipaddress.ip_network("100.64.0.0/10")
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # Linux reaches this host at 0.x.y.z
_PRIVATE = tuple(
    ipaddress.ip_network(network)
    for network in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# How long validation waits for DNS: it answers an agent, who should not wait on a slow
# resolver; an address not known in time is judged when the connection is made.
VALIDATION_DNS_SECONDS = 2.0


@dataclass(frozen=True)
class EgressPolicy:
    """The operator's exemptions: networks that may be reached whatever their class, and
    whether plain http is refused."""

    allowed_networks: tuple[IPNetwork, ...] = ()
    require_https: bool = False

    @classmethod
    def from_settings(cls) -> EgressPolicy:
        """The policy as EGRESS_ALLOWED_NETWORKS and EGRESS_REQUIRE_HTTPS set it."""
        return cls(
            allowed_networks=tuple(
                ipaddress.ip_network(network, strict=False)
                for network in settings.EGRESS_ALLOWED_NETWORKS
            ),
            require_https=settings.EGRESS_REQUIRE_HTTPS,
        )

    def allows(self, address: IPAddress) -> bool:
        """Whether an allowed network holds the address, or the IPv4 address it carries."""
        return any(
            candidate in network
            for candidate in {address, _carried(address)}
            for network in self.allowed_networks
            if candidate.version == network.version
        )


class EgressRefused(Exception):
    """A connection the egress policy refuses: `host` as the URL names it, `address_class`
    (e.g. "a loopback address"), and `setting`, the one that would allow it. The message says
    all three; `address`, the resolved address, is for the server's log only (an internal
    name's address is not the agent's to learn)."""

    def __init__(
        self, host: str, address_class: str, setting: str, address: IPAddress | None = None
    ) -> None:
        self.host = host
        self.address_class = address_class
        self.setting = setting
        self.address = address
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        """Why, and how to allow it, in a clause."""
        if self.setting == HTTPS_SETTING:
            return (
                f"plain http to {self.host} is refused while {HTTPS_SETTING} is on; use an "
                "https:// URL"
            )
        return (
            f"{self.host} is {self.address_class}; a server named in a workflow is reached "
            "only at a public address: use one, or ask an operator to register the server as "
            f"a provider or to add its network to {self.setting}"
        )

    def for_log(self) -> str:
        """The refusal with the address the host resolved to, for operators."""
        at = f" (resolved to {self.address})" if self.address is not None else ""
        return f"{self.reason}{at}"


def _carried(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address reaches (IPv4-mapped, 6to4, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def address_class(address: IPAddress) -> str | None:
    """What makes an address refused ("a loopback address"...), or None for a public one.
    An IPv6 address carrying an IPv4 one is judged by the IPv4 address."""
    if address in METADATA_ADDRESSES or _carried(address) in METADATA_ADDRESSES:
        return "a cloud metadata address"
    address = _carried(address)
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified or address in _THIS_NETWORK:
        return "an unspecified address (this host)"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address in _CARRIER_GRADE_NAT:
        return "a carrier-grade NAT address"
    if any(address in network for network in _PRIVATE if network.version == address.version):
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved address (not publicly routable)"
    return None


def check_address(host: str, address: IPAddress, policy: EgressPolicy) -> None:
    """Raise EgressRefused when the policy refuses to connect to `address` (which `host`
    resolved to)."""
    refused = address_class(address)
    if refused is not None and not policy.allows(address):
        raise EgressRefused(host, refused, ALLOW_SETTING, address)


def check_scheme(host: str, scheme: str, policy: EgressPolicy) -> None:
    """Raise EgressRefused for plain http while EGRESS_REQUIRE_HTTPS is on."""
    if policy.require_https and scheme.lower() != "https":
        raise EgressRefused(host, "plain http", HTTPS_SETTING)


def _literal(host: str) -> IPAddress | None:
    """The host as an IP address in its standard spelling, or None (a name, or another
    spelling, which the resolver reads)."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _addresses(infos: Iterable[tuple[Any, ...]]) -> list[IPAddress]:
    """The distinct addresses of getaddrinfo's answer, in its order."""
    found: dict[IPAddress, None] = {}
    for *_, sockaddr in infos:
        found.setdefault(ipaddress.ip_address(sockaddr[0]), None)
    return list(found)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to (blocking; raises OSError when it does not)."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    return _addresses(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))


async def resolve_async(host: str, port: int) -> list[IPAddress]:
    """`resolve`, without blocking the event loop."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    return _addresses(await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM))


def judge(host: str, addresses: Sequence[IPAddress], policy: EgressPolicy) -> None:
    """Raise EgressRefused when any of the addresses `host` resolved to is refused: a name
    resolving to one public and one internal address could be connected to either."""
    for address in addresses:
        check_address(host, address, policy)


# DNS lookups for validation, on threads of their own: getaddrinfo cannot be interrupted, so
# a slow one is left to finish while validation answers without it.
_resolver = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="egress-dns")


def _split(url: str) -> tuple[str, str, int]:
    """The scheme, host and port of `url` ("" for a host when it has none)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:  # a port out of range: the URL's own check says so
        return scheme, "", 0
    return scheme, parts.hostname or "", port


def url_refusals(
    urls: Mapping[str, str],
    policy: EgressPolicy | None = None,
    *,
    timeout: float = VALIDATION_DNS_SECONDS,
) -> dict[str, EgressRefused]:
    """The refusal the policy would give a connection to each of `urls` (by name), for those
    it would refuse. Their hosts are resolved together within `timeout`; one that does not
    resolve in time, or at all, is left out: each connection is judged again when made."""
    policy = policy or EgressPolicy.from_settings()
    refusals: dict[str, EgressRefused] = {}
    lookups: dict[concurrent.futures.Future[list[IPAddress]], tuple[str, str]] = {}
    for name, url in urls.items():
        scheme, host, port = _split(url)
        if not host:
            continue
        try:
            check_scheme(host, scheme, policy)
        except EgressRefused as refusal:
            refusals[name] = refusal
            continue
        lookups[_resolver.submit(resolve, host, port)] = (name, host)
    done, late = concurrent.futures.wait(lookups, timeout)
    for future in late:
        future.cancel()
    for future in done:
        name, host = lookups[future]
        try:
            judge(host, future.result(), policy)
        except EgressRefused as refusal:
            refusals[name] = refusal
        except (OSError, UnicodeError, ValueError):
            pass  # does not resolve: the connection will say it is unreachable
    return refusals


def url_refusal(
    url: str, policy: EgressPolicy | None = None, *, timeout: float = VALIDATION_DNS_SECONDS
) -> EgressRefused | None:
    """The refusal the policy would give a connection to `url`, or None (`url_refusals`)."""
    return url_refusals({url: url}, policy, timeout=timeout).get(url)


class CheckedNetworkBackend(httpcore2.AsyncNetworkBackend):
    """An httpcore network backend that connects only where the policy allows: it resolves
    the host, judges every address, then connects to the judged addresses themselves, the
    first that answers. A refusal raises EgressRefused before any packet is sent;
    `on_refused` hears of it first (the SDK's transports may log the exception and go on
    without it). `timeout` bounds the resolution and the connection together."""

    def __init__(
        self,
        policy: EgressPolicy,
        on_refused: Callable[[EgressRefused], None] | None = None,
    ) -> None:
        self._policy = policy
        self._on_refused = on_refused
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Resolve, judge, and connect to a judged address."""
        try:
            with anyio.fail_after(timeout):
                try:
                    addresses = await resolve_async(host, port)
                except OSError as exc:
                    raise httpcore2.ConnectError(f"{host} does not resolve: {exc}") from exc
                try:
                    judge(host, addresses, self._policy)
                except EgressRefused as refusal:
                    if self._on_refused is not None:
                        self._on_refused(refusal)
                    raise
                return await self._connect_first(addresses, port, local_address, socket_options)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"connecting to {host} took over {timeout} s") from None

    async def _connect_first(
        self,
        addresses: Sequence[IPAddress],
        port: int,
        local_address: str | None,
        socket_options: Iterable[Any] | None,
    ) -> httpcore2.AsyncNetworkStream:
        failure: Exception = httpcore2.ConnectError("no address to connect to")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        """Never: a checked connection goes to a network address."""
        raise EgressRefused(path, "a Unix socket", ALLOW_SETTING)

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


class CheckedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's own transport, each of whose connections goes through
    `CheckedNetworkBackend`, and which refuses plain http while EGRESS_REQUIRE_HTTPS is on
    (every request, so a redirect too). Given to a client as its `transport`, it also keeps
    proxies from the environment out: through a proxy, the address judged would be the
    proxy's."""

    def __init__(
        self, policy: EgressPolicy, on_refused: Callable[[EgressRefused], None] | None = None
    ) -> None:
        super().__init__()
        self._policy = policy
        self._on_refused = on_refused
        pool = self._pool
        # httpx2 takes no network backend; its pool hands its own to each connection it
        # makes. Checked, so that a renamed attribute fails here rather than connecting
        # unchecked.
        if not isinstance(pool, httpcore2.AsyncConnectionPool) or not hasattr(
            pool, "_network_backend"
        ):
            raise RuntimeError(
                "The egress policy cannot be applied: this httpx2/httpcore2 version builds its "
                "connections differently (nodespecs/downstream/egress.py's CheckedTransport needs "
                "updating)."
            )
        pool._network_backend = CheckedNetworkBackend(policy, on_refused)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send `request`, unless the policy refuses its scheme."""
        try:
            check_scheme(request.url.host, request.url.scheme, self._policy)
        except EgressRefused as refusal:
            if self._on_refused is not None:
                self._on_refused(refusal)
            raise
        return await super().handle_async_request(request)
