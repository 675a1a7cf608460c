"""Drafts in the workflow admin: "Save as draft" stores a version without serving it, the
versions list shows which is which, and publishing one serves it."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from graphs.admin.forms import editor_text
from graphs.models import Workflow
from tests.graphs.test_admin import change_url, form_data

pytestmark = [pytest.mark.usefixtures("loops"), pytest.mark.timeout(30)]


def test_save_as_draft_stores_a_version_and_serves_the_published_one(admin_client, admin_user):
    workflow = Workflow.objects.get(name="classify")
    graph = editor_text(workflow).replace("'\"small\"'", "'\"tiny\"'")

    response = admin_client.post(
        change_url(workflow), {**form_data(workflow, graph), "_save_draft": "Save as draft"}
    )

    assert response.status_code == 302
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1
    assert '"tiny"' not in str(workflow.nodes)
    draft = workflow.versions.get(number=2)
    assert (draft.status, draft.author_name) == ("draft", admin_user.get_username())
    page = admin_client.get(change_url(workflow)).content.decode()
    assert "Save as draft" in page
    assert re.search(r'field-state">\s*<p>Published</p>', page)
    assert "Draft · <a href=" in page
    assert "Publish…" in page


def test_publishing_a_draft_serves_it(admin_client):
    workflow = Workflow.objects.get(name="classify")
    graph = editor_text(workflow).replace("'\"small\"'", "'\"tiny\"'")
    admin_client.post(
        change_url(workflow), {**form_data(workflow, graph), "_save_draft": "Save as draft"}
    )
    url = reverse("admin:graphs_workflow_publish", args=[workflow.pk, 2])

    confirm = admin_client.get(url)
    assert confirm.status_code == 200
    assert "Publish version 2" in confirm.content.decode()
    response = admin_client.post(url)

    assert response.status_code == 302
    workflow.refresh_from_db()
    assert workflow.current_version.number == 2
    assert '"tiny"' in str(workflow.nodes)
    assert workflow.versions.get(number=1).status == "retired"
