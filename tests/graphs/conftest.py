"""Fixtures for the workflow tests: graph files imported from tests/graphs/files/."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphs.authoring.files import graph_import
from nodespecs.audit import caller_command

# Test files are imported as an operator would, with manage.py import_graph.
OPERATOR = caller_command("import_graph")

FILES = Path(__file__).parent / "files"


def import_file(name: str, **replacements: str):
    """Import a graph file of tests/graphs/files, with text replaced where asked."""
    text = (FILES / name).read_text()
    for old, new in replacements.items():
        text = text.replace(old, new)
    return graph_import(text=text, base_dir=FILES, caller=OPERATOR)


@pytest.fixture
def loops(db):
    """The loop, switch and falsy-exit workflows (no downstream servers)."""
    return import_file("loops.yaml")
