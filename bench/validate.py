"""Benchmark of validate_workflow: `python bench/validate.py [--nodes 50] [--runs 200]`.

Measures one call of `graphs.authoring.validation.validate_workflow` (YAML text in, report out:
reading the YAML, the registry's providers and TOOL specs from the database, every check)
on a definition of `--nodes` nodes: an entry, then groups of an `mcp` node calling a tool of a
registered provider (its specs from the database), a transform building an object from the
tool's output, and a switch on it, then the exit. An API caller; a throwaway SQLite database.

Target (issue 17): under 20 ms p50 for 50 nodes.

The peer, measured in the same run on the same text, is what an import checks today:
`graphs.engine.parse_definition` (YAML, structure, every expression compiled), which knows
no tool schema, data flow or caller. Ratios are ours / peer.

The p99 is set by the interpreter's full garbage collections, which scan every object of
the process (Django's included: about 90 ms each here) and come every hundred calls or so,
to any code that allocates as much; `--gc-freeze` runs `gc.freeze()` first, as a server can
after start-up, which takes its objects out of those scans.

Needs: the project's venv only; a few seconds.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOOLS = {
    "get_file_info": (
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        {
            "type": "object",
            "properties": {"size": {"type": "integer"}, "modified": {"type": "string"}},
        },
    ),
    "read_text_file": (
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "head": {"type": "number"}},
            "required": ["path"],
        },
        None,
    ),
}


def definition(nodes: int) -> dict[str, Any]:
    """A definition of about `nodes` nodes (entry, groups of three, exit)."""
    groups = max(1, (nodes - 2) // 3)
    listed: list[dict[str, Any]] = [{"id": "entry", "type": "entry", "next": "call_0"}]
    for index in range(groups):
        following = f"call_{index + 1}" if index + 1 < groups else "finish"
        tool = "get_file_info" if index % 2 == 0 else "read_text_file"
        args: dict[str, Any] = {"path": "$.entry.directory"}
        if tool == "read_text_file":
            args["head"] = f"$.shape_{index - 1}.lines"
        listed += [
            {
                "id": f"call_{index}",
                "type": "mcp",
                "server": "filesystem",
                "tool": tool,
                "args": args,
                "next": f"shape_{index}",
            },
            {
                "id": f"shape_{index}",
                "type": "transform",
                "transform": {
                    "expr": (
                        f'{{ "lines": $count($split($string($.call_{index}), "\\n")), '
                        f'"big": $.call_{index}.size > 1000, '
                        f'"seen": $executionCount("call_{index}") }}'
                    )
                },
                "next": f"route_{index}",
            },
            {
                "id": f"route_{index}",
                "type": "switch",
                "conditions": [
                    {"rule": {">": [{"var": f"shape_{index}.lines"}, 3]}, "target": following}
                ],
                "default": following,
            },
        ]
    listed[-1]["default"] = listed[-1]["conditions"][0]["target"] = "finish"
    listed += [
        {
            "id": "finish",
            "type": "transform",
            "transform": {"expr": '{ "count": $.shape_0.lines }'},
            "next": "exit",
        },
        {"id": "exit", "type": "exit"},
    ]
    return {
        "version": "1.0",
        "server": {"name": "bench", "version": "1.0.0"},
        "executionLimits": {"maxNodeExecutions": 1000},
        "mcpServers": {"filesystem": {"command": "npx", "args": ["-y", "server-filesystem"]}},
        "tools": [
            {
                "name": "bench_files",
                "description": "Looks at files.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"directory": {"type": "string"}},
                    "required": ["directory"],
                },
                "outputSchema": {"type": "object", "properties": {"count": {"type": "number"}}},
                "nodes": listed,
            }
        ],
    }


def hostile(base: dict[str, Any]) -> dict[str, str]:
    """Definitions made to cost as much as validation lets them, as YAML text."""
    import copy

    import yaml

    cases = {}
    # JSONata up to the total budget, in expressions just under the limit for one, of the
    # slowest form to parse measured (nested conditions).
    costly = copy.deepcopy(base)
    chain = "a ? 1 : " * 1240 + "2"  # 9,921 characters
    nodes = costly["tools"][0]["nodes"]
    route = nodes[-3]  # the last switch, before finish and exit: it now goes to x0
    route["default"] = route["conditions"][0]["target"] = "x0"
    nodes[-2:-2] = [
        {
            "id": f"x{index}",
            "type": "transform",
            "transform": {"expr": chain},
            "next": f"x{index + 1}" if index < 11 else "finish",
        }
        for index in range(12)
    ]
    cases["JSONata at the budget (12 x 9,921 chars)"] = yaml.safe_dump(costly)
    # The most nodes validation reads, in a loop with no way out (every node a problem),
    # and about as many as 1 MB of YAML holds (refused once read).
    for count in (1990, 9000):
        many = copy.deepcopy(base)
        chain_nodes = [
            {"id": f"n{i}", "type": "transform", "transform": {"expr": f"$.n{i - 1}"}}
            for i in range(1, count)
        ]
        for item, following in zip(chain_nodes, [*chain_nodes[1:], chain_nodes[0]], strict=True):
            item["next"] = following["id"]
        many["tools"][0]["nodes"] = [
            {"id": "entry", "type": "entry", "next": "n1"},
            *chain_nodes,
            {"id": "exit", "type": "exit"},
        ]
        many["tools"][0].pop("outputSchema")
        cases[f"{count:,} nodes in a loop"] = yaml.safe_dump(many, width=10_000)
    cases["an alias bomb"] = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}" + f",*{chr(97 + i)}" * 9 + "]\n"
        for i in range(8)
    )
    return cases


def timed(call: Callable[[], Any], runs: int) -> list[float]:
    """Milliseconds of each of `runs` calls, after a few not counted."""
    for _ in range(5):
        call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def percentile(times: list[float], fraction: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50, help="nodes in the definition")
    parser.add_argument("--runs", type=int, default=200, help="calls measured")
    parser.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() the start-up objects first"
    )
    arguments = parser.parse_args()

    database = Path(tempfile.mkdtemp()) / "bench.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import yaml
    from django.core.management import call_command
    from mcp.types import Tool

    from graphs.authoring.validation import validate_workflow
    from graphs.engine import parse_definition
    from nodespecs.callers import Caller
    from nodespecs.models import NodeSpec, Provider
    from nodespecs.providers.tool_specs import tool_document

    call_command("migrate", verbosity=0)
    provider = Provider.objects.create(
        name="filesystem", command="npx", args=["-y", "server-filesystem"]
    )
    for name, (input_schema, output_schema) in TOOLS.items():
        tool = Tool(name=name, input_schema=input_schema, output_schema=output_schema)
        spec = NodeSpec(source=NodeSpec.Source.PROVIDER, provider=provider, provider_tool=name)
        spec.set_document(tool_document(provider="filesystem", provider_title="", tool=tool))
        spec.save()

    document = definition(arguments.nodes)
    count = len(document["tools"][0]["nodes"])
    text = yaml.safe_dump(document, sort_keys=False)
    caller = Caller(actor="api-key:bench")
    report = validate_workflow(text, caller=caller)
    assert report.valid, report.as_dict()  # every check ran to the end, nothing refused
    if arguments.gc_freeze:
        gc.collect()
        gc.freeze()

    ours = timed(lambda: validate_workflow(text, caller=caller), arguments.runs)
    peer = timed(lambda: parse_definition(text), arguments.runs)
    print(
        f"python {sys.version.split()[0]}, {count} nodes, {len(text):,} bytes of YAML, "
        f"{arguments.runs} calls, {len(report.problems)} problem(s) found"
        + (", gc.freeze()" if arguments.gc_freeze else "")
    )
    print(f"{'call':<44} {'p50 ms':>8} {'p99 ms':>8}")
    for label, times in (
        ("validate_workflow (ours)", ours),
        ("parse_definition (peer: import's checks)", peer),
    ):
        print(f"{label:<44} {percentile(times, 0.5):>8.2f} {percentile(times, 0.99):>8.2f}")
    print(f"ours/peer at p50: {statistics.median(ours) / statistics.median(peer):.2f}")
    print(f"\n{'hostile definition':<44} {'bytes':>9} {'ms':>8}  first problem")
    for label, hostile_text in hostile(document).items():
        times = timed(lambda text=hostile_text: validate_workflow(text, caller=caller), 3)
        found = validate_workflow(hostile_text, caller=caller).problems
        first = found[0].code if found else "-"
        print(f"{label:<44} {len(hostile_text):>9,} {statistics.median(times):>8.0f}  {first}")


if __name__ == "__main__":
    main()
