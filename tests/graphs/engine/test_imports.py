"""The engine stays plain Python: it imports only the standard library and its libraries
(re2 runs its regexes in linear time, jsonschema checks a workflow's schemas on it, with a
registry of referencing, jsonschema's own library, that fetches nothing)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import graphs.engine

ALLOWED = {"mcp", "jsonata", "json_logic", "yaml", "re2", "jsonschema", "referencing", "graphs"}


def test_the_engine_imports_nothing_but_the_standard_library_and_its_libraries():
    imported = set()
    for path in Path(graphs.engine.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {(path.name, alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add((path.name, node.module))

    outside = {
        (module, name)
        for module, name in imported
        if name.split(".")[0] not in ALLOWED | sys.stdlib_module_names
        or (name.startswith("graphs.") and not name.startswith("graphs.engine"))
    }
    assert outside == set()
