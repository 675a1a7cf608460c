"""YAML from authors and uploads: size, alias bombs and nesting are refused before loading."""

from __future__ import annotations

import time

import pytest

from graphs.engine import DefinitionError, load_yaml, parse_definition

LAUGHS = "\n".join(
    ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [
        f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    ]
)


def test_a_billion_laughs_document_is_refused_quickly():
    started = time.perf_counter()

    with pytest.raises(DefinitionError, match="looks like an alias bomb") as caught:
        load_yaml(LAUGHS)

    assert time.perf_counter() - started < 0.5
    assert "expand it to 490329064 nodes" in str(caught.value)


def test_the_same_bomb_is_refused_by_parse_definition():
    with pytest.raises(DefinitionError, match="alias bomb"):
        parse_definition(LAUGHS)


def test_text_over_the_size_limit_is_refused_before_parsing():
    with pytest.raises(DefinitionError, match="is 2001 bytes, over the limit of 2000"):
        load_yaml("#" * 2001, max_bytes=2000)
    assert load_yaml("a: 1", max_bytes=4) == {"a": 1}


def test_an_alias_inside_its_own_anchor_is_refused():
    with pytest.raises(DefinitionError, match=r"alias \*loop is inside its own anchor"):
        load_yaml("loop: &loop [1, *loop]")


@pytest.mark.parametrize("depth", [101, 100_000])  # libyaml's composer crashes at 100,000
def test_deep_nesting_is_refused_quickly(depth):
    started = time.perf_counter()

    with pytest.raises(DefinitionError, match="nests more than 100 levels"):
        load_yaml("[" * depth + "]" * depth)

    assert time.perf_counter() - started < 0.5


def test_nesting_up_to_the_limit_loads():
    value = load_yaml("[" * 100 + "]" * 100)

    for _ in range(99):
        [value] = value
    assert value == []


def test_reusing_a_schema_through_an_anchor_is_fine():
    text = "schema: &s {type: object, properties: {n: {type: number}}}\none: *s\ntwo: *s\n"

    assert load_yaml(text)["two"] == {"type": "object", "properties": {"n": {"type": "number"}}}


def test_only_plain_data_is_built():
    with pytest.raises(DefinitionError, match="not valid YAML"):
        load_yaml("!!python/object/apply:os.system ['true']")
