"""mcpGraph's own examples, never copied here, in both of its file forms:

- nested (`tools[].nodes`): as its npm package mcpgraph 0.1.23 ships them (`examples/`), read
  where `.ci/install-mcp-peers.sh` installed it;
- flat (top-level `nodes`, `tool:` on entry and exit): as its repository held them at commit
  0b871f4, read from MCPGRAPH_FLAT_EXAMPLES, a checkout's `examples/` folder. The registries
  do not carry that form, so without the variable these tests skip, saying how to run them:

      git clone https://github.com/TeamSparkAI/mcpGraph /tmp/mcpGraph
      git -C /tmp/mcpGraph checkout 0b871f4
      export MCPGRAPH_FLAT_EXAMPLES=/tmp/mcpGraph/examples
      .venv/bin/pytest tests/graphs/test_mcpgraph_examples.py

Each imports unchanged through `graph_import`, and the three that need no outside server run,
giving what mcpGraph's own executors give (`dist/execution/nodes/*` of the package): the
expected results below are those mcpGraph 0.1.23 returns for the same arguments."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from graphs.authoring.files import GraphImportReport, graph_import
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Workflow
from tests.graph_files import OPERATOR
from tests.peers import INSTALL_SCRIPT, npm_package_dir

pytestmark = pytest.mark.timeout(30)

# Each example file → its `server.name` (the workflow group) and the tools it defines.
EXAMPLES = {
    "switch_example.yaml": ("switchExample", ["test_switch"]),
    "loop_example.yaml": ("loopExample", ["sum_to_n"]),
    "test_minimal.yaml": ("testMinimal", ["test_tool"]),
    "count_files.yaml": ("fileUtils", ["count_files"]),
}


@pytest.fixture(params=["nested", "flat"])
def examples(request) -> Path:
    """The folder of mcpGraph's examples in one file form (see the module's doc)."""
    if request.param == "nested":
        return npm_package_dir("mcpgraph") / "examples"
    folder = os.environ.get("MCPGRAPH_FLAT_EXAMPLES")
    if not folder:
        pytest.skip("set MCPGRAPH_FLAT_EXAMPLES to mcpGraph's examples/ at commit 0b871f4")
    return Path(folder)


def import_example(folder: Path, name: str) -> GraphImportReport:
    """Import one of mcpGraph's examples, its text unchanged, as `manage.py import_graph`
    would (the operator's caller, the file's folder as base)."""
    path = folder / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `bash {INSTALL_SCRIPT}` to install mcpgraph@0.1.23.")
    return graph_import(text=path.read_text(encoding="utf-8"), base_dir=folder, caller=OPERATOR)


def run(name: str, arguments: Any) -> Any:
    """Run a workflow, assert it succeeded and return its result."""
    outcome = workflow_call(RunRequest(name=name, arguments=arguments))
    assert outcome.succeeded, (outcome.status, outcome.error, outcome.error_node_id)
    return outcome.result


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_imports_unchanged(db, examples, name):
    # count_files is imported only: its filesystem server is started with npx on
    # ./tests/counting, a directory of its author's repository, so it is never run here.
    group, tools = EXAMPLES[name]

    report = import_example(examples, name)

    assert report.group == group
    assert sorted(report.created) == tools
    workflows = Workflow.objects.filter(name__in=tools, group__name=group)
    assert sorted(workflows.values_list("name", flat=True)) == tools


@pytest.mark.parametrize(
    ("value", "result"),
    [
        (11, "high"),
        (10.5, "high"),
        (10, "low"),  # the first rule is `> 10`, so 10 falls to the second, `> 0`
        (1, "low"),
        (0, "zero_or_negative"),  # no rule holds: the condition without one
        (-3, "zero_or_negative"),
    ],
)
def test_switch_example_takes_each_branch(db, examples, value, result):
    import_example(examples, "switch_example.yaml")

    assert run("test_switch", {"value": value}) == {"result": result}


@pytest.mark.parametrize(
    ("n", "total"),
    [
        (1, 1),
        (5, 15),
        (10, 55),
        (100, 5050),  # 202 node executions, within the default limit of 1000
        # The loop's body runs once before its check, so n = 0 sums to 1 as in mcpGraph.
        (0, 1),
    ],
)
def test_loop_example_sums_to_n(db, examples, n, total):
    """exit_sum checks that `$previousNode()` is the switch's output, the target's id: a
    failed check would give `{"sum": 0, "error": ...}`."""
    import_example(examples, "loop_example.yaml")

    assert run("sum_to_n", {"n": n}) == {"sum": total}


@pytest.mark.parametrize("arguments", [{}, {"a": 1}, {"text": "x", "items": [1, "two", None]}])
def test_minimal_example_returns_its_arguments(db, examples, arguments):
    """entry → exit: the exit node gives the entry node's output, the tool's arguments."""
    import_example(examples, "test_minimal.yaml")

    assert run("test_tool", arguments) == arguments
