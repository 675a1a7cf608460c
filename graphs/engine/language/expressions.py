"""JSONata expressions: parsed once, evaluated by many runs in many threads, always bounded.

What jsonata-python (0.7) does, read from its source and checked by tests here:

- A parsed ``Jsonata`` object is not safe to share between threads. ``evaluate`` keeps its
  scratch state on a per-thread instance, but that instance is a shallow copy of whichever
  expression the thread first touched, sharing that expression's parser with the thread
  that built it; partial application (``$substring(?, 0, 3)``) parses with it, and two threads
  then corrupt each other's parse. So each thread parses its own copy of an expression, once,
  and keeps it (``Expression`` below).
- Functions registered on a parsed expression (``register_function``) live on that object and
  would be seen by every run sharing it. Run state (the history functions) is passed instead
  as bindings of one evaluation, which go into a fresh frame.
- Its built-in time and depth bound (``Jsonata(expr, timeout=, stack=)``) is not usable on a
  parsed-once expression: the clock starts when the expression is parsed, not evaluated, and
  the depth counter is shared by every evaluation. The same hooks it uses
  (``__evaluate_entry``/``__evaluate_exit`` looked up in the environment) are passed as bindings
  with a per-run ``Guard`` instead.
- ``$now()``/``$millis()`` read the timestamp of the thread's "current" instance, not of the
  expression being evaluated; the current instance is set before each evaluation so they
  return the evaluation's time.
- Input validation walks the whole input on every evaluation; it is turned off, since the
  context only ever holds JSON (tool arguments, tool results, expression results).
- A plain path through objects (``$.step.count``, ``entry.n``: most switch rules and args)
  is read directly, at a twentieth of an evaluation's cost, with JSONata's result; anything
  its rules make subtle (an array on the way or at the end, a keyword) goes to JSONata.
- Every regex runs on RE2, in linear time (``regex``): literals when the expression is parsed,
  so a pattern RE2 cannot run is refused with the workflow; patterns parsed by ``$eval`` while
  it runs, which fail the evaluation with the same message.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from jsonata import Jsonata
from jsonata.functions import Functions
from jsonata.jexception import JException
from jsonata.utils import Utils

from graphs.engine.language import regex

regex.install()

#: Longest one field of one node may evaluate (a transform, a switch, an mcp node's args).
TIME_LIMIT_MS = 5000
#: Deepest nesting of evaluation: about 300 levels of a recursive JSONata function. Each level
#: costs several Python frames; this stays well inside the interpreter's recursion limit.
DEPTH_LIMIT = 1000
#: Longest text and largest array or object one step of an expression may produce. A string
#: doubled in a recursive function reached 1 GB in 3 s, under the time bound; these bound
#: what each step can build on what the steps before it built.
VALUE_CHARACTERS_LIMIT = 10_000_000
VALUE_ITEMS_LIMIT = 1_000_000


_PLAIN_PATH = re.compile(r"\s*(?:\$\.)?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*", re.ASCII)
_KEYWORDS = frozenset({"and", "or", "in", "true", "false", "null"})
_NOT_PLAIN = object()  # a plain path met something only JSONata answers exactly


def _plain_path(source: str) -> tuple[str, ...] | None:
    """The keys of a plain object path such as `$.step.count`, else None."""
    match = _PLAIN_PATH.fullmatch(source)
    if match is None:
        return None
    keys = tuple(match.group(1).split("."))
    return None if _KEYWORDS.intersection(keys) else keys


def _read_path(data: Any, keys: tuple[str, ...], undefined: Any) -> Any:
    """What JSONata gives for a plain path through objects, or _NOT_PLAIN."""
    for key in keys:
        if isinstance(data, list):
            return _NOT_PLAIN  # JSONata maps the rest of the path over the array
        if not isinstance(data, dict) or key not in data:
            return undefined
        data = data[key]
    if isinstance(data, list):
        return _NOT_PLAIN  # JSONata's sequence rules decide how an array comes back
    return to_plain(data) if isinstance(data, dict) else data


class ExpressionSyntaxError(ValueError):
    """JSONata text that does not parse, or that holds a regex RE2 cannot run."""


class RegexRefused(ExpressionSyntaxError):
    """An expression with a regex RE2 cannot run; the message names the construct."""


class ExpressionTooLong(ExpressionSyntaxError):
    """An expression over its ``ParseBudget``: not parsed at all."""


class ParseBudget:
    """How much JSONata text one check may parse: each expression and all of them together.

    Parsing costs a few microseconds per character, and a path's steps cost in proportion to
    the square of their number (4,000 steps: 0.4 s), so a caller who may only read
    (validate_workflow) must not make the server parse a megabyte of it. Imports, by staff
    and operators, have no budget.
    """

    def __init__(self, per_expression: int, total: int, steps: int) -> None:
        self.per_expression = per_expression
        self.left = total
        self.steps = steps

    def take(self, source: str) -> None:
        """Count ``source`` against the budget; ExpressionTooLong when it is over."""
        if len(source) > self.per_expression:
            raise ExpressionTooLong(
                f"the expression is {len(source):,} characters long, over the limit of "
                f"{self.per_expression:,}; split the work over several transform nodes"
            )
        # The parser joins each step of a path to all the steps before it: time grows with
        # the square of a path's length (4,000 steps took 0.4 s). Every `.` counts, even in
        # a string, which only errs on the safe side.
        if source.count(".") > self.steps:
            raise ExpressionTooLong(
                f"the expression has {source.count('.'):,} `.` path steps, over the limit of "
                f"{self.steps:,}; split it with variables or over several transform nodes"
            )
        if len(source) > self.left:
            raise ExpressionTooLong(
                "the definition's expressions are longer together than this check parses "
                "(over the limit of characters of JSONata for one definition); split the "
                "tools into several definitions"
            )
        self.left -= len(source)


class ExpressionError(Exception):
    """An evaluation that failed; the message is JSONata's or the engine's reason."""

    #: The field of the node being evaluated, when the code that knows it has set it.
    field: str | None = None


class ExpressionTimeout(ExpressionError):
    """An evaluation stopped by its time bound; ``run_deadline`` if the run's limit was first."""

    def __init__(self, message: str, *, run_deadline: bool) -> None:
        super().__init__(message)
        self.run_deadline = run_deadline


class Guard:
    """The time and depth bound of one run's evaluations.

    A run evaluates one field at a time, so one guard per run suffices: ``start`` before each
    field, and the bound covers every expression evaluated for that field.
    """

    def __init__(self, run_deadline: float) -> None:
        self.run_deadline = run_deadline  # time.monotonic() at which the run's time is up
        self.deadline = run_deadline
        self.depth = 0
        self.tripped: ExpressionError | None = None  # the bound hit, even if JSONata wrapped it
        # As bindings, so JSONata calls them around every step of the evaluation.
        self.bindings = {"__evaluate_entry": self._enter, "__evaluate_exit": self._leave}

    def start(self) -> None:
        """Begin the bound for one field: TIME_LIMIT_MS from now, or the run's end if sooner."""
        self.depth = 0
        self.tripped = None
        self.deadline = min(time.monotonic() + TIME_LIMIT_MS / 1000, self.run_deadline)

    # The library's own bound skips steps flagged "parallel", but the flag is left set on the
    # environment after an array constructor, so entries and exits stop pairing up and the
    # depth drifts upward across a loop. Evaluation here is sequential: count every step.
    def _enter(self, _expr: Any, _input: Any, _env: Any) -> None:
        self.depth += 1
        if self.depth > DEPTH_LIMIT:
            self.tripped = ExpressionError(
                f"the expression nests deeper than {DEPTH_LIMIT} steps; look for a recursive "
                "function that never reaches its base case"
            )
            raise self.tripped
        if time.monotonic() > self.deadline:
            self._time_up()

    def check_time(self) -> None:
        """Raise the time bound's error if the field's time is up (between a regex's matches)."""
        if time.monotonic() > self.deadline:
            self._time_up()

    def _time_up(self) -> None:
        hit_run = self.deadline >= self.run_deadline
        self.tripped = ExpressionTimeout(
            "the run's time limit was reached during the expression"
            if hit_run
            else f"the expression ran longer than {TIME_LIMIT_MS} ms; look for a loop "
            "that does not end or work over much more data than expected",
            run_deadline=hit_run,
        )
        raise self.tripped

    def _leave(self, _expr: Any, _input: Any, _env: Any, result: Any) -> None:
        self.depth -= 1
        if isinstance(result, str) and len(result) > VALUE_CHARACTERS_LIMIT:
            self.tripped = ExpressionError(
                f"the expression built a text of {len(result):,} characters, over the limit of "
                f"{VALUE_CHARACTERS_LIMIT:,}; look for text joined or doubled without end"
            )
            raise self.tripped
        if isinstance(result, list | dict) and len(result) > VALUE_ITEMS_LIMIT:
            self.tripped = ExpressionError(
                f"the expression built an array or object of {len(result):,} items, over the "
                f"limit of {VALUE_ITEMS_LIMIT:,}; ask for a smaller range or less data"
            )
            raise self.tripped


class Expression:
    """One JSONata expression: checked once, then parsed lazily once per thread that uses it."""

    __slots__ = ("_local", "_path", "source")

    def __init__(self, source: str, *, budget: ParseBudget | None = None) -> None:
        if budget is not None:
            budget.take(source)
        self.source = source
        self._local = threading.local()
        self._local.jsonata = _parse(source)  # raises ExpressionSyntaxError
        self._path = _plain_path(source)

    @property
    def ast(self) -> Any:
        """The parsed syntax tree (jsonata-python's ``Parser.Symbol``), to be read, never
        changed: validation reads references and shapes from it."""
        instance = getattr(self._local, "jsonata", None)
        if instance is None:
            instance = self._local.jsonata = _parse(self.source)
        return instance.ast

    def evaluate(
        self, data: Any, bindings: Mapping[str, Any], guard: Guard, *, undefined: Any = None
    ) -> Any:
        """The expression's value for this data, as plain JSON; ``undefined`` if it has none.

        ``bindings`` are the run's functions (and ``guard.bindings``); ``guard`` must have been
        started for the field being evaluated.
        """
        if self._path is not None:
            value = _read_path(data, self._path, undefined)
            if value is not _NOT_PLAIN:
                return value
        instance = getattr(self._local, "jsonata", None)
        if instance is None:
            instance = self._local.jsonata = _parse(self.source)
        Jsonata.CURRENT.jsonata = instance  # so $now() and $millis() read this evaluation's time
        outer_check, regex.BOUND.check = regex.BOUND.check, guard.check_time
        try:
            result = instance.evaluate(data, bindings)
        except ExpressionError:
            raise
        except RecursionError:
            raise ExpressionError(
                "the expression recursed too deeply; look for a recursive function that "
                "never reaches its base case"
            ) from None
        except Exception as exc:  # JSONata errors, and errors of the functions it called
            if guard.tripped is not None:  # $eval reports any failure as its own error
                raise guard.tripped from exc
            refused = _regex_refusal(exc)  # a pattern given to $eval, under $eval's error
            raise ExpressionError(str(refused or _message(exc))) from exc
        finally:
            regex.BOUND.check = outer_check
        if result is None:  # JSONata's "undefined": no value (JSON null is Utils.NULL_VALUE)
            return undefined
        return to_plain(result)


def to_plain(value: Any) -> Any:
    """A JSONata result as plain JSON values: its list subclasses and null marker replaced.

    Builds new containers rather than converting in place (as the library would), since a
    result can share objects with the run's context.
    """
    if value is Utils.NULL_VALUE:
        return None
    if isinstance(value, dict):
        return {key: to_plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_plain(item) for item in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise ExpressionError(
        f"the expression returned a {type(value).__name__} (a function?), not JSON data; "
        "call the function, or return an object, array, string, number, boolean or null"
    )


class _BoundedFunctions:
    """JSONata functions that would build a value past the limits in one step, checked first."""

    @staticmethod
    def join(strings: list[str] | None, separator: str | None) -> str | None:
        """``$join``, refusing a result over VALUE_CHARACTERS_LIMIT before building it: the
        same long text repeated in a large array would need terabytes at once."""
        if strings is not None:
            size = sum(len(text) for text in strings if isinstance(text, str))
            size += len(separator or "") * max(len(strings) - 1, 0)
            if size > VALUE_CHARACTERS_LIMIT:
                raise ExpressionError(
                    f"$join would build a text of {size:,} characters, over the limit of "
                    f"{VALUE_CHARACTERS_LIMIT:,}; join fewer or shorter texts"
                )
        joined: str | None = Functions.join(strings, separator)
        return joined


_JOIN = Jsonata.function("join", "<a<s>s?:s>", _BoundedFunctions, "join")


def _parse(source: str) -> Jsonata:
    try:
        instance = Jsonata(source, regex.compile_regex)
    except regex.RegexNotSupported as exc:
        raise RegexRefused(str(exc)) from None
    except JException as exc:
        raise ExpressionSyntaxError(_message(exc)) from None
    except RecursionError:
        # The parser recurses once per nesting level and operator of a chain: thousands of
        # brackets or `1+1+...` exhaust the stack, which is a property of the text.
        raise ExpressionSyntaxError(
            "the expression nests too deeply (or chains too many operators) to be parsed; "
            "split it with variables ($x := ...; ...) or over several nodes"
        ) from None
    # Its own $formatNumber would run a stdlib regex built from the caller's options.
    instance.register_function("formatNumber", regex.FORMAT_NUMBER)
    # Its own $replace is quadratic in the text, inside one step no time bound interrupts.
    instance.register_function("replace", regex.REPLACE)
    instance.register_function("join", _JOIN)
    instance.set_validate_input(False)
    instance.set_output_convert_nulls(False)  # to_plain converts, without mutating the input
    return instance


def _regex_refusal(exc: BaseException) -> regex.RegexNotSupported | None:
    """The refused pattern behind an error, if any: $eval raises its own in its place."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, regex.RegexNotSupported):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _message(exc: Exception) -> str:
    """A JSONata error as text, with the position of a syntax error when it has one."""
    message = str(exc) or type(exc).__name__
    location = getattr(exc, "location", -1)
    if isinstance(exc, JException) and isinstance(location, int) and location > 0:
        return f"{message} (at character {location})"
    return message
