"""Witnesses for the hostile-caller tests: a listener on 127.0.0.1 that records every
connection it is offered (the attacker's server, an internal service, a schema URL), and the
rows of a live server's own database, to show that nothing was reached or stored."""

from __future__ import annotations

import socket
import sqlite3
import struct
import threading
from typing import Any
from urllib.parse import urlsplit


class Listener:
    """A TCP listener that records each connection it is offered and closes it at once, so a
    server that did connect fails fast rather than hangs; with `reset`, it resets each one
    instead (a port that is open but speaks no HTTP). Use it as a context manager, or call
    `close`."""

    def __init__(self, host: str = "127.0.0.1", *, reset: bool = False) -> None:
        self.reset = reset
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.host = host
        self.port: int = self.sock.getsockname()[1]
        # "address:port" of each connection accepted, in order.
        self.connections: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        """An http URL on the listener."""
        return f"http://{self.host}:{self.port}/x.json"

    def _accept(self) -> None:
        while True:
            try:
                accepted, address = self.sock.accept()
            except OSError:
                return
            self.connections.append(f"{address[0]}:{address[1]}")
            if self.reset:  # linger 0: close sends RST, not FIN
                accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            accepted.close()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def database_rows(server: Any, sql: str) -> list[tuple[Any, ...]]:
    """The rows `sql` reads from a live server's own database (SQLite or PostgreSQL), named
    by the server's `env["DATABASE_URL"]` (tests/e2e/conftest.py `LiveServer`)."""
    database_url = server.env["DATABASE_URL"]
    if database_url.startswith("sqlite"):
        with sqlite3.connect(urlsplit(database_url).path) as connection:
            return connection.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(database_url) as connection:
        return connection.execute(sql).fetchall()
