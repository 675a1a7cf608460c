"""The JSON of the endpoint's messages, encoded by orjson.

Encoding a tool's answer was the largest single cost of a knowledge call (a `get_node_details`
answer is encoded twice: as the text content, then within the response); orjson does it
several times faster than the standard library (docs/benchmarks.md). What orjson refuses (a
lone surrogate echoed from a caller's input, an integer beyond 64 bits, a key that is not a
string) is encoded by the standard library instead, with ASCII escapes, so any message that
could be sent before still can.

Messages framed by lines (server-sent events, stdio) are sent as ASCII (`encode_json_ascii`):
raw UTF-8 is valid JSON, but a reader that splits lines on Unicode's separators too (U+2028,
U+0085, as Python's `str.splitlines` does) would cut a message holding one.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# What json.dumps(value, separators=(",", ":")) builds, without re-creating it on every call.
_FALLBACK = json.JSONEncoder(separators=(",", ":"))
# orjson reads an integer beyond 64 bits as a float; such an integer has 19 digits or more, so
# a body with a run of 19 digits (each digit turned to a 0 to find one) is read by the
# standard library, which keeps it exact.
_DIGITS_AS_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGIT_RUN = b"0" * 19


def decode_json(body: bytes) -> Any:
    """A message's JSON read: by orjson (a `tools/call` body in a quarter of the standard
    library's time), or, for what orjson would read otherwise or refuses (a long integer,
    `NaN`, a byte order mark, nesting past its limit, bad JSON), by `json.loads`, so the
    value and the errors are the standard library's."""
    if _LONG_DIGIT_RUN not in body.translate(_DIGITS_AS_ZEROS):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


def encode_json(value: Any) -> bytes:
    """The JSON of a message as sent: compact UTF-8."""
    try:
        return orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return _FALLBACK.encode(value).encode()


def encode_json_ascii(value: Any) -> bytes:
    """The JSON of a message framed by lines: compact, non-ASCII characters escaped."""
    encoded = encode_json(value)
    return encoded if encoded.isascii() else _FALLBACK.encode(value).encode()


def json_text(value: Any) -> str:
    """The JSON of a value as the text of a tool result."""
    try:
        return orjson.dumps(value).decode()
    except (orjson.JSONEncodeError, TypeError):
        return _FALLBACK.encode(value)
