"""What a JSONata expression reads from a run's context, and what type it gives. Plain Python.

Validation reads the syntax tree jsonata-python built when the expression was compiled
(``Expression.ast``); nothing here evaluates anything.

- ``reads``: the node outputs an expression reads (``$.node.field``, ``node.field``,
  ``$$.node``), with the fields read after them and where each name is written in the text,
  so that a fix can change exactly that name. Only paths evaluated against the context
  itself count: inside a predicate (``[...]``), a later step of a path, or a group-by, ``$``
  and bare names are the current item's, so they are left alone.
- ``history_calls``: ``$executionCount("id")``, ``$nodeExecution("id", i)`` and
  ``$nodeExecutions("id")`` with a literal node id.
- ``infer``: the JSON Schema of the value an expression gives, where its form says it
  (literals, object constructors, operators, functions whose result type is fixed, a path
  through a node output whose schema is known); None where it does not.

Walks are iterative or bounded by the depth the parser itself reached, and visit each part
of the tree once, so their cost is linear in the expression's text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: The history functions whose first argument names a node (graphs/engine/history.py).
HISTORY_FUNCTIONS = ("executionCount", "nodeExecution", "nodeExecutions")

# Functions whose result has one JSON type whatever their arguments (when they give one).
_RESULT_TYPES = {
    **dict.fromkeys(
        (
            "count sum max min average number abs floor ceil round power sqrt random millis "
            "toMillis length executionCount"
        ).split(),
        "number",
    ),
    **dict.fromkeys(
        (
            "string substring substringBefore substringAfter uppercase lowercase trim pad join "
            "replace formatNumber formatBase formatInteger base64encode base64decode encodeUrl "
            "encodeUrlComponent decodeUrl decodeUrlComponent now fromMillis type"
        ).split(),
        "string",
    ),
    **dict.fromkeys("boolean not exists contains".split(), "boolean"),
    "merge": "object",
}
_NUMERIC = ("+", "-", "*", "/", "%")
_BOOLEAN = ("=", "!=", "<", "<=", ">", ">=", "and", "or", "in")

#: Where a value's type comes from: the expression itself, or an upstream output's schema.
Origin = str  # "expression", "entry", "tool", "transform", "approval"


@dataclass(frozen=True)
class Span:
    """Where a name is written in the expression's text (``end`` exclusive); -1 if unsure."""

    start: int
    end: int

    def replaced(self, source: str, text: str) -> str | None:
        """``source`` with this span replaced by ``text``, or None when the span is unsure."""
        return None if self.start < 0 else source[: self.start] + text + source[self.end :]


@dataclass(frozen=True)
class Read:
    """A read of node ``node``'s output, then of ``fields`` in turn."""

    node: str
    span: Span
    fields: tuple[tuple[str, Span], ...]


@dataclass(frozen=True)
class HistoryCall:
    """A history function called with a literal node id."""

    function: str
    node: str
    span: Span


@dataclass(frozen=True)
class Inferred:
    """The schema of a value and where it was learnt."""

    schema: dict[str, Any]
    origin: Origin


#: What validation knows of a node's output: its schema and where that was learnt.
ShapeOf = Callable[[str], Inferred | None]


def scan(ast: Any, source: str) -> tuple[list[Read], list[HistoryCall]]:
    """What the expression reads from the context (``reads``) and the history calls naming
    a node (``history_calls``), in one walk of the tree."""
    found: list[Read] = []
    calls: list[HistoryCall] = []
    for node, at_root in _walk(ast):
        kind = node.type
        if kind == "path":
            if at_root:
                read = _root_read(node, source)
                if read is not None:
                    found.append(read)
        elif kind in ("function", "partial"):
            call = _history_call(node, source)
            if call is not None:
                calls.append(call)
    return found, calls


def reads(ast: Any, source: str) -> list[Read]:
    """Every read of a node's output from the context, in the order written."""
    return scan(ast, source)[0]


def history_calls(ast: Any, source: str) -> list[HistoryCall]:
    """Every history function call naming a node with a literal string."""
    return scan(ast, source)[1]


def _history_call(node: Any, source: str) -> HistoryCall | None:
    procedure: Any = node.procedure
    arguments: list[Any] = node.arguments or []
    if (
        getattr(procedure, "type", None) == "variable"
        and procedure.value in HISTORY_FUNCTIONS
        and arguments
        and getattr(arguments[0], "type", None) == "string"
        and isinstance(arguments[0].value, str)
    ):
        literal = arguments[0]
        return HistoryCall(procedure.value, literal.value, _string_span(literal, source))
    return None


def _walk(ast: Any) -> Iterator[tuple[Any, bool]]:
    """Each part of the tree once, with whether it is evaluated against the context itself
    (``True``) or against some item of it (``False``)."""
    pending = [(ast, True)]
    seen: set[int] = set()
    while pending:
        node, at_root = pending.pop()
        if node is None or id(node) in seen or not hasattr(node, "type"):
            continue
        seen.add(id(node))
        yield node, at_root
        pending.extend(reversed(_children(node, at_root)))


def _children(node: Any, at_root: bool) -> list[tuple[Any, bool]]:
    # The parts of a node are read from its __dict__: validation walks every tree, and
    # getattr with a default costs twice as much.
    parts = node.__dict__
    children: list[tuple[Any, bool]] = []
    if parts.get("type") == "path":
        for index, step in enumerate(parts.get("steps") or ()):
            # The first step is evaluated where the path is; each later one on the items the
            # steps before it gave.
            children.append((step, at_root and index == 0))
            children += _relative(step.__dict__)
        return children
    for name in ("lhs", "rhs", "expression", "condition", "then", "_else", "procedure", "body"):
        child = parts.get(name)
        if child is not None:
            children.append((child, at_root))
    for name in ("arguments", "expressions"):
        children += [(child, at_root) for child in parts.get(name) or ()]
    for key, value in parts.get("lhs_object") or ():
        children += [(key, at_root), (value, at_root)]
    if parts.get("pattern") is not None:  # a transform: |pattern|update, delete|
        children.append((parts["pattern"], at_root))
        # Evaluated on each value the pattern matched.
        children += [(parts[name], False) for name in ("update", "delete") if parts.get(name)]
    children += _relative(parts)
    return children


def _relative(parts: dict[str, Any]) -> list[tuple[Any, bool]]:
    """A step's predicates, stages, group-by and sort terms: evaluated on its items."""
    children = [
        (getattr(stage, "expr", None), False)
        for name in ("stages", "predicate")
        for stage in parts.get(name) or ()
    ]
    group = parts.get("group")
    if group is not None:
        for key, value in group.__dict__.get("lhs_object") or ():
            children += [(key, False), (value, False)]
    children += [(getattr(term, "expression", None), False) for term in parts.get("terms") or ()]
    return children


def _root_read(path: Any, source: str) -> Read | None:
    """The node read by a path evaluated against the context, if it reads one by name."""
    steps = path.steps or []
    first: Any = steps[0] if steps else None
    kind, value = getattr(first, "type", None), getattr(first, "value", None)
    if kind == "variable" and value in ("", "$"):  # `$.node` (at the root) or `$$.node`
        names = steps[1:]
    elif kind == "name":  # `node.field`
        names = steps
    else:
        return None
    plain = []
    for step in names:
        if getattr(step, "type", None) != "name" or not isinstance(step.value, str):
            break
        plain.append((step.value, _name_span(step, source)))
    if not plain:
        return None
    (node, span), *fields = plain
    return Read(node, span, tuple(fields))


def _name_span(step: Any, source: str) -> Span:
    value, end = step.value, step.position
    if isinstance(end, int) and source[end - len(value) : end] == value:
        return Span(end - len(value), end)
    if isinstance(end, int) and source[end - len(value) - 1 : end - 1] == value:
        return Span(end - len(value) - 1, end - 1)  # written `in backticks`
    return Span(-1, -1)


def _string_span(literal: Any, source: str) -> Span:
    value, end = literal.value, literal.position
    if isinstance(end, int) and source[end - len(value) - 1 : end - 1] == value:
        return Span(end - len(value) - 1, end - 1)  # inside its quotes
    return Span(-1, -1)


def infer(ast: Any, shape_of: ShapeOf) -> Inferred | None:
    """The schema of the value ``ast`` gives, where its form says it; see the module doc."""
    kind = getattr(ast, "type", None)
    value: Any = getattr(ast, "value", None)
    if kind == "string":
        return _typed("string")
    if kind == "number":
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        return _typed("integer" if whole else "number")
    if kind == "value":
        return _typed("null" if value is None else "boolean")
    if kind == "unary":
        if value == "-":
            return _typed("number")
        if value == "[":
            return _typed("array")
        if value == "{":
            return _object(ast, shape_of)
        return None
    if kind == "binary":
        if value in _NUMERIC:
            return _typed("number")
        if value == "&":
            return _typed("string")
        if value in _BOOLEAN:
            return _typed("boolean")
        return None
    if kind == "condition":
        then = infer(ast.then, shape_of)
        other = infer(ast._else, shape_of) if ast._else is not None else None
        if then is not None and other is not None and _type(then) == _type(other):
            return Inferred({"type": _type(then)}, "expression")
        return None
    if kind == "block":
        expressions = ast.expressions or []
        return infer(expressions[-1], shape_of) if expressions else None
    if kind == "function":
        procedure = ast.procedure
        if getattr(procedure, "type", None) == "variable" and procedure.value in _RESULT_TYPES:
            return _typed(_RESULT_TYPES[procedure.value])
        return None
    if kind == "path":
        return _path_shape(ast, shape_of)
    return None


def _typed(name: str) -> Inferred:
    return Inferred({"type": name}, "expression")


def _type(inferred: Inferred) -> Any:
    return inferred.schema.get("type")


def _object(ast: Any, shape_of: ShapeOf) -> Inferred:
    """An object constructor: its properties where its keys are literal, exact when all are."""
    properties: dict[str, Any] = {}
    exact = True
    for key, value in ast.lhs_object or []:
        if getattr(key, "type", None) != "string":
            exact = False
            continue
        inferred = infer(value, shape_of)
        properties[key.value] = dict(inferred.schema) if inferred is not None else {}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if exact:
        schema["additionalProperties"] = False
    return Inferred(schema, "expression")


def _path_shape(path: Any, shape_of: ShapeOf) -> Inferred | None:
    """The schema of a plain path through a node's output (no array on the way)."""
    steps = path.steps or []
    first: Any = steps[0] if steps else None
    if getattr(first, "type", None) == "variable" and first.value in ("", "$"):
        steps = steps[1:]
    elif getattr(first, "type", None) != "name":
        return None
    if not steps or any(
        getattr(step, "type", None) != "name"
        or getattr(step, "stages", None)
        or getattr(step, "predicate", None)
        for step in steps
    ):
        return None
    upstream = shape_of(steps[0].value)
    if upstream is None:
        return None
    schema: Any = upstream.schema
    for step in steps[1:]:
        schema = property_schema(schema, step.value)
        if schema is None or schema_types(schema) & {"array"}:
            return None  # JSONata maps the rest of a path over an array: no one type
    if not isinstance(schema, dict) or not schema_types(schema):
        return None
    return Inferred(schema, upstream.origin)


def property_schema(schema: Any, name: str) -> dict[str, Any] | None:
    """The schema of property ``name`` of an object schema, or None when it does not say."""
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if isinstance(properties, dict) and isinstance(properties.get(name), dict):
        found: dict[str, Any] = properties[name]
        return found
    return None


def required_names(schema: Any) -> list[str]:
    """The names a JSON Schema's `required` lists (none when it lists none)."""
    required = schema.get("required") if isinstance(schema, Mapping) else None
    return (
        [name for name in required if isinstance(name, str)] if isinstance(required, list) else []
    )


def schema_types(schema: Any) -> set[str]:
    """The JSON types a schema allows, as far as its `type`, `anyOf` and `oneOf` say; empty
    when it does not say (anything goes)."""
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    listed = declared if isinstance(declared, list) else [declared]
    types = {name for name in listed if isinstance(name, str)}
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            branch_types = [schema_types(branch) for branch in branches]
            if any(not found for found in branch_types):
                return set()  # a branch without a type allows anything
            for found in branch_types:
                types |= found
    if not types and isinstance(schema.get("properties"), dict):
        types = {"object"}
    return {name for name in types if isinstance(name, str)}


def types_fit(have: set[str], wanted: set[str]) -> bool:
    """Whether a value of one of types ``have`` can be of one of ``wanted`` (a number may be
    an integer, so it is given the benefit of the doubt)."""
    widened = set(wanted)
    if "number" in wanted:
        widened.add("integer")
    if "integer" in wanted:
        widened.add("number")
    return bool(have & widened)
