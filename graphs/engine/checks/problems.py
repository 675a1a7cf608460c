"""Problems of a workflow definition, as a program can read and fix them. Plain Python.

A ``Problem`` says how bad it is (``error``: the definition cannot be stored or run as it is;
``warning``: it can, but probably does not do what was meant), what kind it is (a stable
snake_case ``code``), where it is (the node id, and an RFC 6901 JSON Pointer into the
definition as it was submitted) and, when the remedy is certain or likely, a ``fix``: an
RFC 6902 JSON Patch that, applied on its own to the submitted definition, removes it.

The checks that refuse a definition at import (graphs/engine/format/parsing.py,
graphs/engine/checks/structure.py, graphs/engine/compiler.py) record a ``Finding``: the text
DefinitionError has always carried, and the problem(s) behind it. Both words come from one place, so
the import's messages and validation's problems cannot drift.

Pointers are built for the nested file form (``/tools/0/nodes/3/args/path``); a definition
submitted in the flat form has its pointers and fixes rewritten (``to_flat_form``) to
``/nodes/<index in the top-level list>/...``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Severity = Literal["error", "warning"]
#: One step of a JSON Pointer: a mapping key or a list index.
Key = str | int
Keys = tuple[Key, ...]


@dataclass(frozen=True)
class Problem:
    """One problem of a definition; see the module docstring for the fields."""

    severity: Severity
    code: str
    node: str | None
    path: str
    message: str
    fix: list[dict[str, Any]] | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The problem as JSON, as validate_workflow answers it (``fix`` only when offered)."""
        answer: dict[str, Any] = {
            "severity": self.severity,
            "code": self.code,
            "node": self.node,
            "path": self.path,
            "message": self.message,
        }
        if self.fix is not None:
            answer["fix"] = self.fix
        return answer


@dataclass(frozen=True)
class Finding:
    """A problem a definition is refused for: its ``text`` (as ``DefinitionError`` lists it)
    and the structured problem(s) behind it (one, or one per key for unknown keys)."""

    text: str
    problems: tuple[Problem, ...]


def pointer(keys: Iterable[Key]) -> str:
    """The RFC 6901 JSON Pointer of a path of keys: ``("a/b", 0)`` is ``/a~1b/0``."""
    return "".join("/" + str(key).replace("~", "~0").replace("/", "~1") for key in keys)


def keys_of(path: str) -> list[str]:
    """The keys of a JSON Pointer, unescaped (list indexes stay text)."""
    if not path:
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def error(
    code: str,
    message: str,
    at: Keys,
    *,
    node: str | None = None,
    fix: list[dict[str, Any]] | None = None,
) -> Problem:
    """An error problem at the pointer of ``at``."""
    return Problem("error", code, node, pointer(at), message, fix)


def warning(
    code: str,
    message: str,
    at: Keys,
    *,
    node: str | None = None,
    fix: list[dict[str, Any]] | None = None,
) -> Problem:
    """A warning problem at the pointer of ``at``."""
    return Problem("warning", code, node, pointer(at), message, fix)


def finding(
    code: str,
    where: str,
    message: str,
    at: Keys,
    *,
    node: str | None = None,
    fix: list[dict[str, Any]] | None = None,
) -> Finding:
    """A refusal whose text is ``where: message`` and whose one problem is an error with
    that text (the location in words helps a reader as much as the pointer helps a program)."""
    text = f"{where}: {message}"
    return Finding(text, (error(code, text, at, node=node, fix=fix),))


def op_replace(at: Keys, value: Any) -> dict[str, Any]:
    """A JSON Patch ``replace`` operation."""
    return {"op": "replace", "path": pointer(at), "value": value}


def op_add(at: Keys, value: Any) -> dict[str, Any]:
    """A JSON Patch ``add`` operation (``-`` as the last key appends to a list)."""
    return {"op": "add", "path": pointer(at), "value": value}


def op_remove(at: Keys) -> dict[str, Any]:
    """A JSON Patch ``remove`` operation."""
    return {"op": "remove", "path": pointer(at)}


def op_move(source: Keys, target: Keys) -> dict[str, Any]:
    """A JSON Patch ``move`` operation: the value at ``source`` goes to ``target``."""
    return {"op": "move", "from": pointer(source), "path": pointer(target)}


_NESTED_NODE = re.compile(r"/tools/(\d+)/nodes(?:/(\d+|-))?(?=/|$)")


def to_flat_form(
    problems: Sequence[Problem],
    node_index: Callable[[int, int], int | None],
    tool_name: Callable[[int], str | None],
) -> list[Problem]:
    """``problems`` with nested-form pointers rewritten for a definition submitted in the
    flat form: ``/tools/T/nodes/N/...`` becomes ``/nodes/<node_index(T, N)>/...``.

    A fix that appends an entry or exit node to a tool's nodes gets the ``tool`` key that
    node needs in the flat form. A fix whose pointer has no flat counterpart is dropped
    rather than offered wrong.
    """
    flat: list[Problem] = []
    for problem in problems:
        path = _flat_pointer(problem.path, node_index)
        fix = problem.fix
        if fix is not None:
            fix = _flat_fix(fix, node_index, tool_name)
        flat.append(replace(problem, path=problem.path if path is None else path, fix=fix))
    return flat


def _flat_pointer(path: str, node_index: Callable[[int, int], int | None]) -> str | None:
    match = _NESTED_NODE.match(path)
    if match is None:
        return path
    rest = path[match.end() :]
    if match.group(2) is None:
        return "/nodes" + rest
    if match.group(2) == "-":
        return "/nodes/-" + rest
    index = node_index(int(match.group(1)), int(match.group(2)))
    return None if index is None else f"/nodes/{index}{rest}"


def _flat_fix(
    fix: list[dict[str, Any]],
    node_index: Callable[[int, int], int | None],
    tool_name: Callable[[int], str | None],
) -> list[dict[str, Any]] | None:
    operations = []
    for operation in fix:
        rewritten = dict(operation)
        for key in ("path", "from"):
            if key in operation:
                path = _flat_pointer(operation[key], node_index)
                if path is None:
                    return None
                rewritten[key] = path
        match = _NESTED_NODE.fullmatch(operation["path"])
        value = operation.get("value")
        if (
            operation["op"] == "add"
            and match is not None
            and match.group(2) == "-"
            and isinstance(value, Mapping)
            and value.get("type") in ("entry", "exit")
        ):
            rewritten["value"] = {**value, "tool": tool_name(int(match.group(1)))}
        operations.append(rewritten)
    return operations
