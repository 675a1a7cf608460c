"""A workflow definition whose `mcpServers` names a stdio server that no registered provider
matches exactly may be saved only by a superuser or an operator's `manage.py import_graph`
(graphs/authoring/services.py, `workflow_providers`, which `graph_import` and any API go through);
every other caller uses registered providers or HTTP/SSE servers (issue 13, item 5)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from graphs.authoring.files import GraphFileError, graph_import
from graphs.authoring.services import workflow_providers
from graphs.models import Workflow, WorkflowGroup
from nodespecs.callers import Caller, caller_command, caller_user
from nodespecs.downstream.client import Connection
from nodespecs.models import AuditEvent, Provider
from nodespecs.providers.lifecycle import provider_save

SECRET = "workflow-rights-secret-777"
SHELL = {"command": "/bin/sh", "args": ["-c", "touch /tmp/switchyard-proof"]}
HTTP = {"type": "streamableHttp", "url": "https://mcp.example.com/mcp"}
API_CALLER = Caller(actor="api-key:abc123")


def graph(server: dict) -> str:
    """A graph file with one workflow calling a tool of server `runner`."""
    return f"""
version: "1.0"
server: {{name: "rights", version: "1.0.0"}}
mcpServers:
  runner: {json.dumps(server)}
tools:
  - name: run_it
    description: Calls the runner.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: call}}
      - {{id: call, type: mcp, server: runner, tool: go, args: {{}}, next: exit}}
      - {{id: exit, type: exit}}
"""


def events() -> list[tuple[str, str, str, str, list[str]]]:
    rows = AuditEvent.objects.order_by("id")
    return [(e.actor, e.action, e.object_type, e.object_label, e.fields) for e in rows]


def refusal_of(text: str, caller: Caller) -> str:
    with pytest.raises(GraphFileError) as refused:
        graph_import(text=text, caller=caller)
    return str(refused.value)


@pytest.fixture
def staff(author):
    """A staff user with every node catalog permission, providers included; not a superuser."""
    assert not author.is_superuser
    return author


class TestRefused:
    @pytest.mark.parametrize("who", ["staff", "api"])
    def test_a_new_stdio_server_is_refused_naming_it_and_the_fix(self, staff, who):
        caller = caller_user(staff) if who == "staff" else API_CALLER

        message = refusal_of(graph(SHELL), caller)

        assert message.startswith("'runner' is a stdio server: Switchyard would run '/bin/sh'")
        assert "only a superuser (or an operator, with manage.py) may register" in message
        assert "Ask a superuser to register it as a provider" in message
        assert "or use a Streamable HTTP or SSE server" in message
        # All or nothing: no provider, workflow, group or audit event.
        assert not Provider.objects.exists()
        assert not Workflow.objects.exists()
        assert not WorkflowGroup.objects.exists()
        assert events() == []

    def test_the_service_refuses_it_whoever_calls(self, db):
        connection = Connection(name="runner", transport="stdio", command="/bin/sh")

        with pytest.raises(ValidationError) as refused:
            workflow_providers(servers={"runner": connection}, caller=API_CALLER)

        assert "'runner' is a stdio server" in refused.value.message_dict["servers"][0]
        assert not Provider.objects.exists()

    def test_a_registered_providers_command_with_other_args_is_a_new_server(self, staff):
        registered = Provider(name="runner", command="/bin/sh", args=["-c", "true"])
        provider_save(provider=registered, caller=caller_command("test"))

        assert "'runner' is a stdio server" in refusal_of(graph(SHELL), caller_user(staff))
        assert Provider.objects.count() == 1


class TestAllowed:
    def test_a_superuser_adds_a_stdio_server_and_the_trail_records_both(self, admin_user):
        server = SHELL | {"env": {"API_TOKEN": SECRET}}

        report = graph_import(text=graph(server), caller=caller_user(admin_user))

        assert report.created == ["run_it"]
        provider = Provider.objects.get(name=report.providers["runner"])
        assert provider.command == "/bin/sh"
        assert Workflow.objects.get(name="run_it").current_version.author_name == "admin"
        provider_fields = ["args", "command", "env", "name", "title"]
        assert events() == [
            ("admin", "created", "nodespecs.provider", "runner", provider_fields),
            ("admin", "created", "graphs.workflow", "run_it", []),
        ]
        assert SECRET not in str(list(AuditEvent.objects.values()))

    def test_the_import_command_adds_it_as_an_operator(self, db, tmp_path):
        path = tmp_path / "rights.yaml"
        path.write_text(graph(SHELL))

        call_command("import_graph", str(path), stdout=io.StringIO())

        assert Provider.objects.get().command == "/bin/sh"
        assert [(actor, action, kind) for actor, action, kind, _, _ in events()] == [
            ("command:import_graph", "created", "nodespecs.provider"),
            ("command:import_graph", "created", "graphs.workflow"),
        ]

    def test_staff_may_use_an_identical_registered_provider(self, staff):
        registered = Provider(name="shell", command="/bin/sh", args=SHELL["args"])
        provider_save(provider=registered, caller=caller_command("test"))
        AuditEvent.objects.all().delete()

        report = graph_import(text=graph(SHELL), caller=caller_user(staff))

        assert report.providers == {"runner": "shell"}
        assert Provider.objects.count() == 1
        assert events() == [(staff.username, "created", "graphs.workflow", "run_it", [])]

    @pytest.mark.parametrize("who", ["staff", "api"])
    def test_any_caller_may_add_an_http_server(self, staff, who):
        caller = caller_user(staff) if who == "staff" else API_CALLER

        report = graph_import(text=graph(HTTP), caller=caller)

        assert report.created == ["run_it"]
        assert Provider.objects.get().url == HTTP["url"]


class TestAllowedCommands:
    @pytest.fixture(autouse=True)
    def allowed(self, settings):
        settings.PROVIDER_ALLOWED_COMMANDS = ["npx"]

    def test_even_a_superuser_is_refused_another_command(self, admin_user):
        message = refusal_of(graph(SHELL), caller_user(admin_user))

        assert message == (
            "server 'runner': command '/bin/sh' is not one that PROVIDER_ALLOWED_COMMANDS "
            "allows (npx); use one of those, written exactly so, or ask the operator to add it "
            "to the setting."
        )
        assert not Provider.objects.exists()

    def test_so_is_the_import_command(self, db, tmp_path):
        path = tmp_path / "rights.yaml"
        path.write_text(graph(SHELL))

        with pytest.raises(CommandError, match="PROVIDER_ALLOWED_COMMANDS"):
            call_command("import_graph", str(path), stdout=io.StringIO())

        assert not Provider.objects.exists()

    def test_an_allowed_command_is_imported(self, admin_user):
        report = graph_import(
            text=graph({"command": "npx", "args": ["-y", "server"]}), caller=caller_user(admin_user)
        )
        assert report.created == ["run_it"]
