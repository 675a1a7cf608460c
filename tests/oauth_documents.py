"""Client ID Metadata Documents served over real HTTPS from a thread on 127.0.0.1, with a
certificate from a throwaway CA: what the unit tests of the fetch (tests/mcp_endpoint) and the
end-to-end test of an SDK signing in with a document (tests/e2e) both serve from.

Whoever fetches must trust the CA, `DocumentServer.ca`, through SSL_CERT_FILE
(ssl.create_default_context() reads the file it names each time it is called), and be allowed
to reach loopback (EGRESS_ALLOWED_NETWORKS), as an operator would open a private network.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.mcp_endpoint.oauth_helpers import REDIRECT

# A throwaway certificate authority and a certificate for 127.0.0.1 and localhost.


def _certificates(directory: Path) -> tuple[Path, Path]:
    """Write a CA certificate and a server certificate (with its key) signed by it; their
    paths."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Switchyard test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, server_path = directory / "ca.pem", directory / "server.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    server_path.write_bytes(
        server.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca_path, server_path


# The server of the documents.


@dataclass
class Answer:
    """What the server answers at a path: `wait` seconds before answering, and `drip` seconds
    before each byte of the headers (when `drip_headers`) or of the body."""

    body: bytes
    content_type: str = "application/json"
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    wait: float = 0.0
    drip: float = 0.0
    drip_headers: bool = False


class DocumentServer(ThreadingHTTPServer):
    """HTTPS on 127.0.0.1 with a certificate that `ca` signed: `answers` by path, and `hits`,
    the requests each path had."""

    daemon_threads = True

    def __init__(self, ca: Path, certificate: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate)
        # The handshake in each request's thread, not in the one accepting connections.
        self.socket = context.wrap_socket(
            self.socket, server_side=True, do_handshake_on_connect=False
        )
        self.ca = ca
        self.answers: dict[str, Answer] = {}
        self.hits: Counter[str] = Counter()
        self.stopping = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the fetch's deadline, an untrusted certificate)

    @property
    def origin(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"

    def serve(self, path: str, answer: Answer) -> str:
        """Answer `answer` at `path`; its URL."""
        self.answers[path] = answer
        return self.origin + path

    def document(self, path: str, **fields: Any) -> str:
        """Serve a valid client metadata document at `path` (with `fields` changed); its URL."""
        url = self.origin + path
        document = {
            "client_id": url,
            "client_name": "Document client",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            **fields,
        }
        return self.serve(path, Answer(json.dumps(document).encode()))


class _Handler(BaseHTTPRequestHandler):
    server: DocumentServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits[self.path] += 1
        answer = self.server.answers.get(
            self.path, Answer(b'{"error": "no such path"}', status=404)
        )
        if self.server.stopping.wait(answer.wait):
            return
        head = [f"HTTP/1.1 {answer.status} Answer\r\n", f"Content-Type: {answer.content_type}\r\n"]
        head += [f"{name}: {value}\r\n" for name, value in answer.headers]
        head += [f"Content-Length: {len(answer.body)}\r\n", "Connection: close\r\n", "\r\n"]
        self._send("".join(head).encode(), answer.drip if answer.drip_headers else 0)
        self._send(answer.body, 0 if answer.drip_headers else answer.drip)

    def _send(self, data: bytes, drip: float) -> None:
        if not drip:
            self.wfile.write(data)
            return
        for byte in data:
            if self.server.stopping.wait(drip):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()


@contextmanager
def serving_documents(directory: Path) -> Iterator[DocumentServer]:
    """The document server on a thread of its own, its CA and certificate written in
    `directory`; stopped afterwards, a slow answer cut short."""
    server = DocumentServer(*_certificates(directory))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
