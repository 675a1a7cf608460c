"""A new spec author in a real browser: sign in, create, make a mistake, preview, restore."""

import json

import pytest
from playwright.sync_api import expect

from nodespecs.models import NodeSpec

pytestmark = pytest.mark.django_db(transaction=True)


def fill_json(page, field: str, value) -> None:
    page.fill(f"#id_{field}", json.dumps(value, indent=2))


def test_an_author_creates_edits_previews_and_restores_a_spec(signed_in, live_server, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/admin/nodespecs/nodespec/")
    page.click(".object-tools a.addlink")
    page.select_option("#id_node_type", "ACTION")
    page.fill("#id_subtype", "PING_HOST")
    page.fill("#id_display_name", "Ping a host")
    page.fill("#id_description", "Send ICMP echo requests to a host and report whether it answers.")
    fill_json(
        page,
        "configurations",
        {"count": {"type": "integer", "description": "Echo requests to send.", "default": 3}},
    )
    fill_json(page, "tags", ["network", "ping"])
    page.click("input[name=_continue]")
    assert "was added successfully" in page.inner_text(".messagelist")

    # A mistake: a default of the wrong type. The form names the parameter and the problem.
    fill_json(
        page,
        "configurations",
        {"count": {"type": "integer", "description": "Echo requests to send.", "default": "ten"}},
    )
    page.fill("#id_description", "A description that must not be saved with the mistake.")
    page.click("input[name=_continue]")
    errors = page.inner_text(".field-configurations .errorlist")
    assert "count: default 'ten' is not of type integer" in errors
    screenshot("admin-spec-validation-error")
    # The preview still shows the saved spec, which agents are served, not the mistake.
    assert json.loads(page.inner_text("pre.agent-preview"))["default_configurations"] == {
        "count": 3
    }
    assert NodeSpec.objects.get(subtype="PING_HOST").description.startswith("Send ICMP")

    # Fix it and save: the preview shows what an agent receives.
    fill_json(
        page,
        "configurations",
        {"count": {"type": "integer", "description": "Echo requests to send.", "default": 5}},
    )
    page.click("input[name=_continue]")
    assert "was changed successfully" in page.inner_text(".messagelist")
    preview = json.loads(page.inner_text("pre.agent-preview"))
    assert preview["default_configurations"] == {"count": 5}
    assert preview["node_type"] == "ACTION"
    screenshot("admin-spec-preview")

    # The history keeps both saves; restore the first.
    page.click("text=see and restore")
    # expect() waits for the revisions page to load; count() alone would not.
    expect(page.locator("#revisions tbody tr")).to_have_count(2)
    page.click("text=show >> nth=1")
    screenshot("admin-spec-revisions")
    page.click("input[value='Restore revision 1']")
    assert "Restored ACTION/PING_HOST to revision 1" in page.inner_text(".messagelist")
    preview = json.loads(page.inner_text("pre.agent-preview"))
    assert preview["default_configurations"] == {"count": 3}
    assert NodeSpec.objects.get(subtype="PING_HOST").revisions.count() == 3
