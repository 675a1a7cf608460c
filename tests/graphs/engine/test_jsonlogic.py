"""Switch rules: standard JSON Logic with JSONata `var` paths, and no way to call Python."""

from __future__ import annotations

import time

import json_logic
import pytest

from graphs.engine import Condition, DefinitionError, GraphRunError, Node, ToolGraph, compile_tool
from graphs.engine.history import RunHistory
from graphs.engine.language.expressions import Guard
from graphs.engine.language.jsonlogic import compile_rule, evaluate
from tests.graphs.engine.helpers import OBJECT, run, tool, transform


def value_of(rule, data=None):
    """Evaluate a rule as a switch would, with the history functions bound."""
    guard = Guard(time.monotonic() + 5)
    guard.start()
    bindings = {**RunHistory().bindings, **guard.bindings}
    return evaluate(
        compile_rule(rule), data, lambda path, scope: path.evaluate(scope, bindings, guard)
    )


DATA = {
    "entry": {
        "n": 3,
        "name": "ada",
        "tags": ["a", "b"],
        "items": [1, 2, 3, 4],
        "zero": 0,
        "none": None,
    }
}


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"==": [{"var": "entry.n"}, 3]}, True),
        ({"===": [{"var": "entry.n"}, "3"]}, False),
        ({"!=": [{"var": "entry.name"}, "bob"]}, True),
        ({"<": [1, {"var": "entry.n"}, 5]}, True),
        ({"and": [{"var": "entry.n"}, {"var": "entry.zero"}]}, 0),
        ({"or": [{"var": "entry.zero"}, "x"]}, "x"),
        ({"!": {"var": "entry.zero"}}, True),
        ({"!!": [{"var": "entry.tags"}]}, True),
        (
            {
                "if": [
                    {">": [{"var": "entry.n"}, 5]},
                    "big",
                    {">": [{"var": "entry.n"}, 1]},
                    "mid",
                    "small",
                ]
            },
            "mid",
        ),
        ({"?:": [False, 1, 2]}, 2),
        ({"in": ["b", {"var": "entry.tags"}]}, True),
        ({"in": ["d", {"var": "entry.name"}]}, True),
        ({"cat": ["hi ", {"var": "entry.name"}]}, "hi ada"),
        ({"substr": [{"var": "entry.name"}, 1]}, "da"),
        ({"+": [{"var": "entry.n"}, 2, "1"]}, 6),
        ({"*": [2, {"var": "entry.n"}]}, 6),
        ({"-": [{"var": "entry.n"}]}, -3),
        ({"/": [9, {"var": "entry.n"}]}, 3),
        ({"%": [7, {"var": "entry.n"}]}, 1),
        ({"max": [1, {"var": "entry.n"}]}, 3),
        ({"merge": [[1], {"var": "entry.tags"}]}, [1, "a", "b"]),
        ({"map": [{"var": "entry.items"}, {"*": [{"var": ""}, 10]}]}, [10, 20, 30, 40]),
        ({"filter": [{"var": "entry.items"}, {">": [{"var": ""}, 2]}]}, [3, 4]),
        (
            {
                "reduce": [
                    {"var": "entry.items"},
                    {"+": [{"var": "accumulator"}, {"var": "current"}]},
                    0,
                ]
            },
            10,
        ),
        ({"all": [{"var": "entry.items"}, {">": [{"var": ""}, 0]}]}, True),
        ({"all": [[], True]}, False),
        ({"some": [{"var": "entry.items"}, {">": [{"var": ""}, 3]}]}, True),
        ({"none": [{"var": "entry.items"}, {">": [{"var": ""}, 9]}]}, True),
        ({"map": [{"var": "entry.nothing"}, 1]}, []),
        ({"missing": ["entry.n", "entry.gone", "entry.zero"]}, ["entry.gone"]),
        ({"missing_some": [1, ["entry.n", "entry.gone"]]}, []),
        ({"missing_some": [2, ["entry.n", "entry.gone"]]}, ["entry.gone"]),
        # var paths are JSONata: functions, predicates, and the history functions
        ({"==": [{"var": "$count(entry.items[$ > 1])"}, 3]}, True),
        ({"==": [{"var": "$executionCount('entry')"}, 0]}, True),
    ],
)
def test_the_standard_operators(rule, expected):
    assert value_of(rule, DATA) == expected


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"var": ["entry.gone", "fallback"]}, "fallback"),
        ({"var": ["entry.n", "fallback"]}, 3),
        ({"var": ["entry.zero", "fallback"]}, 0),  # falsy but present: no default
        ({"var": ["entry.none", {"cat": ["computed ", {"var": "entry.name"}]}]}, "computed ada"),
        ({"var": "entry.gone"}, None),
        ({"var": ""}, DATA),
        ({"var": []}, DATA),
    ],
)
def test_var_with_a_default(rule, expected):
    assert value_of(rule, DATA) == expected


def test_a_var_whose_value_is_an_object_is_data_never_an_operator():
    payload = {"var": "secret"}  # would read `secret` if it were treated as a rule
    data = {"entry": {"payload": payload, "secret": "leaked"}}

    assert value_of({"merge": [{"var": "entry.payload"}]}, data) == [payload]
    assert value_of({"==": [{"var": "entry.payload"}, {"var": "entry.payload"}]}, data) is True
    assert value_of({"!!": {"var": "entry.payload"}}, data) is True

    routed = tool(
        {"id": "entry", "type": "entry", "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "default": "exit",
            "conditions": [{"rule": {"!": [{"var": "entry.flag"}]}, "target": "odd"}],
        },
        transform("odd", '"treated as a rule"', next="exit"),
        {"id": "exit", "type": "exit"},
    )
    # {"!": [{"==": [1, 2]}]} would be true if the flag ran as a rule; as data it is truthy.
    assert run(routed, {"flag": {"==": [1, 2]}}) == "exit"


def test_the_method_operator_cannot_be_used_by_any_rule():
    with pytest.raises(ValueError, match="the `method` operator is disabled"):
        compile_rule({"method": ["abc", "upper"]})
    with pytest.raises(ValueError, match="the `method` operator is disabled"):
        compile_rule({"and": [True, {"method": [{"var": "entry"}, "__class__"]}]})

    sneaky = ToolGraph(
        "t",
        "",
        OBJECT,
        None,
        (
            Node("entry", "entry", next="route"),
            Node(
                "route",
                "switch",
                default="exit",
                conditions=(Condition({"method": ["", "__class__"]}, "exit"),),
            ),
            Node("exit", "exit"),
        ),
    )
    with pytest.raises(DefinitionError, match="`method` operator is disabled"):
        compile_tool(sneaky)


def test_the_library_itself_can_no_longer_call_methods():
    # For any code that calls json-logic-qubit directly: `method` is shadowed, and the
    # shadow's attributes cannot be walked with a dotted operator name.
    with pytest.raises(ValueError, match="disabled"):
        json_logic.jsonLogic({"method": ["abc", "upper"]})
    with pytest.raises(ValueError, match="Unrecognized operation"):
        json_logic.jsonLogic({"method.__class__.__base__.__subclasses__": []})
    assert json_logic.jsonLogic({"==": [1, 1]}) is True


@pytest.mark.parametrize(
    "path",
    ["__class__", "__class__.__base__.__subclasses__", "$.__class__", "entry.__dict__"],
)
def test_var_paths_reach_data_only_never_python_attributes(path):
    assert value_of({"var": path}, DATA) is None


def test_dynamic_var_paths_and_bad_arities_are_refused():
    with pytest.raises(ValueError, match="a path must be a JSONata string"):
        compile_rule({"var": {"cat": ["entry.", "n"]}})
    with pytest.raises(ValueError, match="a path must be a JSONata string"):
        compile_rule({"var": 1})
    with pytest.raises(ValueError, match="`var` takes a path and an optional default"):
        compile_rule({"var": ["a", 1, 2]})
    with pytest.raises(ValueError, match="`map` takes"):
        compile_rule({"map": [[1]]})
    with pytest.raises(ValueError, match="`missing_some` takes"):
        compile_rule({"missing_some": ["a", "b"]})


def test_an_operator_failing_at_run_time_is_an_expression_error_on_the_condition():
    raw = tool(
        {"id": "entry", "type": "entry", "next": "route"},
        {
            "id": "route",
            "type": "switch",
            "default": "exit",
            "conditions": [{"rule": {"/": [1, {"var": "entry.zero"}]}, "target": "exit"}],
        },
        {"id": "exit", "type": "exit"},
    )

    with pytest.raises(GraphRunError) as caught:
        run(raw, {"zero": 0})

    assert caught.value.kind == "expression"
    assert str(caught.value).startswith(
        "node 'route', field 'conditions[0].rule': evaluation failed"
    )
