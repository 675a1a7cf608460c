"""Data stays with its owner (issue 24, item 7), against a live server with real keys and the
official client, as a hostile builder would try it: a key without runs:read cannot read
another key's run through test_workflow's `from_run` (run ids are sequential), get_workflow
shows no credential of a server's URL or stdio args, a run's error quotes none, and a
`format: password` argument copied under another key is in no row of the database.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import LiveServer, last_line, start_server
from tests.e2e.test_mcp_client import connect, run
from tests.witnesses import database_rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

BUILDER_SCOPES = "tools:read,tools:execute,workflows:write"
PRIVATE = "A-PRIVATE-ANSWER-3141"
# The operator's credentials, each in a place get_workflow or an error could show it.
CREDENTIALS = ("PG-PASSWORD-e2e-77", "TOKEN-e2e-88", "HTTP-PASS-e2e-99", "API-KEY-e2e-66")
PASSWORD = "E2E-PASSWORD-SECRET-1"

# The operator's file: a tool whose mcp node a test mocks; a stdio server given a DSN with its
# password and a token flag; an HTTP server with user info and an API key in its URL, where
# nothing listens; and a tool copying its password argument under other keys.
OPERATOR_GRAPH = """
version: "1.0"
server: {{name: "dataOps", version: "1.0.0"}}
mcpServers:
  pg:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-postgres",
           "postgresql://app:PG-PASSWORD-e2e-77@db.internal/app", "--token", "TOKEN-e2e-88"]
  remote:
    type: http
    url: "http://svc:HTTP-PASS-e2e-99@127.0.0.1:{port}/mcp?api_key=API-KEY-e2e-66&region=eu"
tools:
  - name: fetch_private
    description: Fetches a page.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: page}}
      - {{id: page, type: mcp, server: remote, tool: fetch, args: {{}}, next: exit}}
      - {{id: exit, type: exit}}
  - name: both_servers
    description: Queries the database, then calls the remote server.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: query}}
      - {{id: query, type: mcp, server: pg, tool: query, args: {{sql: "select 1"}}, next: call}}
      - {{id: call, type: mcp, server: remote, tool: call, args: {{}}, next: exit}}
      - {{id: exit, type: exit}}
  - name: copy_password
    description: Logs in.
    inputSchema:
      type: object
      properties:
        user: {{type: string}}
        pw: {{type: string, format: password}}
    nodes:
      - {{id: entry, type: entry, next: copy}}
      - id: copy
        type: transform
        transform: {{expr: '{{"copied": $.entry.pw, "note": "pw is " & $.entry.pw}}'}}
        next: exit
      - {{id: exit, type: exit}}
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def data_server(tmp_path_factory) -> Iterator[tuple[LiveServer, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("data")
    graph = tmp / "ops.yaml"
    graph.write_text(OPERATOR_GRAPH.format(port=_closed_port()))
    (tmp / "server").mkdir()
    keys = {"a": ("alice", BUILDER_SCOPES), "b": ("mallory", BUILDER_SCOPES),
            "reader": ("auditor", BUILDER_SCOPES + ",runs:read")}  # fmt: skip
    commands = [
        ("import_graph", str(graph)),
        *(("create_api_key", "--name", name, "--scopes", scopes) for name, scopes in keys.values()),
    ]
    for server in start_server(Path(tmp / "server"), commands):
        made = dict(zip(keys, map(last_line, server.printed[1:]), strict=True))
        yield server, made


def _text(result) -> str:
    return " ".join(getattr(part, "text", "") for part in result.content) + json.dumps(
        result.structured_content
    )


def test_a_key_cannot_read_another_keys_run_through_from_run(data_server):
    server, keys = data_server
    answer = {"content": [{"type": "text", "text": PRIVATE}]}

    async def scenario():
        async with connect(server, "auto", key=keys["a"], timeout=30) as alice:
            tested = await alice.call_tool(
                "test_workflow", {"name": "fetch_private", "mocks": {"page": answer}}
            )
            assert not tested.is_error, _text(tested)
            alices = tested.structured_content["run_id"]
        runs_before = database_rows(server, "SELECT count(*) FROM graphs_run")
        async with connect(server, "auto", key=keys["b"], timeout=30) as mallory:
            stolen = await mallory.call_tool(
                "test_workflow",
                {"name": "fetch_private", "mocks": {"page": {"from_run": alices}}},
            )
            missing = await mallory.call_tool(
                "test_workflow",
                {"name": "fetch_private", "mocks": {"page": {"from_run": alices + 1000}}},
            )
            # Its own run it may take from.
            own = await mallory.call_tool(
                "test_workflow",
                {"name": "fetch_private", "mocks": {"page": {"content": [
                    {"type": "text", "text": "mallory's own"}]}}},
            )  # fmt: skip
            replayed = await mallory.call_tool(
                "test_workflow",
                {
                    "name": "fetch_private",
                    "mocks": {"page": {"from_run": own.structured_content["run_id"]}},
                },
            )
        async with connect(server, "auto", key=keys["reader"], timeout=30) as auditor:
            read = await auditor.call_tool(
                "test_workflow",
                {"name": "fetch_private", "mocks": {"page": {"from_run": alices}}},
            )
        return alices, runs_before, stolen, missing, replayed, read

    alices, runs_before, stolen, missing, replayed, read = run(scenario)

    assert stolen.is_error
    assert PRIVATE not in _text(stolen)
    # The words a run that does not exist gets: the id tells nothing of whose run it is.
    assert stolen.content[0].text.replace(str(alices), "N") == missing.content[0].text.replace(
        str(alices + 1000), "N"
    )
    assert "runs:read" in stolen.content[0].text
    assert not replayed.is_error, _text(replayed)
    assert "mallory's own" in _text(replayed)
    assert not read.is_error, _text(read)
    assert PRIVATE in _text(read)
    # The refused calls made no run (the two allowed ones of mallory and the auditor's did).
    assert database_rows(server, "SELECT count(*) FROM graphs_run")[0][0] == runs_before[0][0] + 3


def test_get_workflow_shows_no_credential_and_what_it_shows_can_be_sent_back(data_server):
    server, keys = data_server
    providers_before = database_rows(server, "SELECT id, name FROM nodespecs_provider ORDER BY id")

    async def scenario():
        async with connect(server, "auto", key=keys["b"], timeout=30) as mallory:
            view = await mallory.call_tool("get_workflow", {"name": "both_servers"})
        # The operator's key (workflows:admin) sends back what it was shown, one word changed.
        async with connect(server, "auto", timeout=30) as operator:
            shown = await operator.call_tool("get_workflow", {"name": "both_servers"})
            definition = shown.structured_content["definition"]
            definition["tools"][0]["description"] = "Queries, then calls."
            saved = await operator.call_tool(
                "update_workflow", {"name": "both_servers", "definition": definition}
            )
        return view, saved

    view, saved = run(scenario)

    assert not view.is_error, _text(view)
    for credential in CREDENTIALS:
        assert credential not in _text(view)
    servers = view.structured_content["definition"]["mcpServers"]
    assert servers["pg"]["args"][2] == "postgresql://app:<secret>@db.internal/app"
    assert servers["pg"]["args"][4] == "<secret>"
    assert servers["remote"]["url"].startswith("http://svc:<secret>@127.0.0.1:")
    assert servers["remote"]["url"].endswith("/mcp?api_key=<secret>&region=eu")
    assert not saved.is_error, _text(saved)
    # The masked entries named their providers: none was added, none holds a mask.
    assert (
        database_rows(server, "SELECT id, name FROM nodespecs_provider ORDER BY id")
        == providers_before
    )
    stored = database_rows(server, "SELECT url, args FROM nodespecs_provider")
    assert "<secret>" not in json.dumps(stored)
    assert "PG-PASSWORD-e2e-77" in json.dumps(stored)  # the operator's settings are intact


def test_a_run_error_names_the_server_but_quotes_none_of_its_credentials(data_server):
    server, keys = data_server

    async def scenario():
        async with connect(server, "auto", key=keys["b"], timeout=30) as mallory:
            return await mallory.call_tool("fetch_private", {})

    failed = run(scenario)

    assert failed.is_error
    assert "127.0.0.1" in _text(failed)  # it still says which server
    stored = database_rows(server, "SELECT error FROM graphs_run") + database_rows(
        server, "SELECT error FROM graphs_nodeexecution"
    )
    assert any("127.0.0.1" in (error or "") for (error,) in stored)
    for credential in CREDENTIALS:
        assert credential not in _text(failed)
        assert credential not in json.dumps(stored)


def test_a_password_argument_copied_under_other_keys_is_in_no_row(data_server):
    server, keys = data_server

    async def scenario():
        async with connect(server, "auto", key=keys["b"], timeout=30) as mallory:
            return await mallory.call_tool("copy_password", {"user": "bob", "pw": PASSWORD})

    called = run(scenario)

    assert not called.is_error, _text(called)
    assert f"pw is {PASSWORD}" in _text(called)  # the node got the real value
    history = json.dumps(
        database_rows(server, "SELECT arguments, result, error FROM graphs_run")
        + database_rows(server, "SELECT detail, output, error FROM graphs_nodeexecution")
    )
    assert PASSWORD not in history
    assert "pw is ********" in history
