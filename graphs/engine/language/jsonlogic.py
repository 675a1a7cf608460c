"""JSON Logic for switch conditions, with ``var`` paths evaluated as JSONata.

Rules are compiled once (every ``var`` path parsed, every operator checked) and walked here;
json-logic-qubit supplies only its pure value operators (comparisons, arithmetic, strings,
``merge``), taken by name from an allow-list. Its ``jsonLogic`` function is not used because:

- its ``var`` reads dotted paths, and ours are JSONata with the run's history functions,
  which need per-evaluation state that its global operation table cannot carry safely
  across threads;
- its ``method`` operator lets a plain JSON rule call any Python method of any value (and
  reach ``object.__subclasses__()``); here no operator outside the allow-list exists, and a
  rule naming one is refused when the definition is parsed;
- the reference implementation substitutes ``var`` values into the rule before evaluating
  it, so a value that is an object with one key runs as an operator. Here a ``var``'s value
  is data, always.

For any other code in the process that calls ``json_logic.jsonLogic`` directly, the library's
``method`` is shadowed on import (its ``rm_operation`` cannot remove built-ins).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import json_logic

from graphs.engine.language.expressions import (
    Expression,
    ExpressionSyntaxError,
    ExpressionTooLong,
    ParseBudget,
    RegexRefused,
)


class _MethodDisabled(dict[str, Any]):
    """The shadow of json-logic-qubit's ``method`` operator: calling it fails.

    A dict rather than a function: for a dotted operator such as ``method.__class__`` the
    library walks the attributes of a custom operation that is an object (a function's reach
    ``__globals__`` and ``object.__subclasses__``), but only the items of a dict.
    """

    def __call__(self, *_args: Any) -> Any:
        raise ValueError("the JSON Logic `method` operator is disabled: rules may not call methods")


json_logic.add_operation("method", _MethodDisabled())

# The library's pure functions of values. Not `method`, nor `log` (the engine reports only
# through its observer), nor its non-standard `count`.
_VALUE_OPERATIONS = {
    name: json_logic.operations[name]
    for name in (
        *("==", "===", "!=", "!==", ">", ">=", "<", "<=", "!", "!!"),
        *("+", "-", "*", "/", "%", "min", "max", "cat", "substr", "in", "merge"),
    )
}
_LOGIC = ("if", "?:", "and", "or")
_SCOPED = ("map", "filter", "reduce", "all", "none", "some")
ALLOWED_OPERATORS = sorted(
    [*_VALUE_OPERATIONS, *_LOGIC, *_SCOPED, "var", "missing", "missing_some"]
)
#: Operators of JSON Logic (or of json-logic-qubit) that rules here may not use, and why.
BLOCKED_OPERATORS = {
    "method": "the `method` operator is disabled: rules may not call methods",
    "log": "the `log` operator is not available: rules may not write logs (the run's history "
    "records what each switch chose)",
}
#: Names other rule languages give to JSON Logic's operators: what an unknown one most
#: likely meant (offered as a fix by validation).
OPERATOR_ALIASES = {
    **dict.fromkeys(("eq", "equals", "is"), "=="),
    **dict.fromkeys(("ne", "neq", "not_equals", "<>"), "!="),
    "gt": ">",
    **dict.fromkeys(("gte", "ge"), ">="),
    "lt": "<",
    **dict.fromkeys(("lte", "le"), "<="),
    "not": "!",
    "&&": "and",
    "||": "or",
    "mod": "%",
    **dict.fromkeys(("contains", "includes"), "in"),
    **dict.fromkeys(("concat", "join"), "cat"),
}


def closest_operator(operator: str) -> str | None:
    """The allowed operator an unknown one most likely meant, if any."""
    alias = OPERATOR_ALIASES.get(operator.lower())
    if alias is not None:
        return alias
    close = difflib.get_close_matches(operator, ALLOWED_OPERATORS, n=1, cutoff=0.75)
    return close[0] if close else None


#: How many arguments each value operator takes: (fewest, most or None). The engine calls
#: the library's function with the arguments given, so another count fails the run (a
#: TypeError) or quietly means something else; validation reports it before.
ARITY: dict[str, tuple[int, int | None]] = {
    **{operator: (2, 2) for operator in ("==", "===", "!=", "!==", ">", ">=", "/", "%", "in")},
    **{operator: (2, 3) for operator in ("<", "<=", "substr")},
    **{operator: (1, 1) for operator in ("!", "!!")},
    "-": (1, 2),
    **{operator: (1, None) for operator in ("*", "min", "max")},
}

Keys = tuple[str | int, ...]

#: How a rule reads a ``var``: evaluate the JSONata path against the data in scope.
ReadVar = Callable[[Expression, Any], Any]


class RuleError(ValueError):
    """A rule that cannot be compiled; ``where`` is the position inside the rule in words,
    ``at`` its keys (a JSON Pointer's steps from the rule), ``code`` the kind of problem."""

    def __init__(
        self, where: str, message: str, *, code: str = "rule_invalid", at: Keys = ()
    ) -> None:
        super().__init__(f"{message} (at {where})")
        self.where = where
        self.code = code
        self.at = at


def arity_problem(operator: str, count: int) -> str | None:
    """What is wrong with giving value operator ``operator`` ``count`` arguments, or None."""
    if operator not in ARITY:
        return None
    fewest, most = ARITY[operator]
    if fewest <= count and (most is None or count <= most):
        return None
    wanted = (
        f"{fewest}"
        if fewest == most
        else f"{fewest} or more"
        if most is None
        else f"{fewest} to {most}"
    )
    return f"`{operator}` takes {wanted} argument(s), not {count}"


def compile_rule(rule: Any, *, budget: ParseBudget | None = None) -> Rule:
    """A rule ready to evaluate; RuleError if it is not a JSON Logic object or uses an
    unknown operator, or a ``var`` path that is not JSONata. ``budget`` bounds the length
    of the paths parsed (validation's; an import has none)."""
    if not (isinstance(rule, Mapping) and len(rule) == 1):
        raise RuleError(
            "rule",
            "a rule must be a JSON Logic object with one operator, such as "
            f'{{"==": [{{"var": "entry.kind"}}, "file"]}}; got {rule!r}',
        )
    return _compile(rule, "rule", (), budget)


def evaluate(rule: Rule, data: Any, read_var: ReadVar) -> Any:
    """The value of a compiled rule for this data."""
    return rule.run(data, read_var)


class Rule:
    """A compiled rule or part of one."""

    def run(self, data: Any, read_var: ReadVar) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Literal(Rule):
    value: Any
    at: Keys = field(default=(), compare=False)

    def run(self, data: Any, read_var: ReadVar) -> Any:
        return self.value


@dataclass(frozen=True)
class Array(Rule):
    items: tuple[Rule, ...]
    at: Keys = field(default=(), compare=False)

    def run(self, data: Any, read_var: ReadVar) -> Any:
        return [item.run(data, read_var) for item in self.items]


@dataclass(frozen=True)
class Var(Rule):
    path: Expression | None  # None: the whole data in scope
    default: Rule | None
    # Where the rule writes the path (from the rule), for validation's pointers.
    at: Keys = field(default=(), compare=False)

    def run(self, data: Any, read_var: ReadVar) -> Any:
        value = data if self.path is None else read_var(self.path, data)
        if value is None and self.default is not None:
            return self.default.run(data, read_var)
        return value


@dataclass(frozen=True)
class Missing(Rule):
    paths: tuple[Expression, ...]
    need: int | None  # missing_some: how many must be present; missing: None (all)
    at: tuple[Keys, ...] = field(default=(), compare=False)  # where each path is written

    def run(self, data: Any, read_var: ReadVar) -> Any:
        missing = [path.source for path in self.paths if read_var(path, data) in (None, "")]
        if self.need is not None and len(self.paths) - len(missing) >= self.need:
            return []
        return missing


@dataclass(frozen=True)
class Value(Rule):
    function: Callable[..., Any]
    args: tuple[Rule, ...]
    operator: str = ""
    at: Keys = field(default=(), compare=False)  # the operator's key

    def run(self, data: Any, read_var: ReadVar) -> Any:
        return self.function(*(arg.run(data, read_var) for arg in self.args))


@dataclass(frozen=True)
class Logic(Rule):
    operator: str
    args: tuple[Rule, ...]
    at: Keys = field(default=(), compare=False)

    def run(self, data: Any, read_var: ReadVar) -> Any:
        args = self.args
        if self.operator in ("if", "?:"):
            # Pairs of condition and value, then an optional value for when none held.
            for index in range(0, len(args) - 1, 2):
                if args[index].run(data, read_var):
                    return args[index + 1].run(data, read_var)
            return args[-1].run(data, read_var) if len(args) % 2 else None
        if self.operator == "and":  # the first falsy value, else the last
            value = False
            for arg in args:
                value = arg.run(data, read_var)
                if not value:
                    return value
            return value
        value = False  # or: the first truthy value, else the last
        for arg in args:
            value = arg.run(data, read_var)
            if value:
                return value
        return value


@dataclass(frozen=True)
class Scoped(Rule):
    """Operators that run a rule over each item of an array, with the item as the data."""

    operator: str
    items: Rule
    logic: Rule
    initial: Rule | None
    at: Keys = field(default=(), compare=False)

    def run(self, data: Any, read_var: ReadVar) -> Any:
        items = self.items.run(data, read_var)
        initial = self.initial.run(data, read_var) if self.initial is not None else None
        if not isinstance(items, list):
            items = []  # as JSON Logic: anything but an array counts as an empty one
        if self.operator == "reduce":
            total = initial
            for item in items:
                total = self.logic.run({"accumulator": total, "current": item}, read_var)
            return total
        results = [self.logic.run(item, read_var) for item in items]
        if self.operator == "map":
            return results
        if self.operator == "filter":
            return [item for item, keep in zip(items, results, strict=True) if keep]
        if self.operator == "all":
            return bool(items) and all(results)
        return any(results) if self.operator == "some" else not any(results)


def _compile(rule: Any, where: str, at: Keys, budget: ParseBudget | None) -> Rule:
    if isinstance(rule, list):
        return Array(
            tuple(_compile(item, f"{where}[{i}]", (*at, i), budget) for i, item in enumerate(rule)),
            at,
        )
    if not (isinstance(rule, Mapping) and len(rule) == 1):
        # Scalars, and objects that are not one-operator rules, are data.
        return Literal(rule, at)
    [(operator, raw)] = rule.items()
    where = f"{where}.{operator}"
    at = (*at, operator)
    args = raw if isinstance(raw, list) else [raw]
    # Where each argument is written: an operator given one argument not in a list has it
    # at the operator's own key.
    places = [(*at, i) for i in range(len(args))] if isinstance(raw, list) else [at]
    if operator == "var":
        return _compile_var(args, where, at, places, budget)
    if operator in ("missing", "missing_some"):
        return _compile_missing(operator, raw, args, where, at, budget)
    compiled = tuple(
        _compile(arg, f"{where}[{i}]", place, budget)
        for i, (arg, place) in enumerate(zip(args, places, strict=True))
    )
    if operator in _LOGIC:
        return Logic(operator, compiled, at)
    if operator in _SCOPED:
        if len(compiled) not in ((2, 3) if operator == "reduce" else (2,)):
            raise RuleError(
                where,
                f"`{operator}` takes [array, rule] (reduce: and an initial)",
                code="rule_wrong_arity",
                at=at,
            )
        initial = compiled[2] if len(compiled) == 3 else None
        return Scoped(operator, compiled[0], compiled[1], initial, at)
    if operator in _VALUE_OPERATIONS:
        return Value(_VALUE_OPERATIONS[operator], compiled, operator, at)
    if operator in BLOCKED_OPERATORS:
        raise RuleError(
            where,
            f"{BLOCKED_OPERATORS[operator]}; operators: {' '.join(ALLOWED_OPERATORS)}",
            code="rule_blocked_operator",
            at=at,
        )
    raise RuleError(
        where,
        f"unknown operator {operator!r}; operators: {' '.join(ALLOWED_OPERATORS)}",
        code="rule_unknown_operator",
        at=at,
    )


def _compile_var(
    args: list[Any], where: str, at: Keys, places: list[Keys], budget: ParseBudget | None
) -> Rule:
    if len(args) > 2:
        raise RuleError(
            where,
            "`var` takes a path and an optional default: [path, default]",
            code="rule_wrong_arity",
            at=at,
        )
    path = args[0] if args else None
    default = _compile(args[1], f"{where}[1]", places[1], budget) if len(args) == 2 else None
    if path in (None, ""):
        return Var(None, default, at)
    return Var(_path(path, where, places[0], budget), default, places[0])


def _compile_missing(
    operator: str, raw: Any, args: list[Any], where: str, at: Keys, budget: ParseBudget | None
) -> Rule:
    need = None
    places: list[Keys]
    if operator == "missing_some":
        if len(args) != 2 or not isinstance(args[0], int) or not isinstance(args[1], list):
            raise RuleError(
                where,
                "`missing_some` takes [how many are needed, [paths]]",
                code="rule_wrong_arity",
                at=at,
            )
        need, args = args[0], args[1]
        places = [(*at, 1, i) for i in range(len(args))]
    elif len(args) == 1 and isinstance(args[0], list):
        args = args[0]
        places = [(*at, 0, i) for i in range(len(args))]
    else:
        places = [(*at, i) for i in range(len(args))] if isinstance(raw, list) else [at]
    return Missing(
        tuple(_path(path, where, place, budget) for path, place in zip(args, places, strict=True)),
        need,
        tuple(places),
    )


def _path(path: Any, where: str, at: Keys, budget: ParseBudget | None) -> Expression:
    """A ``var``/``missing`` path, which must be JSONata text written in the rule."""
    if not isinstance(path, str):
        raise RuleError(
            where,
            f'a path must be a JSONata string such as "entry.count", "entry.items[0]" or '
            f'"$previousNode().count"; got {path!r}',
            code="rule_invalid_path",
            at=at,
        )
    try:
        return Expression(path, budget=budget)
    except RegexRefused as exc:  # JSONata, but with a regex RE2 cannot run
        raise RuleError(where, f"the path {path!r}: {exc}", code="regex_refused", at=at) from None
    except ExpressionTooLong as exc:
        raise RuleError(where, str(exc), code="expression_too_long", at=at) from None
    except ExpressionSyntaxError as exc:
        raise RuleError(
            where,
            f"the path {path!r} is not JSONata ({exc}); paths are JSONata, as in "
            '"entry.items[0]" rather than "entry.items.0"',
            code="expression_syntax",
            at=at,
        ) from None
