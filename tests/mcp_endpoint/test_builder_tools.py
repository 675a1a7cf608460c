"""The builder tools over MCP: drafts are stored but not served, read back, changed with a
JSON Patch, tested with mocks and published; each refusal says why and stores nothing.
(tests/e2e/test_agent_builds_a_workflow.py drives the whole loop with the official client.)"""

from __future__ import annotations

import pytest
import yaml

from graphs.models import Run, Workflow
from tests.graph_files import FILES
from tests.mcp_endpoint.helpers import make_key, modern, result

pytestmark = pytest.mark.timeout(30)

LOOPS = yaml.safe_load((FILES / "loops.yaml").read_text())


def draft_of(tool_name: str, **changes) -> dict:
    """loops.yaml with one tool, renamed into a group of its own."""
    [tool] = [t for t in LOOPS["tools"] if t["name"] == tool_name]
    return {
        **LOOPS,
        "server": {"name": "built", "version": "1.0.0"},
        "tools": [{**tool, **changes}],
    }


def call(client, key, name, arguments):
    return result(modern(client, "tools/call", {"name": name, "arguments": arguments}, key=key))


def names(client, key) -> set[str]:
    return {tool["name"] for tool in result(modern(client, "tools/list", key=key))["tools"]}


@pytest.fixture
def created(client, key):
    answer = call(client, key, "create_workflow", {"definition": draft_of("is_zero", name="zero")})
    assert answer.get("isError") is not True, answer
    return answer["structuredContent"]


def test_a_created_draft_is_stored_but_not_served(client, key, created):
    assert created == {"workflow": "zero", "version": 1, "status": "draft", "created": True}
    assert "zero" not in names(client, key)
    view = call(client, key, "get_workflow", {"name": "zero"})["structuredContent"]
    assert (view["version"], view["status"], view["published_version"]) == (1, "draft", None)
    assert view["definition"]["tools"][0]["name"] == "zero"
    versions = call(client, key, "list_workflow_versions", {"name": "zero"})["structuredContent"]
    assert versions["versions"][0]["author"].startswith("key:")


def test_publishing_serves_the_draft(client, key, created):
    published = call(client, key, "publish_workflow", {"name": "zero", "version": 1})
    assert published["structuredContent"]["status"] == "published"
    assert "zero" in names(client, key)
    ran = call(client, key, "zero", {"n": 0})
    assert ran.get("isError") is not True, ran


def test_a_patch_makes_a_new_draft_and_get_workflow_shows_the_diff(client, key, created):
    patch = [{"op": "replace", "path": "/tools/0/description", "value": "Is it zero?"}]
    updated = call(client, key, "update_workflow", {"name": "zero", "patch": patch})
    assert updated["structuredContent"]["version"] == 2
    view = call(client, key, "get_workflow", {"name": "zero", "diff_from": 1})
    assert view["structuredContent"]["diff"] == patch


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"patch": [{"op": "remove", "path": "/tools/0/nowhere"}]}, "The patch cannot be applied"),
        ({"patch": [{"op": "jump"}]}, "cannot be applied"),
        ({}, "Send either `definition`"),
        ({"definition": {"version": "1.0"}, "patch": []}, "not both"),
        (
            {"patch": [{"op": "replace", "path": "/tools/0/name", "value": "other"}]},
            "keeps its name",
        ),
    ],
)
def test_a_bad_update_is_refused_and_stores_nothing(client, key, created, arguments, message):
    refused = call(client, key, "update_workflow", {"name": "zero", **arguments})
    assert refused["isError"] is True
    assert message in refused["content"][0]["text"]
    assert Workflow.objects.get(name="zero").versions.count() == 1


def test_an_invalid_definition_is_refused_with_its_problems(client, key):
    broken = draft_of("is_zero", name="broken")
    broken["tools"][0]["nodes"] = [{"id": "entry", "type": "entry", "next": "nowhere"}]
    refused = call(client, key, "create_workflow", {"definition": broken})
    assert refused["isError"] is True
    problems = refused["structuredContent"]["problems"]
    assert any(problem["severity"] == "error" for problem in problems)
    assert not Workflow.objects.filter(name="broken").exists()


def test_creating_an_existing_name_is_refused(client, key, created):
    again = call(client, key, "create_workflow", {"definition": draft_of("is_zero", name="zero")})
    assert again["isError"] is True
    assert "update_workflow" in again["content"][0]["text"]


def test_test_workflow_runs_a_draft_and_reports_each_node(client, key, created):
    tested = call(client, key, "test_workflow", {"name": "zero", "arguments": {"n": 0}})
    assert tested.get("isError") is not True, tested
    report = tested["structuredContent"]
    assert report["nodes"][0]["id"] == "entry"
    assert Run.objects.get(pk=report["run_id"]).is_test is True


def test_test_workflow_refuses_mocks_of_nodes_that_do_not_exist(client, key, created):
    refused = call(
        client, key, "test_workflow", {"name": "zero", "arguments": {"n": 0}, "mocks": {"x": 1}}
    )
    assert refused["isError"] is True
    assert "no mcp or approval node has that id" in refused["content"][0]["text"]


def test_writing_needs_workflows_write_and_validating_needs_tools_read(client, transactional_db):
    reader = make_key(["tools:read", "tools:execute"])
    definition = draft_of("is_zero", name="zero")
    refused = modern(
        client,
        "tools/call",
        {"name": "create_workflow", "arguments": {"definition": definition}},
        key=reader,
    )
    assert refused.status_code == 403
    assert "workflows:write" in refused.json()["error"]["message"]
    checked = call(client, reader, "validate_workflow", {"definition": definition})
    assert checked["structuredContent"]["valid"] is True


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)


@pytest.mark.parametrize(
    ("definition", "code"),
    [
        ("x" * 1_000_001, "definition_too_large"),
        ("version: !!python/object:os.system 1\n", "yaml_unreadable"),
        (BOMB, "yaml_unreadable"),
        ("- just\n- a list\n", "not_a_mapping"),
    ],
)
def test_unreadable_definitions_are_refused_and_store_nothing(client, key, definition, code):
    refused = call(client, key, "create_workflow", {"definition": definition})
    assert refused["isError"] is True
    assert [problem["code"] for problem in refused["structuredContent"]["problems"]] == [code]
    assert not Workflow.objects.exists()


def test_a_version_that_no_longer_validates_is_not_published(client, key, created, settings):
    settings.GRAPHS_MAX_NODE_EXECUTIONS_CEILING = 10  # below the loops file's 500
    refused = call(client, key, "publish_workflow", {"name": "zero", "version": 1})
    assert refused["isError"] is True
    assert "limit_above_ceiling" in {p["code"] for p in refused["structuredContent"]["problems"]}
    assert Workflow.objects.get(name="zero").current_version is None
