"""A regex RE2 cannot run is refused wherever a workflow is saved: a graph file import and the
admin editor, naming the node, the field and the construct; nothing is saved."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from graphs.admin.forms import editor_text
from graphs.authoring.services import workflow_save
from graphs.models import Workflow, WorkflowVersion
from tests.graph_files import FILES
from tests.graphs.test_admin import change_url, form_data

SMALL = "expr: '\"small\"'"
# Words followed by a digit, found with a lookahead: Python's re ran it, RE2 cannot.
LOOKAHEAD = "expr: '$match($.entry.text, /\\w+(?=\\d)/).match'"
NAMED = (
    "tool 'classify', node 'small', field 'transform.expr': regex /\\w+(?=\\d)/: lookahead `(?=` "
    "is not supported: RE2 runs in linear time and has no lookaround"
)


def test_import_graph_refuses_a_file_with_a_lookahead_naming_node_and_construct(db, tmp_path):
    graph = tmp_path / "loops.yaml"
    graph.write_text((FILES / "loops.yaml").read_text().replace(SMALL, LOOKAHEAD))

    with pytest.raises(CommandError) as refused:
        call_command("import_graph", str(graph))

    assert NAMED in str(refused.value)
    assert not WorkflowVersion.objects.exists()


def test_the_admin_refuses_a_backreference_naming_node_and_construct(admin_client, loops):
    workflow = Workflow.objects.get(name="classify")
    graph = editor_text(workflow).replace("'\"small\"'", "'$contains($.entry.text, /(a)\\1/)'")

    response = admin_client.post(change_url(workflow), form_data(workflow, graph))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["graph"]
    assert any(
        "node 'small', field 'transform.expr': regex /(a)\\1/: backreference `\\1` is not "
        "supported" in error
        for error in errors
    ), errors
    assert workflow.versions.count() == 1


def test_the_workflow_service_refuses_it_whoever_calls(loops):
    workflow = Workflow.objects.get(name="classify")
    for node in workflow.nodes:
        if node["id"] == "small":
            node["transform"]["expr"] = "$replace($.entry.text, /(?<!x)y/, 'z')"

    with pytest.raises(ValidationError) as refused:
        workflow_save(workflow=workflow)

    [problem] = refused.value.message_dict["nodes"]
    assert "node 'small', field 'transform.expr': regex /(?<!x)y/: negative lookbehind" in problem
    assert workflow.versions.count() == 1
