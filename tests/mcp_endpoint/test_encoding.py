"""The endpoint's JSON encoding: orjson, with the standard library for what orjson refuses."""

from __future__ import annotations

import json

import pytest

from mcp_endpoint.jsonrpc.encoding import encode_json, encode_json_ascii, json_text


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
