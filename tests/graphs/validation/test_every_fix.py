"""No fix makes another problem (issue 25, item 3): on a corpus of broken drafts, one or more
for each problem code the validator offers a fix for, every fix offered is applied on its
own and the result validated again; the problem it fixed is gone and no problem is there
that was not there before. (The switch_no_default fix once added `default: exit` under an
object outputSchema, and validating again found that a run taking it returns "exit".)

Each draft is seed 003's count_files (or a loop without an outputSchema) with one thing
broken, tried in both file forms."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jsonpatch
import pytest

from graphs.engine.checks.all_checks import LimitCeiling
from graphs.engine.checks.problems import Problem
from tests.graphs.validation.helpers import COUNT, count_files, flat, node, nodes, validate

Draft = tuple[dict[str, Any], dict[str, Any]]  # a definition, and validate's options


def _tool(document: dict[str, Any]) -> dict[str, Any]:
    return document["tools"][0]


def _count(expr: str) -> Draft:
    """count_files whose transform before the exit is ``expr``."""
    document = count_files()
    node(document, "count_files_node")["transform"]["expr"] = expr
    return document, {}


def _calling(tool: str, args: dict[str, Any], expr: str = COUNT) -> Draft:
    """count_files whose mcp node calls the filesystem's ``tool`` with ``args``."""
    document, options = _count(expr)
    call = node(document, "list_directory_node")
    call["tool"], call["args"] = tool, args
    return document, options


def _changed(change: Callable[[dict[str, Any]], Any]) -> Draft:
    document = count_files()
    change(document)
    return document, {}


def _loop(*, way_out: bool, output_schema: dict[str, Any] | None = None) -> Draft:
    """A counter looping through a switch without a default, and no mcp node: its second
    condition leads to the exit (`way_out`), or nothing does (an entry switch reaches the
    exit then)."""
    document = count_files()
    del document["mcpServers"]
    tool = _tool(document)
    del tool["outputSchema"]
    if output_schema is not None:
        tool["outputSchema"] = output_schema
    again = {"rule": {"<": [{"var": "$executionCount('step')"}, 3]}, "target": "step"}
    out = {"rule": {">=": [{"var": "$executionCount('step')"}, 3]}, "target": "done"}
    tool["nodes"] = [
        {"id": "entry", "type": "entry", "next": "step" if way_out else "route"},
        {"id": "step", "type": "transform", "transform": {"expr": "{}"}, "next": "check"},
        {"id": "check", "type": "switch", "conditions": [again, out] if way_out else [again]},
        {"id": "done", "type": "transform", "transform": {"expr": "{}"}, "next": "exit"},
        {"id": "exit", "type": "exit"},
    ]
    if not way_out:
        route = {"rule": {"var": "entry.directory"}, "target": "step"}
        tool["nodes"].insert(
            1, {"id": "route", "type": "switch", "conditions": [route], "default": "done"}
        )
    return document, {}


def _routed(rule: Any) -> Draft:
    """count_files with a switch between its transform and a copy of it before the exit."""
    document = count_files()
    node(document, "count_files_node")["next"] = "route"
    nodes(document)[3:3] = [
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"rule": rule, "target": "done"}],
            "default": "done",
        },
        {
            "id": "done",
            "type": "transform",
            "transform": {"expr": "$.count_files_node"},
            "next": "exit",
        },
    ]
    return document, {}


def _limits(written: dict[str, Any] | None) -> Draft:
    document = count_files()
    if written is None:
        del document["executionLimits"]
    else:
        document["executionLimits"] = written
    return document, {"ceilings": [LimitCeiling("maxNodeExecutions", 500, "CEILING")]}


def _required_count(expr: str) -> Draft:
    document, options = _count(expr)
    _tool(document)["outputSchema"]["required"] = ["count"]
    return document, options


# problem code -> the drafts that have it, by what is broken.
CORPUS: dict[str, dict[str, Callable[[], Draft]]] = {
    "invalid_schema": {
        "no inputSchema": lambda: _changed(lambda d: _tool(d).pop("inputSchema")),
        "an outputSchema without its type": lambda: _changed(
            lambda d: _tool(d)["outputSchema"].pop("type")
        ),
    },
    "missing_field": {
        "no version": lambda: _changed(lambda d: d.pop("version")),
        "no server version": lambda: _changed(lambda d: d["server"].pop("version")),
    },
    "unknown_key": {
        "a misspelt key": lambda: _changed(
            lambda d: _tool(d).update(descripton=_tool(d).pop("description"))
        ),
        "a key of no use": lambda: _changed(lambda d: node(d, "exit").update(colour="red")),
    },
    "invalid_tool_name": {
        "a space": lambda: _changed(lambda d: _tool(d).update(name="count files"))
    },
    "invalid_node_id": {
        "a hyphen": lambda: _changed(
            lambda d: (
                node(d, "count_files_node").update(id="count-files"),
                node(d, "list_directory_node").update(next="count-files"),
            )
        )
    },
    "unknown_node_type": {
        "a misspelt type": lambda: _changed(lambda d: node(d, "exit").update(type="exti"))
    },
    "unknown_target": {
        "a misspelt target": lambda: _changed(
            lambda d: node(d, "count_files_node").update(next="exti")
        )
    },
    "exit_count": {"no exit node": lambda: _changed(lambda d: nodes(d).pop())},
    "rule_unknown_operator": {"eq": lambda: _routed({"eq": [{"var": "entry.directory"}, "/"]})},
    "unknown_server": {
        "a misspelt server": lambda: _changed(
            lambda d: node(d, "list_directory_node").update(server="filesystm")
        )
    },
    "unknown_tool": {
        "a misspelt tool": lambda: _calling("list_directry", {"path": "$.entry.directory"}),
        "its node spec's name": lambda: _calling(
            "mcp-filesystem-list_directory", {"path": "$.entry.directory"}
        ),
    },
    "arg_unknown": {
        "a misspelt argument": lambda: _calling("list_directory", {"pth": "$.entry.directory"}),
        "an argument of no use": lambda: _calling(
            "list_directory", {"path": "$.entry.directory", "depth": 2}
        ),
    },
    "arg_missing": {
        "one the entry has": lambda: _changed(
            lambda d: (
                _tool(d)["inputSchema"].update(properties={"path": {"type": "string"}}),
                _tool(d)["inputSchema"].update(required=["path"]),
                node(d, "list_directory_node").update(args={}),
            )
        )
    },
    "arg_wrong_type": {
        "a number as text": lambda: _calling(
            "read_text_file", {"path": "$.entry.directory", "head": "10"}
        )
    },
    "history_node_unknown": {
        "a misspelt node": lambda: _count('{ "count": $executionCount("list_directory_nod") }')
    },
    "node_reference_unknown": {
        "a misspelt node": lambda: _count(
            COUNT.replace("list_directory_node", "list_directory_nod")
        )
    },
    "field_not_produced": {
        "a misspelt field": lambda: _calling(
            "get_file_info",
            {"path": "$.entry.directory"},
            '{ "count": $.list_directory_node.sise }',
        )
    },
    "exit_output_mismatch": {
        "a misspelt required property": lambda: _required_count('{ "cuont": 1 }'),
        "a misspelt property": lambda: _count('{ "cuont": 1 }'),
        "one misspelt of two": lambda: _changed(
            lambda d: (
                _tool(d)["outputSchema"]["properties"].update(files={"type": "array"}),
                node(d, "count_files_node")["transform"].update(expr='{ "cont": 1, "files": [] }'),
            )
        ),
    },
    "no_path_to_exit": {"a loop with no way out": lambda: _loop(way_out=False)},
    "switch_no_default": {
        "no outputSchema": lambda: _loop(way_out=True),
        "an outputSchema holding a text result": lambda: _loop(
            way_out=True,
            output_schema={"type": "object", "properties": {"result": {"type": "string"}}},
        ),
        # A switch's output is its target's id: with `default: exit`, a run where no
        # condition holds would return the text "exit", which this schema cannot hold.
        "an object outputSchema": lambda: _loop(
            way_out=True, output_schema={"type": "object", "properties": {"count": {}}}
        ),
    },
    "limit_above_ceiling": {
        "written": lambda: _limits({"maxNodeExecutions": 1000}),
        "by default": lambda: _limits(None),
        "beside another": lambda: _limits({"maxExecutionTimeMs": 1000}),
    },
}
DRAFTS = [(code, what) for code, drafts in CORPUS.items() for what in drafts]
# The drafts whose problem is offered no fix, as any would make another problem.
WITHHELD = {("switch_no_default", "an object outputSchema")}


def _keys(problems: list[Problem]) -> set[tuple[str, str]]:
    return {(problem.code, problem.path) for problem in problems}


@pytest.mark.parametrize("form", ["nested", "flat"])
@pytest.mark.parametrize(("code", "what"), DRAFTS)
def test_every_fix_offered_removes_its_problem_and_makes_no_other(code, what, form):
    document, options = CORPUS[code][what]()
    if form == "flat":
        document = flat(document)
    before = validate(document, **options)
    offered = [problem for problem in before if problem.fix is not None]

    assert code in {problem.code for problem in before}, [p.as_dict() for p in before]
    if form == "nested":  # the flat form may drop a fix it cannot rewrite
        withheld = (code, what) in WITHHELD
        assert (code in {problem.code for problem in offered}) is not withheld
    for problem in offered:
        patched = jsonpatch.apply_patch(copy.deepcopy(document), problem.fix)
        after = validate(patched, **options)
        assert (problem.code, problem.path) not in _keys(after), problem.as_dict()
        made = [p.as_dict() for p in after if (p.code, p.path) not in _keys(before)]
        assert made == [], (problem.as_dict(), made)
