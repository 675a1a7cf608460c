"""The canvas editor's round trip changes nothing: a workflow opened on the canvas, its YAML
read back, and its document saved unchanged store the very definition it was opened with."""

from __future__ import annotations

import json

import pytest

from graphs.authoring.canvas import canvas_check, canvas_state
from graphs.authoring.drafts import draft_update
from graphs.models import Workflow
from nodespecs.callers import caller_command
from tests.graph_files import import_file

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(60)]

AUTHOR = caller_command("canvas")


@pytest.mark.parametrize(
    "graph_file", ["loops.yaml", "approvals.yaml", "contracts.yaml", "flat_form.yaml"]
)
def test_opened_read_back_and_saved_unchanged_is_the_same_definition(graph_file):
    import_file(graph_file)
    for workflow in Workflow.objects.select_related("current_version"):
        state = canvas_state(workflow.name)
        # The YAML the page shows, read back, is the document it was made from.
        checked = canvas_check(caller=AUTHOR, yaml_text=state["yaml"], name=workflow.name)
        assert checked["yaml"] == state["yaml"]
        assert checked["document"] == state["document"]
        # Sent back as the browser sends it (through JSON), it stores the same definition.
        document = json.loads(json.dumps(checked["document"]))
        saved = draft_update(
            name=workflow.name, caller=AUTHOR, definition=document, based_on=state["based_on"]
        )
        version = workflow.versions.get(number=saved.version)
        assert version.definition == workflow.current_version.definition
        assert version.digest == workflow.current_version.digest
