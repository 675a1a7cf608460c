"""The endpoint's JSON encoding and decoding: orjson, with the standard library for what
orjson refuses or would read otherwise."""

from __future__ import annotations

import json
import re

import pytest

from mcp_endpoint.jsonrpc.encoding import decode_json, encode_json, encode_json_ascii, json_text


@pytest.mark.parametrize(
    "value",
    [
        {"text": "héllo ✓", "n": 1.5, "list": [1, None, True]},
        {"echoed": "\ud800"},  # a lone surrogate from a caller's arguments
        {"big": 2**70},
        {1: "a key that is not a string"},
    ],
)
def test_every_value_the_standard_library_encodes_is_encoded(value):
    expected = json.loads(json.dumps(value))
    assert json.loads(encode_json(value)) == expected
    assert json.loads(json_text(value)) == expected


def test_the_encoding_is_compact_utf8():
    assert encode_json({"a": "✓", "b": [1, 2]}) == '{"a":"✓","b":[1,2]}'.encode()
    assert json_text({"a": 1}) == '{"a":1}'


@pytest.mark.parametrize("text", ["line\u2028separator", "next\x85line", "héllo", "\ud800"])
def test_messages_framed_by_lines_are_ascii(text):
    """A reader splitting lines on Unicode separators too must not cut an event or a line."""
    encoded = encode_json_ascii({"id": text})
    assert encoded.isascii()
    assert len(encoded.decode().splitlines()) == 1
    assert json.loads(encoded) == {"id": text}


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"a": [1.5, "\\u00e9"]}}',
        # Integers beyond 64 bits, which orjson would read as floats: exact, as ids and as
        # arguments.
        b'{"id": 123456789012345678901234567890}',
        b'{"n": -9223372036854775809, "m": 18446744073709551616}',
        b'{"digits": "1234567890123456789012"}',
        b"[NaN, Infinity, 1e400]",  # the standard library's extensions
        b"\xef\xbb\xbf{}",  # a byte order mark
        b'{"a": 1, "a": 2}',
    ],
)
def test_a_body_decodes_to_what_the_standard_library_reads(body):
    decoded, expected = decode_json(body), json.loads(body)
    assert repr(decoded) == repr(expected)  # repr: 2**70 and its float differ, nan != nan


@pytest.mark.parametrize("body", [b"", b'{"a": 1', b'{"a": 1}x', b"\xff\xfe"])
def test_a_body_that_is_not_json_fails_as_the_standard_library_fails(body):
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)) as expected:
        json.loads(body)
    with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
        decode_json(body)


def test_a_body_nested_past_any_limit_fails_as_the_standard_library_fails():
    body = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(RecursionError):
        decode_json(body)
