"""The canvas editor's JSON views in the admin (graphs/admin/canvas.py): checking a
definition as it is edited, the tools an mcp node can call, saving drafts based on the
version opened, publishing (and rolling back), the difference between versions, and who may
do each. Workflows from tests/graphs/files/loops.yaml, which call no server."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Permission
from django.urls import reverse
from mcp.types import Tool

from graphs.admin.canvas import MAX_REQUEST_BYTES
from graphs.authoring.canvas import canvas_state
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Run, Workflow
from nodespecs.models import NodeSpec, Provider
from nodespecs.providers.tool_specs import tool_document
from tests.graphs.validation.helpers import FILESYSTEM, count_files, flat

pytestmark = [pytest.mark.usefixtures("loops"), pytest.mark.timeout(30)]

CHECK = "admin:graphs_workflow_canvas_check"
TOOLS = "admin:graphs_workflow_canvas_tools"
SAVE = "admin:graphs_workflow_canvas_save"


def url(name: str, workflow: Workflow | None = None) -> str:
    return reverse(name, args=[workflow.pk] if workflow else [])


def post(client, name: str, body: Any, workflow: Workflow | None = None, **extra: Any):
    return client.post(
        url(name, workflow), json.dumps(body), content_type="application/json", **extra
    )


def classify() -> Workflow:
    return Workflow.objects.get(name="classify")


def state(client, workflow: Workflow) -> dict[str, Any]:
    response = client.get(url("admin:graphs_workflow_canvas_state", workflow))
    assert response.status_code == 200, response.content
    return response.json()


def saying(document: dict[str, Any], word: str) -> dict[str, Any]:
    """classify's document whose `small` branch answers `word`."""
    changed = copy.deepcopy(document)
    [small] = [n for n in changed["tools"][0]["nodes"] if n["id"] == "small"]
    small["transform"]["expr"] = json.dumps(word)
    return changed


def small_answer(definition: dict[str, Any]) -> str:
    """The expression of classify's `small` node, in a version's stored definition."""
    [small] = [n for n in definition["nodes"] if n["id"] == "small"]
    return small["transform"]["expr"]


def simple(name: str = "echo_value", *, server: bool = True) -> dict[str, Any]:
    """A new workflow's document: entry -> transform -> exit, in group `canvas` (without
    the server block the group is named apart, as the editor of a new workflow does)."""
    head = {"version": "1.0", "server": {"name": "canvas", "version": "1.0.0"}} if server else {}
    return {
        **head,
        "tools": [
            {
                "name": name,
                "description": "Answers its value, doubled.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"value": {"type": "number"}},
                    "required": ["value"],
                },
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "double"},
                    {
                        "id": "double",
                        "type": "transform",
                        "transform": {"expr": '{"doubled": $.entry.value * 2}'},
                        "next": "exit",
                    },
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


@pytest.fixture
def viewer(django_user_model):
    """Staff, who may see workflows but not change them."""
    user = django_user_model.objects.create_user("victor", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_workflow"))
    return user


# Checking


def test_checking_valid_yaml_answers_the_document_and_no_problems(admin_client):
    text = yaml.safe_dump(count_files(), sort_keys=False).replace("filesystem", "fs")
    document = yaml.safe_load(text)
    del document["mcpServers"]
    for node in document["tools"][0]["nodes"]:
        node.pop("server", None)
    document["tools"][0]["nodes"][1] = {
        "id": "list_directory_node",
        "type": "transform",
        "transform": {"expr": '{"content": "a\\nb"}'},
        "next": "count_files_node",
    }

    response = post(admin_client, CHECK, {"yaml": yaml.safe_dump(document, sort_keys=False)})

    assert response.status_code == 200
    answer = response.json()
    assert (answer["valid"], answer["problems"], answer["offered"]) == (True, [], [])
    assert answer["document"] == document
    assert yaml.safe_load(answer["yaml"]) == document


def test_unreadable_yaml_is_one_problem_not_an_error(admin_client):
    response = post(admin_client, CHECK, {"yaml": "tools: [unclosed\n  - : :"})

    assert response.status_code == 200
    answer = response.json()
    assert (answer["valid"], answer["document"], answer["offered"]) == (False, None, [])
    assert answer["yaml"] == "tools: [unclosed\n  - : :"
    [problem] = answer["problems"]
    assert problem["severity"] == "error"
    assert problem["code"] == "yaml_unreadable", problem


def test_checking_a_document_finds_its_problems_where_they_are(admin_client):
    document = simple()
    document["tools"][0]["nodes"][1]["next"] = "nowhere"

    answer = post(admin_client, CHECK, {"document": document}).json()

    assert answer["valid"] is False
    errors = [(p["code"], p["node"], p["path"]) for p in answer["problems"]]
    assert errors == [
        ("unknown_target", "double", "/tools/0/nodes/1/next"),
        ("unreachable_node", "exit", "/tools/0/nodes/2"),
    ], answer["problems"]
    assert answer["document"] == document


def test_a_flat_form_document_is_answered_nested(admin_client):
    document = simple()
    document["server"] = {"name": "canvas", "version": "1.0.0"}
    written = flat(document)
    assert "nodes" in written
    assert "nodes" not in written["tools"][0]

    answer = post(admin_client, CHECK, {"document": written}).json()

    assert answer["valid"] is True, answer["problems"]
    assert "nodes" not in answer["document"]
    assert [n["id"] for n in answer["document"]["tools"][0]["nodes"]] == ["entry", "double", "exit"]
    assert yaml.safe_load(answer["yaml"]) == answer["document"]


def test_checking_offers_what_a_nodes_expressions_can_read(admin_client):
    answer = post(admin_client, CHECK, {"document": simple(), "node": "exit"}).json()

    assert [(o["path"], o["type"], o["node"]) for o in answer["offered"]] == [
        ("$.entry", "object", "entry"),
        ("$.entry.value", "number", "entry"),
        ("$.double", "object", "double"),
        ("$.double.doubled", "number", "double"),
    ]
    before = post(admin_client, CHECK, {"document": simple(), "node": "double"}).json()
    assert [o["path"] for o in before["offered"]] == ["$.entry", "$.entry.value"]


def test_checking_needs_yaml_or_a_document(admin_client):
    response = post(admin_client, CHECK, {"name": "classify"})

    assert response.status_code == 400
    assert "Send `yaml`" in response.json()["error"]
    assert post(admin_client, CHECK, {"yaml": 3}).status_code == 400
    assert post(admin_client, CHECK, {"document": simple(), "node": ["exit"]}).status_code == 400


# Tools


def _register(name: str = "files") -> Provider:
    """A registered provider whose tools are FILESYSTEM's, as a refresh writes their
    specs; no server is started."""
    provider = Provider(name=name, command="npx", args=["-y", "@modelcontextprotocol/x"])
    provider.full_clean()
    provider.save()
    for tool_name, schema in FILESYSTEM.items():
        tool = Tool(
            name=tool_name,
            description=f"The {tool_name.replace('_', ' ')} tool of the files.",
            input_schema=schema.input_schema,
            output_schema=schema.output_schema,
        )
        spec = NodeSpec(source=NodeSpec.Source.PROVIDER, provider=provider, provider_tool=tool_name)
        spec.set_document(tool_document(provider=name, provider_title="Files", tool=tool))
        spec.full_clean()
        spec.save()
    return provider


def test_an_empty_query_lists_the_tools_by_provider_and_name(admin_client):
    _register("files")
    _register("alpha")

    response = admin_client.get(url(TOOLS), {"q": "  "})

    assert response.status_code == 200
    tools = response.json()["tools"]
    assert [(t["server"], t["tool"]) for t in tools] == [
        ("alpha", "get_file_info"),
        ("alpha", "list_directory"),
        ("alpha", "read_text_file"),
        ("files", "get_file_info"),
        ("files", "list_directory"),
        ("files", "read_text_file"),
    ]
    info = tools[3]
    assert info["name"] == "mcp-files-get_file_info"
    assert info["inputSchema"] == FILESYSTEM["get_file_info"].input_schema
    assert info["outputSchema"] == FILESYSTEM["get_file_info"].output_schema
    assert tools[4]["outputSchema"] is None


def test_a_query_finds_the_tools_search_finds(admin_client):
    _register("files")

    tools = admin_client.get(url(TOOLS), {"q": "list directory"}).json()["tools"]

    assert tools, "search found nothing"
    assert (tools[0]["server"], tools[0]["tool"]) == ("files", "list_directory")
    assert all(t["server"] == "files" for t in tools)


def test_one_tool_is_looked_up_by_server_and_name(admin_client):
    _register("files")
    _register("alpha")

    found = admin_client.get(url(TOOLS), {"server": "files", "tool": "read_text_file"}).json()
    missing = admin_client.get(url(TOOLS), {"server": "files", "tool": "nope"}).json()

    [tool] = found["tools"]
    assert (tool["server"], tool["tool"]) == ("files", "read_text_file")
    assert tool["inputSchema"]["required"] == ["path"]
    assert missing == {"tools": []}


def test_an_unavailable_tool_is_not_listed(admin_client):
    _register("files")
    NodeSpec.objects.filter(provider_tool="list_directory").update(available=False)

    tools = admin_client.get(url(TOOLS)).json()["tools"]

    assert [t["tool"] for t in tools] == ["get_file_info", "read_text_file"]


# Saving


def test_saving_a_new_workflow_stores_a_draft_and_publishes_nothing(admin_client):
    response = post(admin_client, SAVE, {"document": simple(server=False), "group": "canvas"})

    assert response.status_code == 201, response.content
    workflow = Workflow.objects.get(name="echo_value")
    assert response.json() == {
        "workflow": "echo_value",
        "version": 1,
        "id": workflow.pk,
        "created": True,
    }
    assert workflow.group.name == "canvas"
    assert workflow.current_version is None
    [version] = workflow.versions.all()
    assert (version.status, version.published_at, version.comment) == (
        "draft",
        None,
        "Edited on the canvas",
    )
    opened = state(admin_client, workflow)
    assert (opened["based_on"], opened["status"], opened["published_version"]) == (1, "draft", None)


def test_a_new_workflow_without_a_server_block_needs_its_group(admin_client):
    response = post(admin_client, SAVE, {"document": simple(server=False)})

    assert response.status_code == 409
    assert response.json()["error"].startswith("Name the workflow group")
    assert not Workflow.objects.filter(name="echo_value").exists()


def test_saving_an_invalid_new_workflow_is_refused_with_its_problems(admin_client):
    document = simple()
    document["tools"][0]["nodes"][1]["next"] = "nowhere"

    response = post(admin_client, SAVE, {"document": document, "group": "canvas"})

    assert response.status_code == 409
    assert "nothing was stored" in response.json()["error"]
    assert "unknown_target" in [p["code"] for p in response.json()["problems"]]
    assert not Workflow.objects.filter(name="echo_value").exists()


def test_saving_based_on_the_latest_version_stores_a_draft(admin_client):
    workflow = classify()
    opened = state(admin_client, workflow)
    assert (opened["based_on"], opened["status"], opened["published_version"]) == (
        1,
        "published",
        1,
    )

    response = post(
        admin_client,
        SAVE,
        {
            "document": saying(opened["document"], "tiny"),
            "name": "classify",
            "based_on": 1,
            "comment": "smaller words",
        },
    )

    assert response.status_code == 201, response.content
    assert response.json() == {
        "workflow": "classify",
        "version": 2,
        "id": workflow.pk,
        "created": False,
    }
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1  # still served
    draft = workflow.versions.get(number=2)
    assert (draft.status, draft.comment) == ("draft", "smaller words")
    assert small_answer(draft.definition) == '"tiny"'
    assert small_answer(workflow.current_version.definition) == '"small"'
    again = state(admin_client, workflow)
    assert (again["based_on"], again["status"]) == (2, "draft")
    assert [v["version"] for v in again["versions"]] == [2, 1]


def test_a_save_based_on_a_stale_version_is_refused_naming_the_newer_one(admin_client):
    opened = state(admin_client, classify())
    first = {"document": saying(opened["document"], "tiny"), "name": "classify", "based_on": 1}
    assert post(admin_client, SAVE, first).status_code == 201

    second = {"document": saying(opened["document"], "wee"), "name": "classify", "based_on": 1}
    response = post(admin_client, SAVE, second)

    assert response.status_code == 409
    message = response.json()["error"]
    assert "moved on" in message
    assert "version 2 (draft, saved by admin" in message
    assert "not version 1 you opened" in message
    assert "Nothing was stored" in message
    stored = {v.number: small_answer(v.definition) for v in classify().versions.all()}
    assert stored == {1: '"small"', 2: '"tiny"'}


def test_a_save_based_on_an_older_draft_is_refused_too(admin_client):
    opened = state(admin_client, classify())
    for word, based_on in (("tiny", 1), ("wee", 2)):
        body = {"document": saying(opened["document"], word), "name": "classify"}
        assert post(admin_client, SAVE, {**body, "based_on": based_on}).status_code == 201

    stale = {"document": saying(opened["document"], "little"), "name": "classify", "based_on": 2}
    response = post(admin_client, SAVE, stale)

    assert response.status_code == 409
    assert "version 3 (draft, saved by admin" in response.json()["error"]
    assert classify().versions.count() == 3


@pytest.mark.parametrize("based_on", ["2", True, 0, -1, 2**31, 1.5])
def test_based_on_must_be_a_version_number(admin_client, based_on):
    opened = state(admin_client, classify())
    body = {"document": opened["document"], "name": "classify", "based_on": based_on}

    response = post(admin_client, SAVE, body)

    assert response.status_code == 400
    assert "`based_on` must be a version number" in response.json()["error"]
    assert classify().versions.count() == 1


def test_saving_needs_a_document_object(admin_client):
    for body in ({"name": "classify"}, {"document": "tools: []", "name": "classify"}):
        response = post(admin_client, SAVE, body)
        assert response.status_code == 400
        assert "`document` must be the graph document" in response.json()["error"]


# Publishing, rolling back, differences


def _saved_draft(client) -> Workflow:
    opened = state(client, classify())
    body = {"document": saying(opened["document"], "tiny"), "name": "classify", "based_on": 1}
    assert post(client, SAVE, body).status_code == 201
    return classify()


def _small() -> Any:
    return workflow_call(RunRequest(name="classify", arguments={"value": 1})).result


def test_publishing_a_draft_serves_it_and_publishing_the_older_one_rolls_back(admin_client):
    workflow = _saved_draft(admin_client)
    publish = "admin:graphs_workflow_canvas_publish"
    assert _small() == "small"

    response = post(admin_client, publish, {"version": 2}, workflow)

    assert response.status_code == 200, response.content
    assert response.json() == {"workflow": "classify", "published_version": 2}
    workflow.refresh_from_db()
    assert workflow.current_version.number == 2
    assert _small() == "tiny"

    back = post(admin_client, publish, {"version": 1}, workflow)

    assert back.status_code == 200, back.content
    assert back.json()["published_version"] == 1
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1
    assert _small() == "small"
    assert workflow.versions.get(number=2).status != "published"


def test_a_rolled_back_workflow_can_be_edited_again(admin_client):
    workflow = _saved_draft(admin_client)
    publish = "admin:graphs_workflow_canvas_publish"
    assert post(admin_client, publish, {"version": 2}, workflow).status_code == 200
    assert post(admin_client, publish, {"version": 1}, workflow).status_code == 200
    opened = state(admin_client, workflow)
    assert (opened["based_on"], opened["status"]) == (1, "published")

    body = {"document": saying(opened["document"], "wee"), "name": "classify"}
    response = post(admin_client, SAVE, {**body, "based_on": opened["based_on"]})

    assert response.status_code == 201, response.json()
    assert response.json()["version"] == 3


def test_publishing_an_unknown_version_names_the_versions_there_are(admin_client):
    workflow = _saved_draft(admin_client)

    response = post(admin_client, "admin:graphs_workflow_canvas_publish", {"version": 7}, workflow)

    assert response.status_code == 409
    assert response.json()["error"] == "'classify' has no version 7; its versions: 1, 2."
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1


@pytest.mark.parametrize("body", [{}, {"version": "2"}, {"version": True}, {"version": 0}])
def test_publishing_needs_a_version_number(admin_client, body):
    workflow = _saved_draft(admin_client)

    response = post(admin_client, "admin:graphs_workflow_canvas_publish", body, workflow)

    assert response.status_code == 400
    assert "`version`" in response.json()["error"]
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1


def test_the_diff_of_two_versions_shows_the_lines_changed(admin_client):
    workflow = _saved_draft(admin_client)

    response = admin_client.get(
        url("admin:graphs_workflow_canvas_diff", workflow), {"from": 1, "to": 2}
    )

    assert response.status_code == 200
    answer = response.json()
    assert (answer["earlier"], answer["later"], answer["cut"]) == (1, 2, False)
    lines = answer["lines"]
    assert lines[:2] == ["--- version 1", "+++ version 2"]
    changed = [line for line in lines[2:] if line[:1] in "+-" and not line.startswith("@@")]
    assert changed == ["-      expr: '\"small\"'", "+      expr: '\"tiny\"'"], lines


def test_the_diff_of_a_version_with_itself_is_empty(admin_client):
    workflow = classify()

    answer = admin_client.get(
        url("admin:graphs_workflow_canvas_diff", workflow), {"from": 1, "to": 1}
    ).json()

    assert (answer["lines"], answer["cut"]) == ([], False)


def test_the_diff_with_an_unknown_version_names_the_versions_there_are(admin_client):
    workflow = _saved_draft(admin_client)

    for to in (9, 10**30):  # past any database integer: still no version, not an error
        response = admin_client.get(
            url("admin:graphs_workflow_canvas_diff", workflow), {"from": 1, "to": to}
        )

        assert response.status_code == 409
        assert response.json()["error"] == f"'classify' has no version {to}; its versions: 1, 2."


@pytest.mark.parametrize("query", [{}, {"from": 1}, {"from": "one", "to": 2}, {"to": "2.0"}])
def test_the_diff_needs_two_version_numbers(admin_client, query):
    response = admin_client.get(url("admin:graphs_workflow_canvas_diff", classify()), query)

    assert response.status_code == 400
    assert "`from` and `to`" in response.json()["error"]


# Malformed requests


def test_a_body_that_is_not_json_is_refused(admin_client):
    response = admin_client.post(url(CHECK), b"{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["error"].startswith("The request body is not JSON")


def test_a_body_that_is_not_an_object_is_refused(admin_client):
    response = post(admin_client, CHECK, ["yaml", "tools: []"])

    assert response.status_code == 400
    assert response.json() == {"error": "The request body must be a JSON object.", "problems": []}


def test_a_body_declared_larger_than_the_editor_reads_is_refused_unread(admin_client):
    response = post(
        admin_client, SAVE, {"document": simple()}, CONTENT_LENGTH=str(MAX_REQUEST_BYTES + 1)
    )

    assert response.status_code == 400
    assert f"over the editor's {MAX_REQUEST_BYTES:,}" in response.json()["error"]
    assert not Workflow.objects.filter(name="echo_value").exists()


def test_a_content_length_that_is_no_number_is_a_bad_request(admin_client):
    response = post(admin_client, CHECK, {"document": simple()}, CONTENT_LENGTH="lots")

    assert response.status_code == 400
    assert response.json()["error"] == "The request's Content-Length is not a number."


@pytest.mark.parametrize("name", [CHECK, SAVE])
def test_reading_a_post_only_view_is_not_allowed(admin_client, name):
    response = admin_client.get(url(name))

    assert response.status_code == 405
    assert "POST" in response.json()["error"]


def test_publishing_with_get_is_not_allowed(admin_client):
    workflow = classify()

    response = admin_client.get(url("admin:graphs_workflow_canvas_publish", workflow))

    assert response.status_code == 405


# Who may


def test_anonymous_callers_are_sent_to_sign_in(client):
    workflow = classify()
    for response in (
        client.post(url(CHECK), "{}", content_type="application/json"),
        client.get(url(TOOLS)),
        client.post(url(SAVE), "{}", content_type="application/json"),
        client.get(url("admin:graphs_workflow_canvas_state", workflow)),
        client.get(url("admin:graphs_workflow_canvas", workflow)),
    ):
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))


def test_staff_without_the_change_permission_are_refused_as_json(client, viewer):
    client.force_login(viewer)
    workflow = classify()

    answers = {
        "check": post(client, CHECK, {"document": simple()}),
        "tools": client.get(url(TOOLS)),
        "save": post(client, SAVE, {"document": simple(), "group": "canvas"}),
        "state": client.get(url("admin:graphs_workflow_canvas_state", workflow)),
        "publish": post(client, "admin:graphs_workflow_canvas_publish", {"version": 1}, workflow),
        "diff": client.get(
            url("admin:graphs_workflow_canvas_diff", workflow), {"from": 1, "to": 1}
        ),
    }

    assert {name: r.status_code for name, r in answers.items()} == dict.fromkeys(answers, 403)
    assert answers["save"].json()["error"].startswith("You may not change workflows")
    assert not Workflow.objects.filter(name="echo_value").exists()
    page = client.get(url("admin:graphs_workflow_canvas", workflow))
    assert page.status_code == 403


def test_staff_who_may_only_add_workflows_build_new_ones_but_cannot_overwrite_one(
    client, django_user_model
):
    adder = django_user_model.objects.create_user("ada", password="pw", is_staff=True)
    adder.user_permissions.set(Permission.objects.filter(codename="add_workflow"))
    client.force_login(adder)
    document = saying(canvas_state("classify")["document"], "tiny")

    page = client.get(url("admin:graphs_workflow_canvas_new"))
    checked = post(client, CHECK, {"document": simple(), "node": "exit"})
    created = post(client, SAVE, {"document": simple()})
    changed = post(client, SAVE, {"document": document, "name": "classify", "based_on": 1})

    assert page.status_code == 200
    assert checked.status_code == 200, checked.content
    assert checked.json()["valid"] is True
    assert created.status_code == 201, created.content
    assert changed.status_code == 403
    assert changed.json()["error"].startswith("You may not change workflows")
    assert classify().versions.count() == 1


# The editor's pages


def test_the_editor_page_opens_for_a_workflow_and_for_a_new_one(admin_client):
    workflow = classify()

    page = admin_client.get(url("admin:graphs_workflow_canvas", workflow))
    new = admin_client.get(url("admin:graphs_workflow_canvas_new"))

    assert page.status_code == 200
    config = page.context["canvas_config"]
    assert (config["workflowId"], config["name"]) == (workflow.pk, "classify")
    assert config["urls"]["publish"] == url("admin:graphs_workflow_canvas_publish", workflow)
    assert new.status_code == 200
    assert new.context["canvas_config"]["workflowId"] is None
    assert "publish" not in new.context["canvas_config"]["urls"]
    assert "loops" in new.context["groups"]


# A test run of a saved draft


def test_a_test_run_of_a_draft_runs_that_version_as_a_test_run(admin_client):
    workflow = _saved_draft(admin_client)
    draft = workflow.versions.get(number=2)
    test_run = reverse("admin:graphs_workflow_test_run", args=[workflow.pk])

    page = admin_client.get(test_run, {"version": 2})
    assert page.status_code == 200
    assert "Runs version 2 (draft)" in page.content.decode()

    response = admin_client.post(f"{test_run}?version=2", {"arguments": '{"value": 1}'})

    assert response.status_code == 302
    run = Run.objects.get()
    assert (run.is_test, run.version_id, run.result) == (True, draft.pk, "tiny")
    workflow.refresh_from_db()
    assert workflow.current_version.number == 1  # still served, untouched


@pytest.mark.parametrize("number", ["²", "99", "x"])
def test_a_test_run_of_a_version_the_workflow_lacks_is_not_found(admin_client, number):
    workflow = classify()
    test_run = reverse("admin:graphs_workflow_test_run", args=[workflow.pk])

    page = admin_client.get(test_run, {"version": number})

    assert page.status_code == 404
    assert Run.objects.count() == 0


def test_a_test_run_without_a_version_runs_the_served_one_as_before(admin_client):
    workflow = _saved_draft(admin_client)
    test_run = reverse("admin:graphs_workflow_test_run", args=[workflow.pk])

    response = admin_client.post(test_run, {"arguments": '{"value": 1}'})

    assert response.status_code == 302
    run = Run.objects.get()
    assert (run.is_test, run.version.number, run.result) == (False, 1, "small")
