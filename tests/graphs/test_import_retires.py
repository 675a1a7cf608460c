"""import_graph makes a group serve what its file defines (issue 25, item 7): a tool removed
from the file is retired when the file is imported again (no longer served, its versions,
runs and audit trail kept), the report says so, and `--keep` keeps serving it. Retiring is
a change of the group: only its owners may."""

from __future__ import annotations

import copy
from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from graphs.authoring.files import GraphFileError, graph_import
from graphs.execution.runs import RunRequest, workflow_call
from graphs.execution.toolset import refresh_workflow_tools
from graphs.models import Workflow, WorkflowGroup
from nodespecs.callers import Caller
from nodespecs.models import AuditEvent
from tests.graph_files import FILES, OPERATOR

LOOPS = yaml.safe_load((FILES / "loops.yaml").read_text())


def without(name: str) -> dict:
    """loops.yaml without one of its tools."""
    document = copy.deepcopy(LOOPS)
    document["tools"] = [tool for tool in document["tools"] if tool["name"] != name]
    return document


def test_a_tool_removed_from_the_file_is_retired_with_its_history_kept(
    loops, django_capture_on_commit_callbacks
):
    ran = workflow_call(RunRequest(name="is_zero", arguments={"value": 0}))

    with django_capture_on_commit_callbacks(execute=True):  # tells the tools' snapshot
        report = graph_import(text=without("is_zero"), caller=OPERATOR)

    assert report.retired == {"is_zero": "not in the file"}
    assert report.unchanged == ["sum_to", "classify"]
    assert "is_zero" not in refresh_workflow_tools()
    retired = Workflow.objects.get(name="is_zero")
    assert retired.current_version is None
    assert [version.status for version in retired.versions.all()] == ["retired"]
    assert retired.runs.get().pk == ran.run_id
    event = AuditEvent.objects.filter(object_id=str(retired.pk)).latest("id")
    assert (event.object_type, event.actor, event.action, event.fields) == (
        "graphs.workflow",
        "command:import_graph",
        "changed",
        ["current_version"],
    )


def test_the_full_file_serves_a_retired_tool_again(loops, django_capture_on_commit_callbacks):
    graph_import(text=without("is_zero"), caller=OPERATOR)

    with django_capture_on_commit_callbacks(execute=True):
        report = graph_import(text=copy.deepcopy(LOOPS), caller=OPERATOR)

    assert report.updated == ["is_zero"]
    assert "is_zero" in refresh_workflow_tools()


def test_keep_keeps_serving_what_the_file_does_not_define(loops):
    report = graph_import(text=without("is_zero"), caller=OPERATOR, keep=True)

    assert (report.retired, report.kept) == ({}, {"is_zero": "not in the file"})
    assert "is_zero" in refresh_workflow_tools()


def test_a_draft_import_retires_nothing_and_a_published_one_does(loops):
    drafted = graph_import(text=without("is_zero"), caller=OPERATOR, publish=False)
    assert drafted.retired == {}
    assert "is_zero" in refresh_workflow_tools()

    published = graph_import(text=without("is_zero"), caller=OPERATOR)

    assert list(published.retired) == ["is_zero"]


def test_the_command_says_what_it_retired_and_keeps_with_keep(
    loops, tmp_path, django_capture_on_commit_callbacks
):
    path = tmp_path / "loops.yaml"
    path.write_text(yaml.safe_dump(without("classify")))
    kept, retired = StringIO(), StringIO()

    call_command("import_graph", str(path), "--keep", stdout=kept)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_graph", str(path), stdout=retired)

    assert "kept, though not in the file: classify" in kept.getvalue()
    assert "retired: classify" in retired.getvalue()
    assert "loops: 0 created, 0 updated, 2 unchanged, 1 retired." in retired.getvalue()
    assert "classify" not in refresh_workflow_tools()


def test_only_the_groups_owners_may_retire_its_workflows(loops):
    WorkflowGroup.objects.filter(name="loops").update(owner_key="key:owner")
    stranger = Caller(actor="key:stranger", scopes=frozenset({"workflows:write"}))

    with pytest.raises(GraphFileError, match="may not create, change or retire workflows"):
        graph_import(text=without("is_zero"), caller=stranger)

    assert "is_zero" in refresh_workflow_tools()
