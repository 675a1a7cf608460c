"""Patches and definitions under budget: a definition sent as data is measured before any
deep work, and a JSON Patch is applied to one operation by operation, each checked against
the same budget before it is applied.

Applying a whole patch at once let `{"op": "copy", "from": "/tools", "path": "/tools/-"}`, repeated,
double the document with each operation before anything measured it (18 took 3.9 s and 552 MB). Here
the budget is the one validation reads a definition within (graphs/engine/checks/all_checks.py): at
most MAX_ITEMS values (mappings, lists and scalars), MAX_CHARS characters of text (strings and keys)
and MAX_DEPTH levels. What an `add`, `replace`, `copy` or `move` writes is measured before it is
written, counting no further than the budget left, so a `copy` whose source alone is over budget is
refused before anything is copied; what a `remove` or a `replace` takes away is subtracted. What a
patch writes in all is held to the same budget (a patch never needs to write more than a whole
definition), so its work is linear in the budget whatever it does. At most MAX_PATCH_OPERATIONS
operations are applied.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch
from jsonpointer import JsonPointer, JsonPointerException

from graphs.engine.checks.all_checks import MAX_CHARS, MAX_ITEMS
from graphs.engine.format.loading import MAX_DEPTH

#: The most operations one patch may hold: real edits take a handful.
MAX_PATCH_OPERATIONS = 100

_WHOLE = "or send the whole new definition as `definition` instead of a patch"


class PatchRefused(Exception):
    """A patch that cannot be applied, or would make the definition too large: the message
    names the operation (counted from 0), the limit and how to fix it."""


@dataclass(frozen=True)
class Size:
    """How much a value holds, as validation counts it: values, characters of text (string
    values and mapping keys), and the deepest level it reaches."""

    values: int = 0
    chars: int = 0
    depth: int = 0

    def over(self) -> str | None:
        """What the size is over the definition's budget by, in words; None if within."""
        if self.depth > MAX_DEPTH:
            return f"more than {MAX_DEPTH} levels of nesting"
        if self.values > MAX_ITEMS:
            return f"more than {MAX_ITEMS:,} values"
        if self.chars > MAX_CHARS:
            return f"more than {MAX_CHARS:,} characters of text"
        return None


def measure(value: Any, *, depth: int = 1, values: int = 0, chars: int = 0) -> Size:
    """The size of ``value`` placed ``depth`` levels deep (1: the document itself) in a
    document already holding ``values`` values and ``chars`` characters: those totals plus
    the value's own, and the deepest level reached. Counting stops as soon as the total is
    over the budget (``Size.over``), so measuring costs no more than the budget however
    large the value is."""
    deepest = 0
    pending = [(value, depth)]
    while pending:
        item, level = pending.pop()
        values += 1
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH or values > MAX_ITEMS or chars > MAX_CHARS:
            break
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, Mapping):
            chars += sum(len(key) for key in item if isinstance(key, str))
            pending += [(child, level + 1) for child in item.values()]
        elif isinstance(item, list | tuple):
            pending += [(child, level + 1) for child in item]
    return Size(values, chars, deepest)


def definition_too_large(document: Any) -> str | None:
    """Why a definition sent as data is over the budget validation reads (in words, naming
    the limit and how to fix it), measured without building anything; None if it is not."""
    over = measure(document).over()
    if over is None:
        return None
    return (
        f"the definition holds {over}, over the limit a definition is read within; split its "
        "tools into several definitions"
    )


def apply_patch_within_budget(document: Any, patch: Sequence[Any]) -> Any:
    """``document`` with the JSON Patch (RFC 6902) ``patch`` applied, operation by
    operation, each refused before it is applied if it would put the document over the
    definition's budget (``Size.over``). ``document`` itself is not changed.

    Raises ``PatchRefused`` when the patch holds more than MAX_PATCH_OPERATIONS operations,
    when one is not a JSON Patch operation or cannot be applied (a path that does not exist,
    a failed `test`), or when one would make the document, or all the patch writes, too
    large: the message names the operation, by its index in the patch, and the limit."""
    if not isinstance(patch, Sequence) or isinstance(patch, str | bytes):
        raise PatchRefused(_not_a_patch(f"it is {type(patch).__name__}, not a list"))
    if len(patch) > MAX_PATCH_OPERATIONS:
        raise PatchRefused(
            f"The patch holds {len(patch)} operations; at most {MAX_PATCH_OPERATIONS} are "
            f"applied at once. Send the changes in several updates, {_WHOLE}."
        )
    start = measure(document)
    if start.over() is not None:
        raise PatchRefused(
            f"The definition patched already holds {start.over()}, over the limit; {_WHOLE}."
        )
    state = _Budget(copy.deepcopy(document), start.values, start.chars)
    for index, operation in enumerate(patch):
        state.apply(index, operation)
    return state.document


@dataclass(frozen=True)
class _Change:
    """What one operation does to the size: what it writes (measured no further than the
    budget left, with the depth it reaches) and what it takes away."""

    written: Size
    taken: Size


@dataclass
class _Budget:
    """A document being patched, its size kept up to date operation by operation, and how
    much the patch has written so far."""

    document: Any
    values: int
    chars: int
    written_values: int = 0
    written_chars: int = 0

    def apply(self, index: int, operation: Any) -> None:
        """Apply one operation after checking what it writes; `PatchRefused` says why not."""
        try:
            one = jsonpatch.JsonPatch([operation])
        except (jsonpatch.JsonPatchException, TypeError, ValueError, AttributeError) as exc:
            raise PatchRefused(
                _not_a_patch(f"operation {index} is not one: {_short(exc)}")
            ) from None
        name = f"operation {index} ({operation['op']} {operation.get('path', '')!r})"
        try:
            change = self._change(operation)
        except (JsonPointerException, KeyError, IndexError, TypeError, ValueError):
            change = None  # a path that does not resolve: applying it says why
        if change is not None:
            self._check(name, operation, change)
        try:
            self.document = one.apply(self.document, in_place=True)
        except (jsonpatch.JsonPatchException, JsonPointerException) as exc:
            raise PatchRefused(
                f"The patch cannot be applied: {name}: {_short(exc)}. Paths are JSON Pointers "
                "into the document get_workflow returns (e.g. /tools/0/nodes/1/args/path)."
            ) from None
        except (TypeError, ValueError) as exc:
            raise PatchRefused(_not_a_patch(f"{name}: {_short(exc)}")) from None
        if change is None:
            self._remeasure(name)
            return
        self.values += change.written.values - change.taken.values
        self.chars += change.written.chars - change.taken.chars
        self.written_values += change.written.values
        self.written_chars += change.written.chars

    def _change(self, operation: Mapping[str, Any]) -> _Change:
        """What ``operation`` would write and take away, before it is applied. Raises when
        its paths do not resolve as expected; a `test` changes nothing."""
        kind = operation["op"]
        if kind == "test":
            return _Change(Size(), Size())
        target = JsonPointer(operation["path"])
        if not target.parts:  # the whole document replaced (a remove of it is refused)
            if kind == "remove":
                raise ValueError("the document itself cannot be removed")
            taken, parent, key = Size(self.values, self.chars), None, None
        else:
            parent, key = target.to_last(self.document)
            taken = Size()
        if kind == "remove":
            return _Change(Size(), _entry_size(parent, key))
        if kind in ("add", "replace"):
            value = operation["value"]
        else:  # copy and move: the value at `from`
            value = JsonPointer(operation["from"]).resolve(self.document)
        if isinstance(parent, Mapping):
            # An add over an existing member replaces it; the key's characters go with it.
            if key in parent:
                taken = _entry_size(parent, key)
        elif isinstance(parent, list) and kind == "replace":
            taken = _entry_size(parent, key)
        if kind == "move":  # what it overwrites is not counted off: an overestimate
            source = JsonPointer(operation["from"])
            taken = _entry_size(*source.to_last(self.document))
        key_chars = len(key) if isinstance(parent, Mapping) and isinstance(key, str) else 0
        # Counted from the larger of the document without what is taken and what the patch
        # has written, so that the count stops as soon as either would go over the budget.
        start_values = max(self.values - taken.values, self.written_values)
        start_chars = max(self.chars - taken.chars, self.written_chars) + key_chars
        total = measure(value, depth=len(target.parts) + 1, values=start_values, chars=start_chars)
        # The value's own count, and its key's characters (counted in the start above).
        written = Size(total.values - start_values, total.chars - start_chars + key_chars,
                       total.depth)  # fmt: skip
        return _Change(written, taken)

    def _check(self, name: str, operation: Mapping[str, Any], change: _Change) -> None:
        """Refuse the operation, before it is applied, if what it writes is over budget."""
        written, taken = change.written, change.taken
        if written.depth > MAX_DEPTH:
            raise PatchRefused(
                f"The patch's {name} is refused: it would make the definition nest more than "
                f"{MAX_DEPTH} levels deep (the limit). Write a flatter value, {_WHOLE}."
            )
        after = Size(self.values + written.values - taken.values,
                     self.chars + written.chars - taken.chars)  # fmt: skip
        over = after.over()
        if over is not None:
            what = "it" if operation["op"] != "copy" else f"the value at {operation['from']!r}"
            raise PatchRefused(
                f"The patch's {name} is refused, before it was applied: {what} would make the "
                f"definition hold {over} (the limit; it holds {self.values:,} values and "
                f"{self.chars:,} characters of text now). Write less, {_WHOLE}."
            )
        total = Size(self.written_values + written.values, self.written_chars + written.chars)
        over = total.over()
        if over is not None:
            raise PatchRefused(
                f"The patch's {name} is refused, before it was applied: the patch would write "
                f"{over} in all, more than a whole definition may hold (the limit). Write "
                f"less, {_WHOLE}."
            )

    def _remeasure(self, name: str) -> None:
        """Count the document again after an operation whose change was not known before
        (jsonpatch applied what this module could not resolve); refuse it if over budget."""
        size = measure(self.document)
        over = size.over()
        if over is not None:
            raise PatchRefused(
                f"The patch's {name} is refused: it would make the definition hold {over} (the "
                f"limit). Write less, {_WHOLE}."
            )
        self.written_values += max(0, size.values - self.values)
        self.written_chars += max(0, size.chars - self.chars)
        self.values, self.chars = size.values, size.chars


def _entry_size(parent: Any, key: Any) -> Size:
    """The size of what removing ``parent[key]`` takes away, its key's characters included."""
    size = measure(parent[key])
    key_chars = len(key) if isinstance(parent, Mapping) and isinstance(key, str) else 0
    return Size(size.values, size.chars + key_chars)


def _not_a_patch(why: str) -> str:
    return (
        f"The patch cannot be applied: it is not a JSON Patch (RFC 6902): {why}. Send a list "
        "of operations such as "
        '{"op": "replace", "path": "/tools/0/description", "value": "..."}.'
    )


def _short(exc: BaseException) -> str:
    """An error's text, without the whole document some of jsonpointer's errors quote."""
    text = str(exc).rstrip(".")
    return text if len(text) <= 200 else text[:200] + "…"
