"""The providers a run calls come from their snapshot (nodespecs/providers/connections.py),
not from a query per run: a provider disabled is refused by the next run at once, and one
changed by another process without a shared cache within a second."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection
from django.utils import timezone

from graphs.authoring.files import graph_import
from graphs.execution.runs import RunRequest, workflow_call
from nodespecs.models import Provider
from nodespecs.providers.connections import provider_connections
from nodespecs.providers.lifecycle import provider_save
from nodespecs.snapshots import TABLE_CHECK_SECONDS
from tests.graph_files import OPERATOR
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.peers import echo_server_command

# Real commits: a save announces its change once it is committed, as in production.
pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

GRAPH = """
version: "1.0"
server: {{name: providerTests, version: "1.0.0"}}
mcpServers:
  echo: {server}
tools:
  - name: add_one
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: add}}
      - {{id: add, type: mcp, server: echo, tool: add, args: {{a: $.entry.a, b: 1}}, next: exit}}
      - {{id: exit, type: exit}}
"""


@pytest.fixture
def echo(servers):  # noqa: F811
    """add_one imported, its echo provider, and a first run that read the providers."""
    command, *args = echo_server_command()
    server = json.dumps({"command": command, "args": args})
    graph_import(text=GRAPH.format(server=server), caller=OPERATOR)
    assert call().succeeded
    return Provider.objects.get(name="echo")


def call():
    return workflow_call(RunRequest(name="add_one", arguments={"a": 1}))


def test_a_provider_disabled_is_refused_by_the_next_run_at_once(echo):
    echo.enabled = False
    provider_save(provider=echo, caller=OPERATOR)

    refused = call()

    assert refused.status == "failed"
    assert "Provider 'echo' (server 'echo') is disabled: enable it" in refused.error
    echo.enabled = True
    provider_save(provider=echo, caller=OPERATOR)
    assert call().result == {"sum": 2}


def test_a_provider_deleted_is_refused_by_the_next_run_at_once(echo):
    echo.delete()

    refused = call()

    assert "Server 'echo' has no registered provider any more" in refused.error


def test_a_provider_disabled_by_another_process_is_refused_within_a_second(echo):
    # Another process's save, without a cache shared with this one: no announcement reaches
    # this process, the table's stamp (its latest change) does.
    Provider.objects.filter(pk=echo.pk).update(enabled=False, updated_at=timezone.now())
    time.sleep(TABLE_CHECK_SECONDS)

    assert "is disabled" in call().error


def test_a_run_reads_no_provider_rows(echo):
    queries = []

    def record(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        assert call().succeeded
        assert provider_connections({echo.pk})[echo.pk].enabled

    # At most the snapshot's look at the table's stamp (once a second), never its rows.
    assert all("COUNT(" in sql for sql in queries if "nodespecs_provider" in sql), queries
