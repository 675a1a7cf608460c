"""The JSON-RPC errors that methods raise; the transport chooses the HTTP status."""

from typing import Any


class RpcError(Exception):
    """A JSON-RPC error: code, message and optional data."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Forbidden(RpcError):
    """The caller lacks the scope a method or tool needs (HTTP 403)."""
