"""The graph files of tests/graphs/files/, imported as an operator would (manage.py
import_graph): one helper for every suite."""

from __future__ import annotations

from pathlib import Path

from graphs.authoring.files import graph_import
from nodespecs.callers import caller_command

OPERATOR = caller_command("import_graph")

FILES = Path(__file__).parent / "graphs" / "files"


def import_file(name: str, **replacements: str):
    """Import a graph file of tests/graphs/files, with text replaced where asked."""
    text = (FILES / name).read_text()
    for old, new in replacements.items():
        text = text.replace(old, new)
    return graph_import(text=text, base_dir=FILES, caller=OPERATOR)
