"""Local servers that are not MCP servers, for the tests of what a client says of them: one that
accepts connections and never answers, and an HTTP server that answers every request with a
web page, JSON that is not JSON-RPC, or a 401. All on 127.0.0.1, each on a free port, in a thread
of the test process.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.peers import free_port

# Path → (status, content type, body) of what `web_server` answers.
_PAGES = {
    "/html": (
        200,
        "text/html",
        b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>",
    ),
    "/json": (200, "application/json", b'{"status": "ok", "items": [1, 2, 3]}'),
    "/locked": (401, "text/plain", b"Unauthorized"),
}


@contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte; yields
    its port. What a wedged server looks like to a client."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            accepted.append(connection)

    threading.Thread(target=accept, name="silent-server", daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for connection in accepted:
            connection.close()


class _Pages(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        status, content_type, body = _PAGES.get(self.path.split("?")[0], _PAGES["/html"])
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass  # the test's output is not the place for an access log


@contextmanager
def web_server() -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that is no MCP server; yields its base URL. At /json it
    answers JSON that is not JSON-RPC, at /locked 401, and anywhere else an HTML page."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, name="web-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (free a moment ago)."""
    return free_port()
