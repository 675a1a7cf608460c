"""JSON Schemas evaluated without ever fetching: the one way this service checks a value
against a schema (workflow input and output schemas), and the check that refuses a schema
referring outside itself.

jsonschema's default registry retrieves any `$ref` it cannot resolve within the schema with
``urlopen``, without a timeout: a workflow's inputSchema with `$ref: "http://…"` made every
call fetch that URL, and `file://…` read local files. Here every schema is compiled with
``NO_FETCH_REGISTRY``, which knows the bundled metaschemas and retrieves nothing, so such a
reference fails to resolve (``SchemaUnresolvable``, saying why) instead of going anywhere.
``nonlocal_references`` finds the references that would need fetching, so that a definition
holding one is refused when it is validated, imported or saved (graphs/engine/format/sections.py).

Plain Python: the engine, graphs and mcp_endpoint use it alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable, Unretrievable
from referencing.jsonschema import UnknownDialect, specification_with

from graphs.engine.checks.problems import Key, pointer

__all__ = [
    "NO_FETCH_REGISTRY",
    "SchemaFetchRefused",
    "SchemaReference",
    "SchemaUnresolvable",
    "nonlocal_references",
    "schema_errors",
    "schema_validator",
]

#: What an author is told to do about a reference that is not local.
LOCAL_ONLY = (
    "only local references (starting with '#', as '#/$defs/name') are allowed, as this server "
    "never fetches a schema: inline the referred schema under $defs and refer to it there"
)


class SchemaFetchRefused(Exception):
    """A schema asked for a document outside itself: this service retrieves none."""


class SchemaUnresolvable(Exception):
    """A schema could not be evaluated: one of its references does not resolve within it."""


def _refuse_retrieval(uri: str) -> Resource[Any]:
    raise SchemaFetchRefused(f"the schema refers to {uri!r}, outside itself; {LOCAL_ONLY}")


#: A registry that retrieves nothing: a reference to a document other than the schema and
#: the metaschemas jsonschema bundles (which it adds itself) raises ``SchemaFetchRefused``.
NO_FETCH_REGISTRY: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


def schema_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """A compiled validator for ``schema`` (its ``$schema`` dialect, else the latest), whose
    references resolve only within the schema and the bundled metaschemas. Compiling costs
    far more than validating: keep the validator where the schema is used repeatedly."""
    validator_class = validator_for(schema)
    return validator_class(schema, registry=NO_FETCH_REGISTRY)


def schema_errors(validator: Validator, instance: Any) -> Iterator[ValidationError]:
    """The errors of ``instance`` against ``validator``'s schema, lazily (take the first
    only, if that is all you need). Raises ``SchemaUnresolvable`` when the schema refers to
    something it does not hold: the message names the reference and says how to fix it."""
    try:
        yield from validator.iter_errors(instance)
    except Unresolvable as exc:
        raise SchemaUnresolvable(_unresolvable_message(exc)) from None


def _unresolvable_message(exc: Unresolvable) -> str:
    causes: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(causes) < 10:  # jsonschema and referencing chain theirs
        causes.append(cause)
        cause = cause.__cause__
    retrievals = [each for each in causes if isinstance(each, Unretrievable)]
    if retrievals:
        uri = retrievals[-1].ref
        return f"its reference {uri!r} is not local and was not fetched; {LOCAL_ONLY}"
    anchors = [each.anchor for each in causes if getattr(each, "anchor", None)]  # type: ignore[attr-defined]
    refs = [str(each.ref) for each in causes if getattr(each, "ref", None)]  # type: ignore[attr-defined]
    shown = f"#{anchors[0]}" if anchors else refs[0] if refs else ""
    shown = f"#{shown}" if shown.startswith("/") else shown  # a pointer, as in the $ref
    return (
        f"its reference {shown!r} does not resolve within the schema; point it to a subschema "
        "the schema holds, as '#/$defs/name'"
    )


@dataclass(frozen=True)
class SchemaReference:
    """A reference in a schema that would need another document: where it is (keys from
    the schema's root), its keyword and its value."""

    keys: tuple[Key, ...]
    keyword: str
    value: str

    @property
    def pointer(self) -> str:
        """The JSON Pointer of the reference's keyword within the schema."""
        return pointer(self.keys)

    def message(self) -> str:
        """What an author reads about it, naming the field and how to fix it."""
        if self.keyword == "$schema":
            return (
                f"$schema {self.value!r} at {self.pointer or '/'} is not a JSON Schema dialect "
                "this server knows (draft 3 to 2020-12), and it fetches none: use a known "
                "dialect's URI, such as 'https://json-schema.org/draft/2020-12/schema', or "
                "leave $schema out"
            )
        return f"{self.keyword} {self.value!r} at {self.pointer} is not local; {LOCAL_ONLY}"


# Keywords whose value names another schema document, which resolving would retrieve.
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose value is data, not schemas: a "$ref" in an example is not a reference.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples", "example"})
# Keywords whose value maps names to schemas: there, a name such as "default" is a schema.
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


def nonlocal_references(schema: Any) -> list[SchemaReference]:
    """Every reference in ``schema`` that is not local: a `$ref`, `$dynamicRef` or
    `$recursiveRef` not starting with '#', an `$id` not starting with '#' (it makes the
    references under it resolve against another document), and a `$schema` naming a
    dialect that is not bundled. In document order; empty when the schema is self-contained."""
    found: list[SchemaReference] = []
    # (keys, value, whether the value maps names to schemas rather than being a schema)
    pending: list[tuple[tuple[Key, ...], Any, bool]] = [((), schema, False)]
    while pending:
        keys, node, names_schemas = pending.pop()
        if isinstance(node, list):
            pending += [
                ((*keys, index), item, False) for index, item in reversed(list(enumerate(node)))
            ]
            continue
        if not isinstance(node, Mapping):
            continue
        if not names_schemas:
            found += _references_in(keys, node)
        pending += [
            ((*keys, str(key)), value, not names_schemas and key in _SCHEMA_MAPS)
            for key, value in reversed(list(node.items()))
            if isinstance(value, Mapping | list) and (names_schemas or key not in _DATA_KEYWORDS)
        ]
    return found


def _references_in(keys: tuple[Key, ...], node: Mapping[str, Any]) -> list[SchemaReference]:
    """The references one schema object makes itself (not those of its subschemas)."""
    found = [
        SchemaReference((*keys, keyword), keyword, value)
        for keyword in (*_REFERENCES, "$id")
        if isinstance(value := node.get(keyword), str) and not value.startswith("#")
    ]
    dialect = node.get("$schema")
    if isinstance(dialect, str) and not _known_dialect(dialect):
        found.append(SchemaReference((*keys, "$schema"), "$schema", dialect))
    return found


def _known_dialect(uri: str) -> bool:
    try:
        specification_with(uri)
    except UnknownDialect:
        return False
    return True
