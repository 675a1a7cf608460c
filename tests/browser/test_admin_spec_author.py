"""A new spec author in a real browser: sign in, create, make a mistake, preview, restore.

Parameters, tags and examples are edited through forms generated from the spec format's
JSON Schemas (django-jsonform), not as JSON text.
"""

import json

import pytest
from playwright.sync_api import expect

from nodespecs.models import NodeSpec

pytestmark = pytest.mark.django_db(transaction=True)


def add_item(page, field: str) -> None:
    page.click(f".field-{field} .rjf-add-button >> nth=-1")


def row_input(page, field: str, row: int, key: str):
    """An input of one row of a structured editor: django-jsonform names it rjf§ROW§KEY."""
    return page.locator(f".field-{field} [name='rjf§{row}§{key}']")


def preview(page) -> dict:
    # The preview is collapsed; its text is there whether or not it is open.
    return json.loads(page.text_content("pre.agent-preview"))


def test_an_author_creates_edits_previews_and_restores_a_spec(signed_in, live_server, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/admin/nodespecs/nodespec/")
    page.click(".object-tools a.addlink")
    page.select_option("#id_node_type", "ACTION")
    page.fill("#id_subtype", "PING_HOST")
    page.fill("#id_display_name", "Ping a host")
    page.fill("#id_description", "Send ICMP echo requests to a host and report whether it answers.")
    add_item(page, "configurations")
    row_input(page, "configurations", 0, "name").fill("count")
    row_input(page, "configurations", 0, "type").select_option("integer")
    row_input(page, "configurations", 0, "default").fill("3")
    row_input(page, "configurations", 0, "description").fill("Echo requests to send.")
    add_item(page, "tags")
    page.fill(".field-tags [name='rjf§0']", "network")
    add_item(page, "tags")
    page.fill(".field-tags [name='rjf§1']", "Ping")
    page.click("input[name=_continue]")
    assert "was added successfully" in page.inner_text(".messagelist")
    spec = NodeSpec.objects.get(subtype="PING_HOST")
    assert spec.configurations == {
        "count": {
            "type": "integer",
            "description": "Echo requests to send.",
            "default": 3,
            "required": False,
            "sensitive": False,
        }
    }
    assert spec.tags == ["network", "ping"]

    # A mistake: a default that is not a number. The form names the parameter and the problem
    # at the field, keeps the author's edit on the page, and saves nothing.
    row_input(page, "configurations", 0, "default").fill("ten")
    page.fill("#id_description", "A description that must not be saved with the mistake.")
    page.click("input[name=_continue]")
    errors = page.inner_text(".field-configurations .errorlist")
    assert "count: default 'ten' is not a JSON integer; write it like 5." in errors
    expect(row_input(page, "configurations", 0, "default")).to_have_value("ten")
    # A rule of the spec format, checked by the same validation as every other way in.
    row_input(page, "configurations", 0, "default").fill("5")
    row_input(page, "configurations", 0, "min").fill("10")
    page.click("input[name=_continue]")
    errors = page.inner_text(".field-configurations .errorlist")
    assert "count: default 5 is below min 10" in errors
    # And at the box it is about, in the parameter's row.
    expect(page.locator(".field-configurations .rjf-error-text")).to_have_text(
        "default 5 is below min 10"
    )
    screenshot("admin-spec-validation-error")
    # The preview still shows the saved spec, which agents are served, not the mistake.
    assert preview(page)["default_configurations"] == {"count": 3}
    assert NodeSpec.objects.get(subtype="PING_HOST").description.startswith("Send ICMP")

    # Fix it and save: the preview, collapsed until opened, shows what an agent receives.
    row_input(page, "configurations", 0, "min").fill("1")
    page.click("input[name=_continue]")
    assert "was changed successfully" in page.inner_text(".messagelist")
    summary = page.locator("summary", has_text="What an agent receives")
    expect(page.locator("pre.agent-preview")).to_be_hidden()
    summary.click()
    expect(page.locator("pre.agent-preview")).to_be_visible()
    shown = preview(page)
    assert shown["default_configurations"] == {"count": 5}
    assert shown["node_type"] == "ACTION"
    screenshot("admin-spec-preview")
    assert NodeSpec.objects.get(subtype="PING_HOST").configurations["count"]["min"] == 1

    # The history keeps every save; restore the first.
    page.click("text=see and restore")
    # expect() waits for the revisions page to load; count() alone would not.
    expect(page.locator("#revisions tbody tr")).to_have_count(2)
    page.click("text=show >> nth=1")
    screenshot("admin-spec-revisions")
    page.click("input[value='Restore revision 1']")
    assert "Restored ACTION/PING_HOST to revision 1" in page.inner_text(".messagelist")
    assert preview(page)["default_configurations"] == {"count": 3}
    assert NodeSpec.objects.get(subtype="PING_HOST").revisions.count() == 3


def test_a_catalog_spec_opens_compact_and_saves_unchanged(
    signed_in, live_server, loaded_catalog, screenshot
):
    page = signed_in
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    spec = NodeSpec.objects.get(node_type="ACTION", subtype="HTTP_REQUEST")
    before = spec.document()

    page.goto(f"{live_server.url}/admin/nodespecs/nodespec/{spec.pk}/change/")
    # The first parameter as stored: PostgreSQL's jsonb keeps an object's keys in its own order.
    first = next(iter(spec.configurations))
    expect(row_input(page, "configurations", 0, "name")).to_have_value(first)

    # Every file the editor needs comes from this server: no CDN.
    assert requested
    assert all(url.startswith(live_server.url) for url in requested), requested
    # Sixteen parameters and an example, each row laid out in two lines at 1,280 px; the
    # JSON textareas it replaces made the page 6,400 px tall.
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 5000, height
    screenshot("admin-spec-edit")

    # Saved without an edit, the editor gives back exactly the stored document.
    page.click("input[name=_continue]")
    assert "was changed successfully" in page.inner_text(".messagelist")
    assert NodeSpec.objects.get(pk=spec.pk).document() == before
