"""A downstream server that says its own secret (on stderr, in an error echoing the
Authorization header) never gets it into a provider's last error, the admin, a run's history
or the logs, and the error still says what went wrong (nodespecs/downstream/transports.py)."""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Iterator

import pytest
from django.urls import reverse

from graphs.authoring.files import graph_import
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Run
from nodespecs.downstream.client import Connection
from nodespecs.downstream.diagnostics import _STDERR_KEEP_BYTES, StderrTail
from nodespecs.models import Provider
from nodespecs.providers.lifecycle import ProviderRefreshError, provider_refresh
from nodespecs.secrets import REDACTED, redact
from tests.graph_files import OPERATOR
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.peers import echo_http_server, echo_server_command

SECRET = "sekrit-0123456789"
GRAPH = """
version: "1.0"
server: {{name: leakTests, version: "1.0.0"}}
mcpServers:
  leaky: {server}
tools:
  - name: call_leaky
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: call}}
      - {{id: call, type: mcp, server: leaky, tool: echo, args: {{value: hi}}, next: exit}}
      - {{id: exit, type: exit}}
"""
# Each leaky peer, and what its error must still say.
PEERS = {
    "stdio server printing its env": (
        "exited with code 1 while starting",
        f"the upstream API refused the token {REDACTED}",
    ),
    "HTTP 401 echoing the header": ("answered HTTP 401 Unauthorized while starting", "credentials"),
    "HTTP error echoing the header": (
        "answered with error -32001 while starting",
        f"Authorization: {REDACTED} is not a valid credential",
    ),
}


@pytest.fixture(params=list(PEERS))
def leaky(request, db, servers) -> Iterator[tuple[Provider, tuple[str, ...]]]:  # noqa: F811
    """A provider (imported with a workflow calling it) whose server gives its secret away,
    and the phrases its error must hold."""
    if request.param.startswith("stdio"):
        command, *args = echo_server_command()
        env = {"ECHO_SERVER_LEAK_ENV": "API_TOKEN", "API_TOKEN": SECRET}
        yield _import({"command": command, "args": args, "env": env}), PEERS[request.param]
        return
    status = "401" if "401" in request.param else "200"
    with echo_http_server("--reject-authorization", status) as url:
        server = {
            "type": "streamableHttp",
            "url": url,
            "headers": {"Authorization": f"Bearer {SECRET}"},
        }
        yield _import(server), PEERS[request.param]


def _import(server: dict) -> Provider:
    report = graph_import(text=GRAPH.format(server=json.dumps(server)), caller=OPERATOR)
    return Provider.objects.get(name=report.providers["leaky"])


def assert_clean(text: str, phrases: tuple[str, ...]) -> None:
    assert SECRET not in text
    for phrase in phrases:
        assert phrase in text


@pytest.mark.slow
def test_a_refresh_records_and_the_admin_shows_the_error_without_the_secret(leaky, admin_client):
    provider, phrases = leaky

    with pytest.raises(ProviderRefreshError) as raised:
        provider_refresh(provider=provider)

    provider.refresh_from_db()
    assert_clean(provider.last_error, phrases)
    assert str(raised.value) == provider.last_error
    change = admin_client.get(reverse("admin:nodespecs_provider_change", args=[provider.pk]))
    assert_clean(html.unescape(change.content.decode()), phrases)
    listing = admin_client.get(reverse("admin:nodespecs_provider_changelist"))
    text = html.unescape(listing.content.decode())
    assert SECRET not in text
    assert provider.last_error[:40] in text


@pytest.mark.slow
def test_a_run_records_the_node_error_without_the_secret(leaky):
    _, phrases = leaky

    outcome = workflow_call(RunRequest(name="call_leaky", arguments={}))

    run = Run.objects.get(pk=outcome.run_id)
    assert run.status == Run.Status.FAILED
    assert_clean(run.error, phrases)
    node = run.node_executions.get(node_id="call")
    assert node.status == "failed"
    assert_clean(node.error, phrases)


@pytest.mark.slow
def test_nothing_logged_holds_the_secret(leaky, caplog):
    caplog.set_level(logging.DEBUG)
    provider, _ = leaky

    with pytest.raises(ProviderRefreshError):
        provider_refresh(provider=provider)
    workflow_call(RunRequest(name="call_leaky", arguments={}))

    records = [record.getMessage() for record in caplog.records]
    assert records, "nothing was logged, so nothing was checked"
    for text in records:
        assert SECRET not in text
    if provider.transport == "stdio":
        quoted = f"leaky stderr: echo_server: the upstream API refused the token {REDACTED}"
        assert quoted in records


def test_redact_replaces_the_longest_secret_first_and_leaves_short_values():
    text = "token abcd-efgh, prefix abcd, flag yes"

    assert redact(text, ["abcd", "abcd-efgh", "yes"]) == (
        f"token {REDACTED}, prefix {REDACTED}, flag yes"
    )
    assert redact(text, []) == text


def test_a_connection_s_secrets_are_its_env_and_header_values_and_bare_credentials():
    connection = Connection(
        name="web",
        transport="streamable_http",
        url="http://127.0.0.1/mcp",
        env=(("API_TOKEN", "env-token"),),
        headers=(("Authorization", "Bearer header-token"), ("X-Api-Key", "key-1234")),
    )

    assert set(connection.secrets) == {
        "env-token",
        "Bearer header-token",
        "header-token",
        "key-1234",
    }


def test_a_secret_split_between_two_reads_of_stderr_is_still_redacted(caplog):
    caplog.set_level(logging.DEBUG, logger="nodespecs.downstream.client")
    tail = StderrTail("split", (SECRET,))

    tail.data_received(f"token {SECRET[:6]}".encode())
    tail.data_received(f"{SECRET[6:]} refused\nlast words".encode())
    tail.connection_lost(None)

    assert [record.getMessage() for record in caplog.records] == [
        f"split stderr: token {REDACTED} refused",
        "split stderr: last words",
    ]
    assert tail.quote() == f"its last stderr lines: token {REDACTED} refused | last words"


def test_a_secret_cut_by_the_end_of_the_kept_stderr_is_not_quoted():
    tail = StderrTail("long", (SECRET,))
    first, last = f"token {SECRET}\n".encode(), b"\nthe end\n"
    # Enough output that the kept tail starts in the middle of the secret.
    cut = len(first) - 7
    filler = b"x" * (_STDERR_KEEP_BYTES - len(first) - len(last) + cut)

    tail.data_received(first + filler + last)

    assert SECRET[-6:] not in tail.quote()
    assert tail.quote().endswith("the end")
