"""Draft versions and publishing, below the builder tools: a draft is stored but not served
until it is published; importing or saving in the admin publishes at once; a provider's
secrets are shown masked and a masked entry still names its provider."""

from __future__ import annotations

import pytest
import yaml

from graphs.authoring.files import SECRET_MASK, graph_document, graph_import
from graphs.authoring.services import workflow_publish
from graphs.execution.toolset import refresh_workflow_tools
from graphs.models import Workflow, WorkflowVersion
from nodespecs.callers import Caller
from nodespecs.models import Provider
from tests.graph_files import FILES, OPERATOR

pytestmark = pytest.mark.timeout(30)

AGENT = Caller(actor="key:agent123")
LOOPS = yaml.safe_load((FILES / "loops.yaml").read_text())


def _only(tool_name: str) -> dict:
    document = dict(LOOPS)
    document["tools"] = [tool for tool in LOOPS["tools"] if tool["name"] == tool_name]
    return document


def test_a_new_workflow_saved_as_a_draft_is_not_served_until_published(
    db, django_capture_on_commit_callbacks
):
    report = graph_import(text=_only("is_zero"), caller=AGENT, publish=False)

    assert report.drafts == {"is_zero": 1}
    workflow = Workflow.objects.get(name="is_zero")
    assert workflow.current_version is None
    assert "is_zero" not in refresh_workflow_tools()
    version = workflow.versions.get()
    assert (version.status, version.author_name) == ("draft", "key:agent123")

    with django_capture_on_commit_callbacks(execute=True):  # tells the snapshot
        workflow_publish(version=version, caller=AGENT)
    version.refresh_from_db()
    assert version.status == WorkflowVersion.Status.PUBLISHED
    assert version.published_at is not None
    assert "is_zero" in refresh_workflow_tools()


def test_a_draft_of_a_served_workflow_leaves_the_served_version_alone(db):
    graph_import(text=_only("is_zero"), caller=OPERATOR)
    served = Workflow.objects.get(name="is_zero").current_version
    changed = _only("is_zero")
    changed["tools"] = [{**changed["tools"][0], "description": "A new description."}]

    graph_import(text=changed, caller=AGENT, publish=False)

    workflow = Workflow.objects.get(name="is_zero")
    assert workflow.current_version == served
    assert workflow.description != "A new description."
    draft = workflow.versions.get(number=2)
    assert draft.status == "draft"
    # The same draft again stores nothing new.
    assert graph_import(text=changed, caller=AGENT, publish=False).drafts == {"is_zero": 2}

    workflow_publish(version=draft, caller=AGENT)
    workflow.refresh_from_db()
    assert (workflow.current_version, workflow.description) == (draft, "A new description.")
    served.refresh_from_db()
    assert served.status == "retired"


def test_secrets_are_shown_masked_and_a_masked_entry_names_its_provider(db):
    text = (FILES / "loops.yaml").read_text()
    document = yaml.safe_load(text)
    document["mcpServers"] = {
        "remote": {
            "type": "streamableHttp",
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer s3cret"},
        }
    }
    graph_import(text=document, caller=OPERATOR)
    provider = Provider.objects.get(name="remote")
    workflow = Workflow.objects.get(name="is_zero")
    workflow.servers = {"remote": provider.pk}

    shown = graph_document(workflow.group, [], {}, {"remote": provider.pk}, masked=True)
    assert shown["mcpServers"]["remote"]["headers"] == {"Authorization": SECRET_MASK}
    assert "s3cret" not in str(shown)

    again = {**document, "mcpServers": shown["mcpServers"]}
    report = graph_import(text=again, caller=AGENT, publish=False)
    assert report.providers == {"remote": "remote"}
    assert Provider.objects.count() == 1
