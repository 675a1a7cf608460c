"""Client ID Metadata Documents: the client metadata this service fetches from a client's
HTTPS `client_id`, under this service's egress rule, and what a person is told when it is
refused.

django-oauth-toolkit resolves a URL `client_id` (`oauth2_provider.cimd`): it fetches the
document with the fetcher named by OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"], checks it, keeps
it as an Application until its max age, and backs off a URL that failed. Its own fetcher
judges addresses by a rule of its own, with no seam for an operator's exemptions, and bounds
each socket operation rather than the whole fetch, so a server that drips its answer a byte at
a time holds the request far past CIMD_FETCH_TIMEOUT_SECONDS. `ClientDocumentFetcher` keeps
the toolkit's parts for the URL and the document (the checks of `_validate_client_id_url`,
`_read_document` and `_build_application_kwargs`) and replaces the connection:

- every address the host resolves to must be public, or inside EGRESS_ALLOWED_NETWORKS (the
  operator's explicit allow, the same rule as for the MCP servers agents name:
  `nodespecs.downstream.egress`); the host is resolved once and the connection goes to an
  address judged, while TLS (SNI, certificate) still names the host, so DNS rebinding cannot
  bring it elsewhere;
- HTTPS always, no redirect followed, no proxy from the environment;
- one deadline, CIMD_FETCH_TIMEOUT_SECONDS, for connecting, the TLS handshake, the headers and
  the body together: at the deadline the socket is shut down, whatever it waits for.

The toolkit answers a refused document as an unknown client_id, without the reason. The
consent page says why (`explain_document_refusal`), from the reason the fetcher keeps in the
cache for a while: the client's maker needs it to fix the document. It tells whoever opens the
page little they could not learn by fetching the URL themselves: the class of address a host
resolves to here, never the address (that goes to the log); a status, a media type, a
certificate error; at most a few values the document holds, quoted by the toolkit's checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import socket
import ssl
import threading
import time
from typing import Any

from django.core.cache import cache
from oauth2_provider.cimd import (
    CIMDError,
    SafeMetadataFetcher,
    _build_application_kwargs,
    _validate_client_id_url,
    is_cimd_client_id,
)
from oauth2_provider.models import Application
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749.errors import (
    InvalidClientIdError,
    MismatchingRedirectURIError,
    OAuth2Error,
)

from mcp_endpoint.oauth.validator import redirect_uri_problem
from nodespecs.downstream.egress import EgressPolicy, EgressRefused, IPAddress, judge, resolve

log = logging.getLogger(__name__)

ACCEPT = "application/json, application/*+json"
# Why a document was refused, by a digest of its URL (a client_id may be longer than a cache
# key may be), kept a minute longer than the toolkit's backoff: while the toolkit refuses the
# URL without fetching it again, the page can still say why.
REFUSAL_KEY_PREFIX = "switchyard:cimd:refusal:"
REFUSAL_MARGIN_SECONDS = 60
# The longest reason shown (toolkit reasons quote values from the document).
REFUSAL_MAX_CHARACTERS = 300


class ClientDocumentFetcher(SafeMetadataFetcher):
    """The toolkit's fetcher (`oauth2_provider.cimd.SafeMetadataFetcher`) with this service's
    egress rule and one deadline for the whole fetch (module docstring)."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        """The document at `client_id` and how long it may be kept (seconds); CIMDError,
        whose reason is kept for `explain_document_refusal`, when it may not be used."""
        try:
            document, max_age = self._fetch(client_id)
            _check_document(client_id, document)
        except CIMDError as refusal:
            cache.set(
                _refusal_key(client_id),
                str(refusal)[:REFUSAL_MAX_CHARACTERS],
                oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS + REFUSAL_MARGIN_SECONDS,
            )
            raise
        cache.delete(_refusal_key(client_id))
        return document, max_age

    def _fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        parsed = _validate_client_id_url(client_id)  # https, a host, a path, nothing odd
        host: str = parsed.hostname
        port = parsed.port or 443
        seconds = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        deadline = time.monotonic() + seconds
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        failure: Exception | None = None
        for address in _allowed_addresses(host, port):
            if time.monotonic() >= deadline:
                break
            connection = PinnedConnection(str(address), port, host, deadline)
            try:
                connection.request("GET", path, headers={"Host": parsed.netloc, "Accept": ACCEPT})
                document: tuple[dict[str, Any], int] = self._read_document(connection.getresponse())
            except (OSError, http.client.HTTPException) as error:
                failure = error  # this address failed: the next one, while time is left
            except CIMDError:
                if not connection.expired:  # else it is the deadline's cut that it tells of
                    raise
            else:
                if not connection.expired:
                    return document
            finally:
                connection.release()
        if failure is None or time.monotonic() >= deadline:
            raise CIMDError(
                f"it was not fetched within {seconds} s (CIMD_FETCH_TIMEOUT_SECONDS)"
            ) from failure
        if isinstance(failure, ssl.SSLCertVerificationError):
            raise CIMDError(f"its TLS certificate for {host} was not accepted ({failure})")
        raise CIMDError(f"{host} could not be reached ({failure})")


class PinnedConnection(http.client.HTTPSConnection):
    """HTTPS to the judged `address`, whose certificate must be valid for `hostname` (sent as
    SNI too). From the connection to `deadline` (a `time.monotonic()` time) a watchdog waits;
    at the deadline it shuts the socket down, whatever the connection waits for, and sets
    `expired`. `release` closes the connection and stops the watchdog."""

    def __init__(self, address: str, port: int, hostname: str, deadline: float) -> None:
        super().__init__(address, port, timeout=max(deadline - time.monotonic(), 0.001))
        self.hostname = hostname
        self.deadline = deadline
        self.expired = False
        # Kept apart from `sock`, which http.client drops once a response takes the socket over.
        self._tls: ssl.SSLSocket | None = None
        self._watchdog: threading.Timer | None = None

    def connect(self) -> None:
        """Connect (within the time left), then start the watchdog before the TLS handshake,
        the first step a server can drip."""
        raw = socket.create_connection((self.host, self.port), self.timeout)
        # ssl.create_default_context(): the system's CAs, or the file SSL_CERT_FILE names.
        self.sock = self._tls = ssl.create_default_context().wrap_socket(
            raw, server_hostname=self.hostname, do_handshake_on_connect=False
        )
        self._watchdog = threading.Timer(max(self.deadline - time.monotonic(), 0), self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()
        self._tls.do_handshake()

    def _expire(self) -> None:
        self.expired = True
        if self._tls is not None:
            # The socket's own shutdown, under the TLS layer: a read blocked in the fetching
            # thread wakes to the end of the stream.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(self._tls, socket.SHUT_RDWR)

    def release(self) -> None:
        """Close the connection and stop the watchdog."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        self.close()


def _allowed_addresses(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, when this service's egress rule allows them all (a
    name resolving to one public and one internal address could be connected to either)."""
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as error:
        raise CIMDError(f"{host} does not resolve ({error})") from error
    try:
        judge(host, addresses, EgressPolicy.from_settings())
    except EgressRefused as refusal:
        log.info("Client metadata document host %s resolved to %s", host, refusal.address)
        raise CIMDError(
            f"{host} is {refusal.address_class}, and documents are fetched from public "
            f"addresses only (an operator may allow a network with {refusal.setting})"
        ) from refusal
    return addresses


def _check_document(client_id: str, document: dict[str, Any]) -> None:
    """The toolkit's checks of a fetched document, made here too so that a refusal's reason
    is kept for the page: it names its own URL, and its metadata make a public client."""
    named = document.get("client_id")
    if named != client_id:
        raise CIMDError(
            f"the document names {str(named)[:100]!r} as its client_id: it must be its own URL"
        )
    _build_application_kwargs(document)


def _refusal_key(client_id: str) -> str:
    return REFUSAL_KEY_PREFIX + hashlib.sha256(client_id.encode()).hexdigest()


def requirements() -> str:
    """What a client metadata document must be, with the settings that bound it."""
    return (
        "A client metadata document must be served over HTTPS from a public address, without "
        f"redirects, as application/json of at most {oauth2_settings.CIMD_MAX_DOCUMENT_SIZE} "
        "bytes (CIMD_MAX_DOCUMENT_SIZE) within "
        f"{oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS} s (CIMD_FETCH_TIMEOUT_SECONDS), and name "
        "its own URL as client_id and list the redirect_uris the client uses."
    )


def refused_document_description(client_id: str) -> str | None:
    """Why no client could be made of the URL `client_id`, for the person signing in, or None
    when `client_id` is no URL."""
    if not client_id[:8].lower().startswith(("https://", "http://")):
        return None
    if not oauth2_settings.CIMD_ENABLED:
        return (
            f"No client is registered as {client_id}, and Client ID Metadata Documents are "
            "turned off here (OAUTH_CLIENT_METADATA_DOCUMENTS): the client must register."
        )
    if not is_cimd_client_id(client_id):
        return (
            f"The client_id {client_id} is a plain HTTP URL: a client metadata document is "
            "fetched over HTTPS only, so the client must use an https:// URL."
        )
    reason = cache.get(_refusal_key(client_id)) or (
        "it could not be fetched or used, or is still refused after an earlier failure "
        f"(for {oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS} s; the server's log says why)"
    )
    return f"The client's metadata document at {client_id} was refused: {reason}. " + (
        requirements()
    )


def explain_document_refusal(error: OAuth2Error) -> None:
    """Give `error`, shown to the person on the consent page, a description that says why, when
    it refuses a URL client_id (its document) or a redirect_uri its document does not list."""
    client_id = error.client_id or ""
    if isinstance(error, InvalidClientIdError):
        description = refused_document_description(client_id)
        if description is not None:
            error.description = description
    elif isinstance(error, MismatchingRedirectURIError) and is_cimd_client_id(client_id):
        uri = error.redirect_uri or ""
        listed = (
            Application.objects.filter(client_id=client_id)
            .values_list("redirect_uris", flat=True)
            .first()
        )
        if listed is not None and uri in listed.split():
            error.description = redirect_uri_problem(uri) or error.description
        elif listed is not None:
            error.description = (
                f"The redirect_uri {uri[:200]!r} is not one of the redirect_uris of the client's "
                f"metadata document at {client_id}: the client must use one it lists."
            )
