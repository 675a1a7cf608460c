"""What the canvas editor of a workflow reads as its author works (graphs/admin/canvas.py):
the workflow's document and versions, a definition checked as it changes, the tools a node
can call, and the difference between two versions.

The editor edits the graph document that agents build with (graphs/authoring/drafts.py: the
seed 003 format, nested form, provider secrets masked) and stores it the way they do, as a
draft; the YAML it shows is generated from that document each time, so the canvas and the
text are two views of one value. Checking is validate_workflow's, the very service agents
call, with what the selected node's expressions can read besides.
"""

from __future__ import annotations

import difflib
from typing import Any

from graphs.authoring.drafts import DraftRefused, version_list, workflow_view
from graphs.authoring.validation import read_definition, validate_with_offered
from graphs.engine import dump_yaml
from graphs.engine.checks.problems import Problem
from graphs.engine.format.flat_form import nested_form
from nodespecs.callers import Caller
from nodespecs.knowledge.service import KnowledgeError, search_nodes
from nodespecs.models import NodeSpec, NodeType
from nodespecs.providers.builder_access import usable_provider_names
from nodespecs.providers.tool_specs import port_schema

#: The most tools one search answers: a palette, not a catalog.
MAX_TOOLS_FOUND = 20
#: The most lines of difference shown between two versions.
MAX_DIFF_LINES = 2_000


def canvas_state(name: str) -> dict[str, Any]:
    """Workflow `name` as the editor opens it: the document of its latest draft (else of its
    published version), the number the editor's next save is based on, its YAML, and its
    newest versions."""
    view = workflow_view(name=name)
    listed = version_list(name=name)
    return {
        "name": view["name"],
        "based_on": view["version"],
        "status": view["status"],
        "published_version": view["published_version"],
        "document": view["definition"],
        "yaml": dump_yaml(view["definition"]),
        "versions": listed["versions"],
    }


def canvas_check(
    *,
    caller: Caller,
    yaml_text: str | None = None,
    document: Any = None,
    name: str | None = None,
    node_id: str | None = None,
) -> dict[str, Any]:
    """Check what the author has now, as YAML text or as the canvas's document: the document
    (nested form; None when the text cannot be read), its YAML, validate_workflow's problems
    and, for node `node_id`, the values its expressions can read."""
    read = read_definition(yaml_text if yaml_text is not None else document)
    if isinstance(read, Problem):
        return {
            "document": None,
            "yaml": yaml_text or "",
            "valid": False,
            "problems": [read.as_dict()],
            "offered": [],
        }
    nested, flat_problems = nested_form(read)
    # A flat-form text is shown nested on the canvas; its problems' pointers are the
    # nested ones too, so they land on the nodes drawn.
    checked = dict(nested) if not flat_problems else read
    report, offered = validate_with_offered(checked, node_id, caller=caller, name=name)
    return {
        "document": checked,
        "yaml": dump_yaml(checked),
        "valid": report.valid,
        "problems": [problem.as_dict() for problem in report.problems],
        "offered": offered,
    }


def canvas_tools(
    query: str, caller: Caller, *, server: str | None = None, tool: str | None = None
) -> list[dict[str, Any]]:
    """The tools an `mcp` node can call, found as search_nodes finds TOOL specs (the best
    MAX_TOOLS_FOUND; with no query, the first of them by provider and name), or the one
    `tool` of provider `server` (a node's own, to draw its form): only providers `caller` may
    use, each with its inputSchema and outputSchema. `DraftRefused` for a query search
    refuses (too long, too many terms)."""
    usable = usable_provider_names(caller)
    specs = NodeSpec.objects.filter(
        node_type=NodeType.TOOL, provider__name__in=usable, available=True
    ).select_related("provider")
    if server is not None and tool is not None:
        found = list(specs.filter(provider__name=server, provider_tool=tool)[:1])
    elif not query.strip():
        found = list(specs.order_by("provider__name", "provider_tool")[:MAX_TOOLS_FOUND])
    else:
        try:
            hits = search_nodes(query, max_results=MAX_TOOLS_FOUND, type_filter="TOOL")
        except KnowledgeError as exc:
            raise DraftRefused(str(exc)) from None
        ranked = [str(hit["subtype"]) for hit in hits]
        by_subtype = {spec.subtype: spec for spec in specs.filter(subtype__in=ranked)}
        found = [by_subtype[subtype] for subtype in ranked if subtype in by_subtype]
    return [
        {
            "server": spec.provider.name if spec.provider else "",
            "tool": spec.provider_tool,
            "name": spec.display_name,
            "description": spec.description,
            "inputSchema": port_schema(spec.input_ports),
            "outputSchema": port_schema(spec.output_ports),
        }
        for spec in found
    ]


def canvas_diff(name: str, earlier: int, later: int) -> dict[str, Any]:
    """The lines that differ between versions `earlier` and `later` of workflow `name`, as a
    unified diff of their YAML (at most MAX_DIFF_LINES lines; `cut` says when there were
    more). `DraftRefused` names the versions there are when either is unknown."""
    before = dump_yaml(workflow_view(name=name, number=earlier)["definition"])
    after = dump_yaml(workflow_view(name=name, number=later)["definition"])
    lines = list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            f"version {earlier}",
            f"version {later}",
            lineterm="",
        )
    )
    return {
        "earlier": earlier,
        "later": later,
        "lines": lines[:MAX_DIFF_LINES],
        "cut": len(lines) > MAX_DIFF_LINES,
    }
