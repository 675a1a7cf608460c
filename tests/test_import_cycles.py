"""No product module imports, directly or through others, a module that imports it back: a
circle hidden by an import inside a function or under TYPE_CHECKING counts too (issue 26,
item 4). import-linter's contracts (pyproject.toml) hold the layers; this holds the rest."""

from __future__ import annotations

import grimp
import pytest

pytestmark = pytest.mark.timeout(120)

PRODUCT = ("mcp_endpoint", "graphs", "nodespecs", "config")


def import_circles(packages: tuple[str, ...]) -> list[list[str]]:
    """The groups of `packages`' modules that import each other round (strongly connected
    components of the import graph, by Tarjan's algorithm, iterative)."""
    graph = grimp.build_graph(*packages)
    modules = sorted(m for m in graph.modules if m.split(".")[0] in packages)
    known = set(modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & known)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            step = next(imported, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    following = sorted(graph.find_modules_directly_imported_by(step) & known)
                    work.append((step, iter(following)))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
    return circles


def test_no_product_module_imports_itself_back():
    assert import_circles(PRODUCT) == []


def test_a_circle_is_found_where_there_is_one(tmp_path, monkeypatch):
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from circled import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circled import a\n"
    )
    (package / "c.py").write_text("from circled import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_circles(("circled",)) == [["circled.a", "circled.b"]]
