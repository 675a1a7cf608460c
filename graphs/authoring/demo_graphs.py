"""The demo workflows `manage.py setup_demo` leaves, so that a first start has workflows
to call: a loop and a switch in JSONata and JSON Logic (`example_graphs/demo.yaml`), and seed
003's `count_files` as the seed writes it (`example_graphs/count_files.yaml`), imported
beside a folder of a few files that its filesystem server is started on. Running it again
changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graphs.authoring.files import graph_import
from nodespecs.callers import caller_command

DEMO_GRAPHS = Path(__file__).resolve().parent.parent / "example_graphs"
# The folder seed 003's count_files names, relative to its file: "./tests/counting".
COUNTED = Path("tests") / "counting"
COUNTED_FILES = {
    "notes.txt": "Things to remember.\n",
    "todo.md": "- call count_files\n",
    "data.csv": "name,count\nfiles,3\n",
}


@dataclass(frozen=True)
class DemoGraphsInstalled:
    """What `demo_graphs_install` left: a summary line per graph file, and the folder
    count_files counts."""

    summaries: list[str]
    counted: Path


def demo_graphs_install(data_dir: Path) -> DemoGraphsInstalled:
    """Import the demo graphs (published at once, for an operator's command) and create
    `data_dir`/tests/counting with a few files, missing ones only; count_files's server is
    started in `data_dir`, so that the seed's relative folder is that one."""
    counted = (data_dir / COUNTED).resolve()
    counted.mkdir(parents=True, exist_ok=True)
    for name, text in COUNTED_FILES.items():
        if not (counted / name).exists():
            (counted / name).write_text(text, encoding="utf-8")
    caller = caller_command("setup_demo")
    files = [("demo.yaml", None), ("count_files.yaml", data_dir.resolve())]
    summaries = [
        graph_import(
            text=(DEMO_GRAPHS / name).read_text(encoding="utf-8"), base_dir=base_dir, caller=caller
        ).summary()
        for name, base_dir in files
    ]
    return DemoGraphsInstalled(summaries=summaries, counted=counted)
