"""What of a run's data may be stored in its history: secrets masked, size capped.

History is read by reviewers, so secrets are replaced before they are stored: values under keys that
name a secret (`password`, `api_key`, `authorization`, ...), and the run's secret values wherever
they were copied (`run_secrets`: the arguments the workflow's inputSchema marks `writeOnly` or
`format: password`, and those under secret-named keys), in any string, under any key. Error texts
also have the credentials of URLs and command lines masked (`nodespecs.secrets.mask_credentials`). A
payload larger than `GRAPHS_MAX_PAYLOAD_BYTES` is stored as a marked preview instead of silently
dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

# The mark of a payload cut short, here by its size, there by its depth.
from graphs.engine.nesting import TRUNCATED_KEY as TRUNCATED_KEY
from graphs.engine.nesting import cut_to_depth
from nodespecs.secrets import mask_credentials

MASK = "********"
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
# JSON as the history stores it. One encoder for every payload: `json.dumps` with any option
# builds a new one per call, which cost as much as encoding a node's small output.
to_json = json.JSONEncoder(ensure_ascii=False, default=str).encode
# Shorter secret values are not searched for: "1", "yes" would blank ordinary words out of
# the history, and give little away.
MIN_SECRET_LENGTH = 4
# How far an inputSchema is followed for its secrets: schemas nest and refer to themselves.
_MAX_SCHEMA_DEPTH = 16
_MAX_SCHEMA_VISITS = 2000
# A path into a run's arguments: property names, and None for every item of an array or
# value of an object.
SecretPath = tuple[str | None, ...]


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


def _marks_secret(schema: dict[str, Any]) -> bool:
    return schema.get("writeOnly") is True or schema.get("format") == "password"


def _local(root: Any, ref: str) -> Any:
    """What a local `$ref` ("#/$defs/x") points at in `root`; None for any other."""
    if not ref.startswith("#"):
        return None
    target = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            return None
        target = target[part]
    return target


def secret_paths(schema: Any) -> list[SecretPath]:
    """Where a workflow's inputSchema puts secrets: the paths to what it marks `writeOnly:
    true` or `format: password`, through nested properties, array items, additional and
    pattern properties, `allOf`/`anyOf`/`oneOf`/`if`/`then`/`else` and local `$ref`s."""
    found: set[SecretPath] = set()
    visits = 0

    def walk(node: Any, path: SecretPath, depth: int) -> None:
        nonlocal visits
        visits += 1
        if not isinstance(node, dict) or depth > _MAX_SCHEMA_DEPTH or visits > _MAX_SCHEMA_VISITS:
            return
        if _marks_secret(node):
            found.add(path)
            return
        if isinstance(node.get("$ref"), str):
            walk(_local(schema, node["$ref"]), path, depth + 1)
        for key in ("allOf", "anyOf", "oneOf"):
            branches = node.get(key)
            for branch in branches if isinstance(branches, list) else []:
                walk(branch, path, depth + 1)
        for key in ("if", "then", "else"):
            walk(node.get(key), path, depth + 1)
        properties = node.get("properties")
        for name, sub in properties.items() if isinstance(properties, dict) else []:
            walk(sub, (*path, str(name)), depth + 1)
        patterns = node.get("patternProperties")
        for sub in patterns.values() if isinstance(patterns, dict) else []:
            walk(sub, (*path, None), depth + 1)
        for key in ("additionalProperties", "items", "additionalItems"):
            walk(node.get(key), (*path, None), depth + 1)
        prefix = node.get("prefixItems")
        for sub in prefix if isinstance(prefix, list) else []:
            walk(sub, (*path, None), depth + 1)

    walk(schema, (), 0)
    return sorted(found, key=lambda path: [str(step) for step in path])


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value (object keys excepted)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _at(value: Any, path: SecretPath) -> Iterator[Any]:
    """The values at `path` in `value` (None steps take every item or value)."""
    if not path:
        yield value
        return
    step, rest = path[0], path[1:]
    if step is None:
        items = value.values() if isinstance(value, dict) else value
        for item in items if isinstance(value, dict | list) else []:
            yield from _at(item, rest)
    elif isinstance(value, dict) and step in value:
        yield from _at(value[step], rest)


def _under_secret_names(value: Any) -> Iterator[str]:
    """The strings under secret-named keys, at any depth (what `mask_secrets` masks)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if is_secret_name(str(key)):
                yield from _strings(item)
            else:
                yield from _under_secret_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _under_secret_names(item)


def run_secrets(paths: Sequence[SecretPath], arguments: Any) -> tuple[str, ...]:
    """A run's secret values, to mask wherever the history holds them: the strings of
    `arguments` at `paths` (what the workflow's inputSchema marks `writeOnly` or `format:
    password`: `secret_paths`, found once per version), and those under secret-named keys;
    of MIN_SECRET_LENGTH characters or more, longest first (so a secret that contains
    another is masked whole). Empty for most runs, which then cost nothing."""
    found = set(_under_secret_names(arguments))
    for path in paths:
        for value in _at(arguments, path):
            found.update(_strings(value))
    long_enough = [value for value in found if len(value) >= MIN_SECRET_LENGTH]
    return tuple(sorted(long_enough, key=len, reverse=True))


def mask_text(text: str, secrets: Sequence[str]) -> str:
    """`text` with each of `secrets` (longest first) replaced by MASK."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def mask_values(value: Any, secrets: Sequence[str]) -> Any:
    """A copy of a JSON value with `secrets` masked in every string, object keys included."""
    if isinstance(value, str):
        return mask_text(value, secrets)
    if isinstance(value, dict):
        return {
            mask_text(str(key), secrets): mask_values(item, secrets) for key, item in value.items()
        }
    if isinstance(value, list):
        return [mask_values(item, secrets) for item in value]
    return value


def stored_arguments(arguments: Any, secrets: Sequence[str]) -> Any:
    """A run's arguments as its history keeps them: secret-named keys' values and `secrets`
    masked, and what nests deeper than the history keeps marked (graphs/engine/nesting.py)."""
    masked = mask_secrets(cut_to_depth(arguments)[0])
    return mask_values(masked, secrets) if secrets else masked


def stored_error(text: str, secrets: Sequence[str] = ()) -> str:
    """A node's or a run's error as the history keeps it (and callers are told it): the
    run's `secrets` and the credentials in URLs and command lines masked."""
    if not text:
        return text
    return mask_credentials(mask_text(text, secrets))


def _appears(text: str, secrets: Sequence[str]) -> bool:
    """Whether any of `secrets` is in a string of the JSON `text` (JSON escapes each
    character on its own, so a string holding a secret holds its escaped form)."""
    return any(json.dumps(s, ensure_ascii=False)[1:-1] in text for s in secrets)


def encoded(value: Any, max_bytes: int, secrets: Sequence[str] = ()) -> tuple[str, bool]:
    """A payload as the JSON text to store, and whether it had to be truncated; the values
    of secret-named keys and the run's `secrets` masked.

    A payload over `max_bytes` of JSON becomes `{"_truncated": true, "bytes": N, "preview":
    "<the first max_bytes characters of its JSON>"}` (of its masked JSON); a part nested
    deeper than the history keeps becomes a mark saying so (graphs/engine/nesting.py).
    """
    value, cut = cut_to_depth(value)
    text = to_json(mask_secrets(value))
    if secrets and _appears(text, secrets):
        # Searched in the text first: only a payload holding a secret is walked.
        text = to_json(mask_values(json.loads(text), secrets))
    if len(text) <= max_bytes:
        return text, cut
    preview = {TRUNCATED_KEY: True, "bytes": len(text.encode()), "preview": text[:max_bytes]}
    return to_json(preview), True


def storable(value: Any, max_bytes: int, secrets: Sequence[str] = ()) -> tuple[Any, bool]:
    """`encoded`, as the value a JSONField takes."""
    text, truncated = encoded(value, max_bytes, secrets)
    return json.loads(text), truncated


def holds_secret_or_cut(value: Any) -> bool:
    """Whether a stored payload is not what was produced: a secret in it was masked, or it
    was cut over GRAPHS_MAX_PAYLOAD_BYTES. Such a value cannot be replayed or compared
    faithfully (re-runs, examples, mocks taken from a run)."""
    if isinstance(value, dict):
        return value.get(TRUNCATED_KEY) is True or any(
            holds_secret_or_cut(item) for item in value.values()
        )
    if isinstance(value, list):
        return any(holds_secret_or_cut(item) for item in value)
    # A secret value copied into a longer string is masked inside it.
    return isinstance(value, str) and MASK in value
