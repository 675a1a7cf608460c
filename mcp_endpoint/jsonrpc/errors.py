"""The JSON-RPC errors that methods raise; the transport chooses the HTTP status."""

import logging
import sys
from typing import Any

from django.db import InterfaceError, OperationalError

logger = logging.getLogger(__name__)


class RpcError(Exception):
    """A JSON-RPC error: code, message and optional data."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def message_for(self, request_id: Any) -> dict[str, Any]:
        """The JSON-RPC error response to the request `request_id`."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": request_id, "error": error}


class Forbidden(RpcError):
    """The caller lacks `scope`, which a method or tool needs (HTTP 403, with a challenge
    naming the scope where the transport is HTTP)."""

    def __init__(self, code: int, message: str, *, scope: str):
        super().__init__(code, message)
        self.scope = scope


# What a database or cache that does not answer raises (down, restarting, a lock held too
# long): the same request may well succeed a moment later, so the transports answer it 503
# with Retry-After, as a client can act on, rather than as a fault of the server's code.
_DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
RETRY_AFTER_SECONDS = 5


def unavailable_errors() -> tuple[type[Exception], ...]:
    """The exceptions of a database or cache that did not answer: Redis's only once redis-py
    is loaded. It is loaded only with REDIS_URL set, as importing it loads the OpenTelemetry
    SDK, which a server with tracing off must not."""
    redis = sys.modules.get("redis")
    if redis is None:
        return _DATABASE_UNAVAILABLE
    return (*_DATABASE_UNAVAILABLE, redis.ConnectionError, redis.TimeoutError)


def unavailable_message(exc: Exception) -> str:
    """What a caller is told when a request met one of `unavailable_errors()`; logs it."""
    logger.error("Answered 503: %s: %s", type(exc).__name__, exc)
    return (
        "Service Unavailable: this server's database or cache did not answer. Retry in "
        f"{RETRY_AFTER_SECONDS} seconds; if it goes on, tell the server's operator."
    )
