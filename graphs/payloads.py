"""What of a run's data may be stored in its history: secrets masked, size capped.

History is read by reviewers, so values under keys that name a secret (`password`,
`api_key`, `authorization`, ...) are replaced before they are stored, and a payload larger
than `GRAPHS_MAX_PAYLOAD_BYTES` is stored as a marked preview instead of silently dropped.
"""

from __future__ import annotations

import json
from typing import Any

MASK = "********"
TRUNCATED_KEY = "_truncated"
_SECRET_NAMES = {
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "private_key",
    "client_secret",
    "access_token",
    "refresh_token",
    "cookie",
}
_SECRET_SUFFIXES = ("_password", "_secret", "_token", "_api_key", "_apikey")


def is_secret_name(name: str) -> bool:
    """Whether a key names a secret (`api_key`, `X-Api-Key`, `db_password`, ...)."""
    normal = name.lower().replace("-", "_")
    if normal.startswith("x_"):
        normal = normal[2:]
    return normal in _SECRET_NAMES or normal.endswith(_SECRET_SUFFIXES)


def mask_secrets(value: Any) -> Any:
    """A copy of a JSON value with the values of secret-named keys masked, at any depth."""
    if isinstance(value, dict):
        return {
            key: MASK if is_secret_name(str(key)) and item else mask_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [mask_secrets(item) for item in value]
    return value


def encoded(value: Any, max_bytes: int) -> tuple[str, bool]:
    """A payload as the JSON text to store, and whether it had to be truncated.

    A payload over `max_bytes` of JSON becomes `{"_truncated": true, "bytes": N, "preview":
    "<the first max_bytes characters of its JSON>"}`.
    """
    text = json.dumps(mask_secrets(value), ensure_ascii=False, default=str)
    if len(text) <= max_bytes:
        return text, False
    preview = {TRUNCATED_KEY: True, "bytes": len(text.encode()), "preview": text[:max_bytes]}
    return json.dumps(preview, ensure_ascii=False), True


def storable(value: Any, max_bytes: int) -> tuple[Any, bool]:
    """`encoded`, as the value a JSONField takes."""
    text, truncated = encoded(value, max_bytes)
    return json.loads(text), truncated
