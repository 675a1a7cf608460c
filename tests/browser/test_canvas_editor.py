"""A workflow author builds on the canvas in a real browser (Debian's chromium, Playwright):
seed 003's count_files from an empty workflow, with the real filesystem server as the
provider its tool comes from; a YAML edit that shows on the canvas; a problem shown on its
node and fixed with one click; the keyboard-only list; two authors saving one workflow."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from graphs.authoring.files import graph_import
from graphs.models import Run, Workflow
from nodespecs.callers import caller_command
from tests.peers import FILESYSTEM_PROVIDER_GRAPH, npx_offline_env, require_npm_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "directory": {"type": "string", "description": "The directory path to count files in"}
    },
    "required": ["directory"],
}
COUNT = '{ "count": $count($split($.list_directory_node.content, "\\n")) }'


@pytest.fixture
def counting(tmp_path, monkeypatch):
    """The folder count_files counts, served by a registered filesystem provider."""
    require_npm_server("@modelcontextprotocol/server-filesystem")
    for name, value in npx_offline_env().items():
        monkeypatch.setenv(name, value)
    folder = tmp_path / "counting"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.md"):
        (folder / name).write_text(name)
    text = FILESYSTEM_PROVIDER_GRAPH.format(folder=json.dumps(str(folder)))
    graph_import(text=text, caller=caller_command("test"))
    call_command("refresh_providers", "filesystem", stdout=io.StringIO())
    return folder


@pytest.fixture(autouse=True)
def no_script_errors(page):
    """Every test here fails on an error thrown by the page's scripts."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield
    assert errors == []


def node_at(page: Page, node_id: str) -> tuple[float, float]:
    """Where node `node_id` is drawn on the page, for a real click on the canvas."""
    box = page.locator("#canvas-graph").bounding_box()
    position = page.evaluate(
        "id => SwitchyardCanvas.graph.getElementById('n:' + id).renderedPosition()", node_id
    )
    return box["x"] + position["x"], box["y"] + position["y"]


def click_node(page: Page, node_id: str) -> None:
    page.mouse.click(*node_at(page, node_id))


def connect(page: Page, source: str, target: str) -> None:
    """Connect two nodes on the canvas: select the source, Connect, click the target."""
    click_node(page, source)
    page.click("#canvas-connect")
    click_node(page, target)
    expect(page.locator("#canvas-status")).to_contain_text(f"Connected {source} → {target}")


def wait_valid(page: Page) -> None:
    expect(page.locator("#canvas-validity")).to_contain_text("Valid", timeout=10_000)


def test_an_author_builds_count_files_on_the_canvas(signed_in, live_server, counting, screenshot):
    page = signed_in
    page.goto(f"{live_server.url}/admin/graphs/workflow/")
    page.click("text=Build on the canvas")
    page.fill("#canvas-name", "count_files")
    page.fill("#canvas-group", "fileUtils")

    # The entry, with the workflow's arguments.
    page.click("[data-add=entry]")
    page.fill(".canvas-panel textarea.json-input", json.dumps(INPUT_SCHEMA))

    # list_directory, found by searching the providers' tools.
    page.fill("#tool-search", "list the files in a directory")
    page.click("button.tool-choice[data-tool=list_directory]")
    expect(page.locator(".canvas-panel fieldset.arg[data-arg=path]")).to_be_visible()
    expect(page.locator(".canvas-panel fieldset.arg[data-arg=path] legend")).to_contain_text(
        "path *"
    )
    connect(page, "entry", "list_directory_node")

    # Its `path` argument: a JSONata expression picked from what reaches the node.
    click_node(page, "list_directory_node")
    arg = page.locator(".canvas-panel fieldset.arg[data-arg=path]")

    # Another tool for the node, from those the search found, and back: its form follows.
    page.locator(".canvas-panel select.tool-change").select_option(
        label="read_text_file on filesystem"
    )
    expect(page.locator(".canvas-panel .tool-name")).to_contain_text("read_text_file")
    expect(page.locator(".canvas-panel fieldset.arg[data-arg=head]")).to_be_visible()
    page.locator(".canvas-panel select.tool-change").select_option(
        label="list_directory on filesystem"
    )
    expect(page.locator(".canvas-panel fieldset.arg[data-arg=head]")).to_have_count(0)
    arg.locator("select").first.select_option("expression")
    picker = arg.locator("select.offered-picker")
    expect(picker.locator("option[value='$.entry.directory']")).to_have_count(1)
    arg.locator("textarea.jsonata-input").fill("")
    picker.select_option("$.entry.directory")
    expect(arg.locator("textarea.jsonata-input")).to_have_value("$.entry.directory")
    expect(arg.locator(".problem")).to_have_count(0)  # checked again: the argument is right
    screenshot("canvas-args-form")

    # The transform, renamed, counting the lines the tool answers.
    page.click("[data-add=transform]")
    rename = page.locator(".canvas-panel input[type=text]").first
    rename.fill("count_files_node")
    rename.press("Enter")
    expect(page.locator(".canvas-panel h2")).to_contain_text("transform node")
    page.locator(".canvas-panel textarea.jsonata-input").fill(COUNT)
    expect(page.locator(".canvas-panel .jsonata-highlight .tok-variable").first).to_be_visible()
    page.click("[data-add=exit]")
    connect(page, "list_directory_node", "count_files_node")
    connect(page, "count_files_node", "exit")
    wait_valid(page)
    expect(page.locator("#problems-summary")).to_contain_text("No problems")
    screenshot("canvas-count-files")

    # The YAML is the same graph, generated.
    yaml_text = page.input_value("#canvas-yaml")
    assert "tool: list_directory" in yaml_text
    assert "path: $.entry.directory" in yaml_text

    # Save: a draft of a new workflow, opened on its own canvas page.
    page.click("#canvas-save")
    expect(page.locator("#canvas-status")).to_contain_text("Saved as draft version 1")
    workflow = Workflow.objects.get(name="count_files")
    assert workflow.current_version is None  # a draft: nothing served yet
    version = workflow.versions.get()
    assert [node["id"] for node in version.definition["nodes"]] == [
        "entry",
        "list_directory_node",
        "count_files_node",
        "exit",
    ]

    # Test-run the draft for real, against the filesystem server.
    page.click("#canvas-test-run")
    expect(page.locator("#content")).to_contain_text("version 1")
    page.fill("#id_arguments", json.dumps({"directory": str(counting)}))
    page.click("input[type=submit]")
    expect(page.locator(".messagelist")).to_contain_text("succeeded", timeout=60_000)
    run = Run.objects.get()
    assert run.is_test
    assert run.result == {"count": 3}

    # Publish it from the canvas.
    page.goto(f"{live_server.url}/admin/graphs/workflow/{workflow.pk}/canvas/")
    wait_valid(page)
    page.click("#canvas-publish")
    expect(page.locator("#canvas-status")).to_contain_text("Version 1 is published")
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1
    expect(page.locator("#canvas-versions")).to_contain_text("served now")


SHOUT = """
version: "1.0"
server: {name: "words", version: "1.0.0"}
tools:
  - name: shout
    description: The text in capitals.
    inputSchema:
      type: object
      properties: {text: {type: string}}
      required: [text]
    nodes:
      - {id: entry, type: entry, next: upper}
      - {id: upper, type: transform, transform: {expr: "$uppercase($.entry.text)"}, next: exit}
      - {id: exit, type: exit}
"""


@pytest.fixture
def shout(transactional_db) -> Workflow:
    """A workflow that calls no server, published as version 1."""
    graph_import(text=SHOUT, caller=caller_command("test"))
    return Workflow.objects.get(name="shout")


def open_canvas(page: Page, live_server, workflow: Workflow) -> None:
    page.goto(f"{live_server.url}/admin/graphs/workflow/{workflow.pk}/canvas/")
    wait_valid(page)


def drawn(page: Page, element_id: str) -> bool:
    return page.evaluate("id => SwitchyardCanvas.graph.getElementById(id).length > 0", element_id)


def test_a_yaml_edit_shows_on_the_canvas(signed_in, live_server, shout, screenshot):
    page = signed_in
    open_canvas(page, live_server, shout)
    assert not drawn(page, "n:tidy")
    text = page.input_value("#canvas-yaml")
    tidy = (
        "  - id: tidy\n    type: transform\n    transform:\n      expr: $trim($.upper)\n"
        "    next: exit\n"
    )
    edited = text.replace("next: exit", "next: tidy", 1).replace(
        "  - id: exit", tidy + "  - id: exit"
    )
    assert edited != text
    page.fill("#canvas-yaml", edited)
    expect(page.locator("#canvas-list [data-node=tidy]")).to_be_visible()
    assert drawn(page, "n:tidy")
    assert drawn(page, "e:upper:next")
    assert page.evaluate(
        "SwitchyardCanvas.model.find(SwitchyardCanvas.state.doc, 'upper').next"
    ) == ("tidy")
    wait_valid(page)
    # The text the author typed stays as typed while they work.
    assert page.input_value("#canvas-yaml") == edited


def test_a_problem_shows_on_its_node_and_its_fix_is_one_click(
    signed_in, live_server, shout, screenshot
):
    page = signed_in
    open_canvas(page, live_server, shout)
    page.click("#canvas-list [data-node=upper] .node-select")
    expression = page.locator(".canvas-panel textarea.jsonata-input")

    # A syntax error, at its character, as it is typed.
    expression.fill("$uppercase($.entry.text")
    expect(page.locator(".canvas-panel .field-problems .problem.error")).to_contain_text(
        "at character"
    )
    expect(page.locator(".canvas-panel mark.jsonata-error")).to_have_count(1)

    # A misspelt node: the problem on the node, in the panel and in the list, with its fix.
    expression.fill("$uppercase($.entri.text)")
    expect(page.locator(".canvas-panel .field-problems .problem.error")).to_contain_text("entri")
    assert page.evaluate("SwitchyardCanvas.graph.getElementById('n:upper').hasClass('has-error')")
    expect(page.locator("#canvas-list [data-node=upper].has-error")).to_have_count(1)
    screenshot("canvas-problem")
    expect(
        page.locator("#canvas-problems li[data-code=node_reference_unknown] .apply-fix")
    ).to_be_visible()
    page.locator(".canvas-panel .field-problems .apply-fix").click()
    expect(page.locator("#problems-summary")).to_contain_text("No problems")
    expect(expression).to_have_value("$uppercase($.entry.text)")
    assert not page.evaluate(
        "SwitchyardCanvas.graph.getElementById('n:upper').hasClass('has-error')"
    )


def test_the_keyboard_alone_adds_and_connects_a_node(signed_in, live_server, shout):
    page = signed_in
    open_canvas(page, live_server, shout)
    page.focus("#add-type")
    page.keyboard.type("transform")
    page.keyboard.press("Tab")
    page.keyboard.type("polish")
    page.keyboard.press("Enter")
    added = page.locator("#canvas-list [data-node=polish] .node-select")
    expect(added).to_be_focused()
    assert drawn(page, "n:polish")

    # From the node's entry in the list: its "connect to" choice, then Add edge.
    page.keyboard.press("Tab")
    expect(page.locator("#connect-polish")).to_be_focused()
    page.keyboard.type("exit")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#canvas-list [data-node=polish] .edge-list")).to_contain_text(
        "next → exit"
    )
    assert drawn(page, "e:polish:next")
    assert (
        page.evaluate("SwitchyardCanvas.model.find(SwitchyardCanvas.state.doc, 'polish').next")
        == "exit"
    )


def test_two_authors_do_not_overwrite_each_other(signed_in, live_server, shout, browser):
    first = signed_in
    second = browser.new_page(viewport={"width": 1280, "height": 900})
    second.context.add_cookies(first.context.cookies())
    open_canvas(first, live_server, shout)
    open_canvas(second, live_server, shout)

    first.click("[data-add=exit]")  # any change: a second exit, saved as a draft anyway
    first.click("#canvas-list [data-node=upper] .node-select")
    first.locator(".canvas-panel textarea.jsonata-input").fill("$lowercase($.entry.text)")
    wait_valid(first)
    first.click("#canvas-list [data-node=exit_2] button:has-text('Delete exit_2')")
    wait_valid(first)
    first.click("#canvas-save")
    expect(first.locator("#canvas-status")).to_contain_text("Saved as draft version 2")

    second.click("#canvas-list [data-node=upper] .node-select")
    second.locator(".canvas-panel textarea.jsonata-input").fill("$trim($.entry.text)")
    wait_valid(second)
    second.click("#canvas-save")
    expect(second.locator("#canvas-status")).to_contain_text("moved on while you edited")
    expect(second.locator("#canvas-status")).to_contain_text("version 2 (draft, saved by author")
    assert list(shout.versions.order_by("number").values_list("number", flat=True)) == [1, 2]
    second.close()
