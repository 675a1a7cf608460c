"""Regexes in expressions run on RE2: linear time in the text, whatever the pattern.

Python's ``re`` backtracks: ``/^(a+)+$/`` against 28 "a" and a "!" takes seconds, each two more
characters multiply that by four, and all that time is spent inside one call that holds the
interpreter, so no time bound fires and the whole process stops answering. RE2 (google-re2)
never backtracks; it releases the interpreter while it matches, and it refuses the constructs
that need backtracking (backreferences, lookaround, atomic groups, possessive quantifiers).

What passes through here, read from jsonata-python (0.7) and checked by tests:

- Regex literals, compiled by JSONata's tokenizer when an expression is parsed, and the
  literals of text given to ``$eval``, parsed while the expression runs: both call the
  ``regex_engine`` the expression was parsed with, ``compile_regex`` below. ``$match``,
  ``$contains``, ``$replace``, ``$split`` and calling a regex as a function all use the
  compiled pattern's ``search``/``finditer``/``sub``/``split``.
- ``$toMillis(text, picture)`` turns the picture into a regex of its own, with the picture's
  literal text inserted unescaped: ``install`` makes that module compile on RE2 too.
- ``$formatNumber(n, picture, options)`` puts the option ``exponent-separator`` (and the
  grouping and decimal separators) unescaped into stdlib regexes, one with a lookbehind RE2
  cannot run; those options are single characters in XPath's decimal format, and
  ``format_number`` refuses anything longer, which leaves nothing there to backtrack on.

One RE2 match is linear in the remaining text, but a pattern can match many times (every
"a" of a long text, say), and jsonata-python loops over the matches in Python: ``finditer``
checks the evaluation's time bound between matches, so the bound fires during that loop too.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import re2
from jsonata import datetimeutils
from jsonata.functions import Functions
from jsonata.jsonata import Jsonata
from jsonata.regex_engine import RegexFlags
from jsonschema import _keywords as jsonschema_keywords
from jsonschema import _utils as jsonschema_utils

#: Memory one compiled pattern may use, for its program and its matching caches. RE2's own
#: default is 8 MB; this is enough for any pattern a workflow needs (``\p{L}{50}`` fits) while
#: bounding what many patterns built at run time, each held in re2's cache of 128, can take.
MAX_MEMORY = 2 << 20
#: How much of a refused pattern an error message quotes.
_QUOTED = 60


class RegexNotSupported(ValueError):
    """A pattern RE2 cannot run; the message names the construct and what to write instead."""


class _Bound(threading.local):
    """The time check of the evaluation running in this thread, if any."""

    check: Callable[[], None] | None = None


#: Set by the code that evaluates an expression (``expressions.Expression.evaluate``) around
#: the evaluation: called between the matches of one regex, it raises when time is up.
BOUND = _Bound()


_LOOKAROUND = (
    "RE2 runs in linear time and has no lookaround; match the text around it and keep the "
    "part you need with a group, or test each condition in its own $contains"
)
_BACKREFERENCE = (
    "RE2 runs in linear time and cannot match again what a group captured; capture both "
    "parts with groups and compare them in the expression"
)


def _plain(written: str, instead: str) -> str:
    return (
        f"RE2 never backtracks, so a plain `{instead}` runs in linear time too (it may match "
        f"where `{written}` would not)"
    )


# RE2's error for a construct, as it starts, and that construct in words with what to do.
_CONSTRUCTS: tuple[tuple[str, str, str], ...] = (
    ("invalid perl operator: (?=", "lookahead `(?=`", _LOOKAROUND),
    ("invalid perl operator: (?!", "negative lookahead `(?!`", _LOOKAROUND),
    ("invalid perl operator: (?<=", "lookbehind `(?<=`", _LOOKAROUND),
    ("invalid perl operator: (?<!", "negative lookbehind `(?<!`", _LOOKAROUND),
    ("invalid perl operator: (?>", "atomic group `(?>`", _plain("(?>", "(?:")),
    ("bad repetition operator: ++", "possessive quantifier `++`", _plain("++", "+")),
    ("bad repetition operator: *+", "possessive quantifier `*+`", _plain("*+", "*")),
    ("bad repetition operator: ?+", "possessive quantifier `?+`", _plain("?+", "?")),
    ("invalid escape sequence: \\k", "named backreference `\\k<…>`", _BACKREFERENCE),
    ("invalid escape sequence: \\u", "escape `\\u`", "write a code point as `\\x{00e9}`"),
    ("invalid escape sequence: \\Z", "`\\Z`", "write `\\z` (end of text) or `$`"),
    (
        "invalid repetition size",
        "a repetition count over 1000",
        "RE2 allows {n} up to 1000, counting nested repetitions multiplied",
    ),
    (
        "pattern too large",
        "a pattern this large",
        f"RE2 compiles one pattern in at most {MAX_MEMORY >> 20} MB; make it smaller",
    ),
)
_NUMBERED_BACKREFERENCE = re.compile(r"invalid escape sequence: (\\[1-9])")


def compile_regex(pattern: str, flags: RegexFlags) -> Regex:
    """Compile a JSONata regex on RE2 (the ``regex_engine`` of every parsed expression).

    Flags: ``i`` is case-insensitive, ``m`` makes ``^`` and ``$`` match at line breaks.
    Raises ``RegexNotSupported`` naming the construct RE2 cannot run.
    """
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    options.max_mem = MAX_MEMORY
    options.case_sensitive = not flags.case_insensitive
    source = f"(?m){pattern}" if flags.multiline else pattern
    try:
        return Regex(re2.compile(source, options))
    except re2.error as exc:
        raise RegexNotSupported(_refusal(pattern, exc)) from None


def _refusal(pattern: str, exc: re2.error) -> str:
    """Why RE2 refused a pattern, in words, with what to write instead."""
    reason = exc.args[0] if exc.args else ""
    if isinstance(reason, bytes):  # google-re2 gives RE2's message as bytes
        reason = reason.decode("utf-8", "replace")
    quoted = pattern if len(pattern) <= _QUOTED else pattern[:_QUOTED] + "…"
    numbered = _NUMBERED_BACKREFERENCE.match(reason)
    if numbered:
        return f"regex /{quoted}/: backreference `{numbered[1]}` is not supported: {_BACKREFERENCE}"
    for start, construct, advice in _CONSTRUCTS:
        if reason.startswith(start):
            return f"regex /{quoted}/: {construct} is not supported: {advice}"
    return (
        f"regex /{quoted}/ is not valid RE2 syntax ({reason}); regexes run on RE2, whose "
        "syntax is JavaScript's without backreferences and lookaround"
    )


class Regex:
    """A compiled RE2 pattern with the methods JSONata's functions call on a stdlib pattern."""

    __slots__ = ("_re2",)

    def __init__(self, compiled: Any) -> None:
        self._re2 = compiled

    def search(self, text: str) -> Any:
        """The first match in ``text``, or None."""
        return self._re2.search(text)

    def finditer(self, text: str) -> Iterator[Any]:
        """Every match in ``text``, checking the evaluation's time bound between matches."""
        check = BOUND.check
        for match in self._re2.finditer(text):
            if check is not None:
                check()
            yield match

    def sub(self, repl: str | Callable[[Any], str], text: str, count: int = 0) -> str:
        """``text`` with matches replaced, as ``re.sub``: ``repl`` is a template or a function.

        JSONata turns ``$12`` into ``\\g<12>`` and, when the pattern has fewer groups, retries
        with ``\\g<1>2`` on seeing the stdlib's error; RE2's would differ, so raise that one.
        """
        if isinstance(repl, str):
            for reference in _TEMPLATE_GROUP.finditer(repl):
                if int(reference[1]) > self._re2.groups:
                    raise re.error(
                        f"invalid group reference {reference[1]}", repl, reference.start()
                    )
        pieces = []
        end = 0
        for match in self._matches(text, count):
            pieces.append(text[end : match.start()])
            pieces.append(repl(match) if callable(repl) else match.expand(repl))
            end = match.end()
        pieces.append(text[end:])
        return "".join(pieces)

    def split(self, text: str, maxsplit: int = 0) -> list[str | None]:
        """``text`` split at matches, each match's groups between the parts, as ``re.split``."""
        pieces: list[str | None] = []
        end = 0
        for match in self._matches(text, maxsplit):
            pieces.append(text[end : match.start()])
            pieces.extend(match.groups())
            end = match.end()
        pieces.append(text[end:])
        return pieces

    def _matches(self, text: str, limit: int) -> Iterator[Any]:
        """The first ``limit`` matches (all when 0), as ``re`` counts them for sub and split."""
        for index, match in enumerate(self.finditer(text)):
            if limit and index >= limit:
                return
            yield match


_TEMPLATE_GROUP = re.compile(r"\\g<(\d+)>")


class _PictureRegex:
    """The names jsonata's date-picture parser takes from ``re``, compiling on RE2.

    ``$toMillis(text, picture)`` builds a regex from the picture with its literal text
    unescaped, so a picture such as "(a+)+" is a nested quantifier over the caller's text.
    """

    IGNORECASE = re.IGNORECASE
    split = staticmethod(re.split)  # fixed patterns with no nested repetition: linear

    @staticmethod
    def compile(pattern: str, flags: int = 0) -> Regex:
        return compile_regex(pattern, RegexFlags(case_insensitive=bool(flags & re.IGNORECASE)))

    @staticmethod
    def sub(pattern: Regex, repl: str, text: str) -> str:
        return pattern.sub(repl, text)


# The options of $formatNumber that jsonata-python puts unescaped into regexes.
_SINGLE_CHARACTER_OPTIONS = ("decimal-separator", "grouping-separator", "exponent-separator")


class _Limited:
    """A compiled pattern whose ``sub`` replaces at most ``count`` matches, in one pass."""

    def __init__(self, regex: Regex, count: int) -> None:
        self._regex = regex
        self._count = count

    def sub(self, repl: Any, text: str, count: int = 0) -> str:
        return self._regex.sub(repl, text, self._count)


class _SafeFunctions:
    """Replacements for JSONata functions that would run a pattern built from their arguments,
    or take time quadratic in their input inside one step, where no time bound can fire."""

    @staticmethod
    def format_number(
        value: float | None, picture: str | None, options: Mapping[str, str] | None
    ) -> str | None:
        for name in _SINGLE_CHARACTER_OPTIONS:
            given = (options or {}).get(name)
            if given is not None and (not isinstance(given, str) or len(given) != 1):
                raise ValueError(
                    f"$formatNumber: the option {name} must be one character (as in XPath's "
                    f"decimal format), not {given!r}"
                )
        formatted: str | None = Functions.format_number(value, picture, options)
        return formatted

    @staticmethod
    def replace(string: Any, pattern: Any, replacement: Any, limit: float | None) -> Any:
        """``$replace`` in time linear in ``string``, with jsonata-python's results.

        Its own copies the rest of the text at every literal match (1 MB took minutes), and
        with a ``limit`` on a regex scans the whole text again for each replacement. A literal
        pattern's replacement is worked out by jsonata itself on the pattern alone, then put
        in place by ``str.replace``; a regex with a limit replaces its first ``limit`` matches
        in one pass, as JSONata's reference implementation does.
        """
        if not isinstance(string, str) or (limit is not None and limit < 0):
            return Functions.replace(string, pattern, replacement, limit)  # its errors
        count = -1 if limit is None else math.ceil(limit)
        if isinstance(pattern, str) and pattern:
            if isinstance(replacement, str):
                text = Functions.replace(pattern, pattern, replacement, 1)
                return string.replace(pattern, text, count)
            pieces = string.split(pattern, count)
            joined = [pieces[0]]
            for piece in pieces[1:]:  # a function: called once per match, as before
                joined += [Functions.replace(pattern, pattern, replacement, 1), piece]
            return "".join(joined)
        if isinstance(pattern, Regex) and limit is not None:
            if count == 0:
                return string
            return Functions.safe_replace_all(string, _Limited(pattern, count), replacement)
        return Functions.replace(string, pattern, replacement, limit)


#: Bound on every parsed expression in place of JSONata's own ``$formatNumber``.
FORMAT_NUMBER = Jsonata.function("formatNumber", "<n-so?:s>", _SafeFunctions, "format_number")
#: Bound in place of JSONata's own ``$replace``.
REPLACE = Jsonata.function("replace", "<s-(sf)(sf)n?:s>", _SafeFunctions, "replace")


class _SchemaRegex:
    """The one name jsonschema takes from ``re``, ``search``, matching on RE2.

    A workflow's inputSchema is the author's and the arguments are the caller's, so a
    ``pattern`` of ``^(a+)+$`` would otherwise backtrack over caller text exactly as a JSONata
    literal would; so would a downstream server's outputSchema over its own answer.
    """

    @staticmethod
    def search(pattern: str, text: str) -> Any:
        return _schema_regex(pattern).search(text)


@functools.lru_cache(maxsize=256)
def _schema_regex(pattern: str) -> Regex:
    return compile_regex(pattern, RegexFlags())


def schema_pattern_problems(schema: Any) -> list[str]:
    """Why each ``pattern`` and ``patternProperties`` key of a JSON Schema cannot run on RE2.

    Checked when a definition is saved, so that a schema whose patterns RE2 refuses is
    refused then, naming the construct, rather than failing every call.
    """
    problems = []
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        patterns = []
        if isinstance(node.get("pattern"), str):
            patterns.append(node["pattern"])
        if isinstance(node.get("patternProperties"), Mapping):
            patterns.extend(str(key) for key in node["patternProperties"])
        for pattern in patterns:
            try:
                _schema_regex(pattern)
            except RegexNotSupported as exc:
                problems.append(str(exc))
        pending.extend(node.values())
    return problems


def install() -> None:
    """Make jsonata's date-picture parser and jsonschema's patterns run on RE2 (once per
    process; idempotent).

    Both read ``re`` from their modules' globals. Every jsonata expression in this process is
    the engine's, and every JSON Schema it checks comes from a workflow author or a
    downstream server, so replacing those names takes nothing away that others rely on.
    """
    datetimeutils.re = _PictureRegex
    jsonschema_keywords.re = _SchemaRegex
    jsonschema_utils.re = _SchemaRegex
