"""Values nested too deep to answer or keep (issue 25, item 13): measured without recursion,
cut where they are stored or shown, the part left out marked."""

from __future__ import annotations

import json

from graphs.engine.nesting import MAX_DEPTH, TRUNCATED_KEY, cut_to_depth, deeper_than
from graphs.execution.payloads import encoded, stored_arguments


def nested(depth: int, leaf: object = 1) -> object:
    """`depth` levels of arrays and objects, alternating, around `leaf`."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"in": value}
    return value


def test_depth_is_measured_at_any_depth_without_recursion():
    assert not deeper_than(1, 0)
    assert not deeper_than([], 1)
    assert deeper_than([[]], 1)
    assert not deeper_than(nested(64), 64)
    assert deeper_than(nested(65), 64)
    assert deeper_than(nested(200_000), 64)


def test_a_value_within_the_depth_is_kept_as_it_is_and_not_copied():
    value = {"a": [1, {"b": 2}], "c": "d"}

    kept, cut = cut_to_depth(value, 3)

    assert kept is value
    assert cut is False


def test_a_value_too_deep_is_cut_there_keeping_its_keys_in_order_and_marked():
    value = {"z": 1, "a": nested(10), "m": [1, 2, 3]}

    kept, cut = cut_to_depth(value, 4)

    assert cut is True
    assert list(kept) == ["z", "a", "m"]
    assert kept["m"] == [1, 2, 3]
    assert kept["a"][0]["in"] == {
        TRUNCATED_KEY: True,
        "reason": "nested deeper than 4 levels; not kept",
    }
    assert not deeper_than(kept, 4)
    assert value["a"] == nested(10)  # the original is untouched


def test_a_payload_nested_thousands_deep_is_stored_cut_and_marked_not_a_recursion_error():
    # Masking secrets walked the value recursively: 5,000 levels raised RecursionError.
    text, truncated = encoded({"password": "hunter22", "x": nested(5000)}, 256 * 1024)

    stored = json.loads(text)
    assert truncated is True
    assert stored["password"] == "********"
    assert not deeper_than(stored, MAX_DEPTH)
    assert deeper_than(stored, MAX_DEPTH - 1)
    assert "nested deeper than 100 levels" in text


def test_arguments_nested_too_deep_are_stored_cut():
    stored = stored_arguments({"x": nested(3000)}, ())

    assert not deeper_than(stored, MAX_DEPTH)
