"""A hostile agent, holding a real key, against the live server through the MCP tools: a
patch bomb, too many operations, a definition over the size limit, and schemas that would
make the server fetch. Each is refused quickly; the server's memory, its stored versions and a
listener socket on 127.0.0.1 show that nothing was built, stored or reached.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import LiveServer, _manage, start_server
from tests.e2e.test_mcp_client import connect, run
from tests.witnesses import Listener

pytestmark = pytest.mark.timeout(120)

# The bomb: each operation doubles the tools; about 24 exhausted the memory.
BOMB_OPS = 24
DOUBLE_TOOLS = {"op": "copy", "from": "/tools", "path": "/tools/-"}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[LiveServer]:
    yield from start_server(tmp_path_factory.mktemp("bounds"))


@pytest.fixture
def listener() -> Iterator[Listener]:
    with Listener() as listening:
        yield listening


def definition(name: str, schema: dict | None = None, description: str = "Echoes n.") -> dict:
    return {
        "version": "1.0",
        "server": {"name": f"{name}Group", "version": "1.0.0"},
        "tools": [
            {
                "name": name,
                "description": description,
                "inputSchema": schema
                or {"type": "object", "properties": {"n": {"type": "integer"}}},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "exit"},
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


def server_pid(server: LiveServer) -> int:
    """The uvicorn process serving `server`, found by the port on its command line."""
    port = server.url.rsplit(":", 1)[1]
    for proc in Path("/proc").iterdir():
        try:
            arguments = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"uvicorn" in b" ".join(arguments) and port.encode() in arguments:
            return int(proc.name)
    raise AssertionError(f"no uvicorn process on port {port}")


def peak_memory_bytes(pid: int) -> int:
    """The most memory the process has held at once (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


async def version_count(client, name: str) -> int:
    listed = await client.call_tool("list_workflow_versions", {"name": name})
    assert not listed.is_error, listed.content
    return listed.structured_content["total"]


def test_the_copy_doubling_patch_bomb_is_refused_quickly_storing_nothing(server):
    pid = server_pid(server)

    async def scenario():
        async with connect(server, "auto", timeout=60) as client:
            created = await client.call_tool(
                "create_workflow", {"definition": definition("bomb", description="d" * 10_000)}
            )
            assert not created.is_error, created.content
            before = peak_memory_bytes(pid)
            started = time.monotonic()
            refused = await client.call_tool(
                "update_workflow", {"name": "bomb", "patch": [DOUBLE_TOOLS] * BOMB_OPS}
            )
            elapsed = time.monotonic() - started
            grown = peak_memory_bytes(pid) - before
            return refused, elapsed, grown, await version_count(client, "bomb")

    refused, elapsed, grown, versions = run(scenario)
    assert refused.is_error is True
    text = refused.content[0].text
    assert "(copy '/tools/-') is refused, before it was applied: the value at '/tools'" in text
    assert "more than 1,000,000 characters of text (the limit" in text
    assert elapsed < 3, elapsed
    assert grown < 50 * 2**20, f"the server's peak memory grew by {grown / 2**20:.0f} MB"
    assert versions == 1  # only the draft created


def test_a_patch_of_101_operations_is_refused_and_stores_nothing(server):
    touch = {"op": "replace", "path": "/tools/0/description", "value": "Touched."}

    async def scenario():
        async with connect(server, "auto") as client:
            created = await client.call_tool("create_workflow", {"definition": definition("ops")})
            assert not created.is_error, created.content
            refused = await client.call_tool(
                "update_workflow", {"name": "ops", "patch": [touch] * 101}
            )
            accepted = await client.call_tool(
                "update_workflow", {"name": "ops", "patch": [touch] * 100}
            )
            return refused, accepted, await version_count(client, "ops")

    refused, accepted, versions = run(scenario)
    assert refused.is_error is True
    assert refused.content[0].text == (
        "Error: Invalid arguments for update_workflow: patch: List should have at most 100 items "
        "after validation, not 101"
    )
    assert not accepted.is_error, accepted.content
    assert versions == 2  # the draft and the 100-operation update


def test_a_definition_over_the_size_limit_is_refused_by_its_size_by_every_builder_tool(server):
    # YAML text a few bytes over the limit (within the request body limit), and a JSON
    # object with more values than a definition may hold.
    text = json.dumps(definition("big")) + "\n#" + "x" * 1_000_000
    data = definition("big")
    data["tools"][0]["description"] = [0] * 200_001

    async def scenario():
        answers = {}
        async with connect(server, "auto", timeout=60) as client:
            created = await client.call_tool("create_workflow", {"definition": definition("big")})
            assert not created.is_error, created.content
            for label, sent in (("text", text), ("data", data)):
                for tool, arguments in (
                    ("validate_workflow", {"definition": sent}),
                    ("create_workflow", {"definition": sent}),
                    ("update_workflow", {"name": "big", "definition": sent}),
                ):
                    answers[label, tool] = await client.call_tool(tool, arguments)
            return answers, await version_count(client, "big")

    answers, versions = run(scenario)
    for (label, tool), answer in answers.items():
        problems = answer.structured_content["problems"]
        assert [problem["code"] for problem in problems] == ["definition_too_large"], (label, tool)
        limit = "over the limit of 1,000,000" if label == "text" else "more than 200,000 values"
        assert limit in problems[0]["message"], (label, tool, problems)
    assert versions == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["http", "file"])
def test_a_schema_with_a_remote_ref_is_refused_at_validation_and_creation(server, listener, kind):
    url = listener.url if kind == "http" else "file:///etc/passwd"
    schema = {"type": "object", "properties": {"n": {"$ref": url}}}
    name = f"refers_{kind}"

    async def scenario():
        async with connect(server, "auto", timeout=30) as client:
            checked = await client.call_tool(
                "validate_workflow", {"definition": definition(name, schema)}
            )
            created = await client.call_tool(
                "create_workflow", {"definition": definition(name, schema)}
            )
            found = await client.call_tool("list_workflow_versions", {"name": name})
            return checked, created, found

    checked, created, found = run(scenario)
    report = checked.structured_content
    problems = [(p["code"], p["path"]) for p in report["problems"] if p["severity"] == "error"]
    assert report["valid"] is False
    assert problems == [("schema_ref_not_local", "/tools/0/inputSchema/properties/n/$ref")]
    assert created.is_error is True
    assert f"$ref {url!r} at /properties/n/$ref is not local" in json.dumps(
        created.structured_content["problems"]
    )
    assert found.is_error is True  # no workflow was stored
    assert listener.connections == []


@pytest.mark.timeout(60)
def test_a_stored_schema_with_a_remote_ref_is_not_fetched_when_called(server, listener):
    url = listener.url

    async def publish():
        async with connect(server, "auto") as client:
            created = await client.call_tool("create_workflow", {"definition": definition("old")})
            assert not created.is_error, created.content
            published = await client.call_tool("publish_workflow", {"name": "old", "version": 1})
            assert not published.is_error, published.content

    run(publish)
    # As a row saved before schemas were checked holds it: written past every validation.
    schema = {"type": "object", "properties": {"n": {"$ref": url}}}
    _manage(
        server.env,
        "shell",
        "-c",
        "from graphs.models import Workflow, WorkflowVersion\n"
        "workflow = Workflow.objects.get(name='old')\n"
        f"schema = {schema!r}\n"
        "version = workflow.current_version\n"
        "WorkflowVersion.objects.filter(pk=version.pk).update(\n"
        "    definition={**version.definition, 'inputSchema': schema})\n"
        "Workflow.objects.filter(pk=workflow.pk).update(input_schema=schema)\n",
    )

    async def call():
        async with connect(server, "auto", timeout=30) as client:
            return await client.call_tool("old", {"n": 1})

    started = time.monotonic()
    called = run(call)
    assert time.monotonic() - started < 10
    assert called.is_error is True
    assert f"$ref {url!r}" in called.content[0].text
    assert listener.connections == []
