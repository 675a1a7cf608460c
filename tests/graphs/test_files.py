"""Importing graph files as workflows, and exporting them back."""

from __future__ import annotations

import pytest
import yaml

from graphs.authoring.files import GraphFileError, graph_export, graph_import
from graphs.models import Workflow, WorkflowGroup, WorkflowVersion
from nodespecs.models import Provider
from tests.graph_files import FILES, OPERATOR, import_file


def test_it_imports_each_tool_as_a_workflow_with_a_first_version(loops):
    assert loops.created == ["sum_to", "classify", "is_zero"]
    group = WorkflowGroup.objects.get(name="loops")
    assert group.title == "Loop tests"
    workflow = Workflow.objects.get(name="sum_to")
    assert workflow.group == group
    assert workflow.limits == {"maxNodeExecutions": 500, "maxExecutionTimeMs": 300000}
    assert workflow.current_version.number == 1
    assert workflow.current_version.definition["nodes"][1]["id"] == "step"


def test_importing_the_same_file_again_changes_nothing(loops):
    report = import_file("loops.yaml")
    assert report.unchanged == ["sum_to", "classify", "is_zero"]
    assert WorkflowVersion.objects.count() == 3


def test_a_changed_tool_gets_a_new_version_and_the_old_one_is_kept(loops):
    report = import_file("loops.yaml", **{"expr: '\"small\"'": "expr: '\"tiny\"'"})
    assert report.updated == ["classify"]
    assert report.unchanged == ["sum_to", "is_zero"]
    versions = Workflow.objects.get(name="classify").versions.order_by("number")
    assert [v.number for v in versions] == [1, 2]
    assert "tiny" in str(versions[1].definition)
    assert "tiny" not in str(versions[0].definition)


def test_an_invalid_file_is_refused_whole_with_every_problem_named(loops):
    text = (FILES / "loops.yaml").read_text().replace('target: "medium"', 'target: "mediun"')
    text = text.replace('"small"\'', "\"small'")
    with pytest.raises(GraphFileError) as raised:
        graph_import(text=text, caller=OPERATOR)
    message = str(raised.value)
    assert "tool 'classify', node 'size'" in message
    assert "mediun" in message
    assert "tool 'classify', node 'small'" in message
    assert WorkflowVersion.objects.count() == 3


def test_an_export_imports_back_to_the_same_workflows(loops):
    exported = graph_export(name="loops")
    document = yaml.safe_load(exported)
    assert document["server"]["name"] == "loops"
    assert [tool["name"] for tool in document["tools"]] == ["classify", "is_zero", "sum_to"]
    report = graph_import(text=exported, caller=OPERATOR)
    assert sorted(report.unchanged) == ["classify", "is_zero", "sum_to"]


def test_a_single_workflow_exports_on_its_own(loops):
    document = yaml.safe_load(graph_export(name="classify"))
    assert [tool["name"] for tool in document["tools"]] == ["classify"]


def test_exporting_an_unknown_name_says_what_exists(loops):
    with pytest.raises(GraphFileError, match=r"No workflow or group named 'nope'\. Groups: loops"):
        graph_export(name="nope")


def test_a_workflow_may_not_take_the_name_of_a_knowledge_tool(db):
    text = (FILES / "loops.yaml").read_text().replace('"is_zero"', '"search_nodes"')
    with pytest.raises(GraphFileError, match=r"search_nodes.*built-in tool"):
        graph_import(text=text, caller=OPERATOR)


def test_an_export_writes_multi_line_expressions_as_block_scalars(loops):
    exported = graph_export(name="loops")

    assert "expr: |" in exported
    assert "\\n" not in exported  # no expression squeezed onto one line with escapes


EVENTS_FILE = """
version: "1.0"
server: {name: "events", version: "1.0.0"}
mcpServers:
  feed: {type: "sse", url: "https://feed.example.com/sse", sse_read_timeout: 45}
tools:
  - name: "latest"
    description: "The feed's latest item."
    inputSchema: {type: "object"}
    nodes:
      - {id: "entry", type: "entry", next: "call"}
      - {id: "call", type: "mcp", server: "feed", tool: "latest", args: {}, next: "exit"}
      - {id: "exit", type: "exit"}
"""


def test_an_sse_read_timeout_goes_to_the_provider_and_back_to_the_file(db):
    graph_import(text=EVENTS_FILE, caller=OPERATOR)
    provider = Provider.objects.get(url="https://feed.example.com/sse")
    assert provider.sse_read_timeout == 45

    exported = graph_export(name="events")
    assert yaml.safe_load(exported)["mcpServers"]["feed"]["sse_read_timeout"] == 45
    report = graph_import(text=exported, caller=OPERATOR)
    assert report.unchanged == ["latest"]
    assert Provider.objects.count() == 1


def test_an_http_server_without_one_gets_the_default_and_exports_without_it(db):
    graph_import(text=EVENTS_FILE.replace(", sse_read_timeout: 45", ""), caller=OPERATOR)
    assert Provider.objects.get().sse_read_timeout == 300
    assert "sse_read_timeout" not in graph_export(name="events")
