"""The audit trail: changes through the admin and through commands leave events saying who
changed what, with field names and never secret values (nodespecs/audit.py)."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse

from graphs.admin.forms import editor_text
from graphs.models import Workflow
from mcp_endpoint.access.keys import api_key_create
from mcp_endpoint.models import ApiKey
from nodespecs.admin.audit import audit_url
from nodespecs.audit import Action, audit_record
from nodespecs.models import AuditEvent, NodeSpec, Provider
from tests.graph_files import import_file
from tests.nodespecs.test_admin import form_data as spec_form_data
from tests.nodespecs.test_admin import new_document

SECRET = "audit-secret-value-31337"
CHANGELIST = reverse("admin:nodespecs_auditevent_changelist")


def events(**filters) -> list[tuple[str, str, str, str, list[str]]]:
    """(actor, action, object type, label, fields) of the matching events, oldest first."""
    rows = AuditEvent.objects.filter(**filters).order_by("id")
    return [(e.actor, e.action, e.object_type, e.object_label, e.fields) for e in rows]


def assert_no_secret_in_the_trail(*secrets: str) -> None:
    stored = json.dumps(list(AuditEvent.objects.values()), default=str)
    for secret in secrets:
        assert secret not in stored


def run(command: str, *args: str) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def provider_form(**fields: str) -> dict[str, str]:
    return {
        "name": "files",
        "transport": "stdio",
        "command": "npx",
        "args": "",
        "env": f"API_TOKEN={SECRET}",
        "headers": "",
        "timeout_seconds": "30",
        "enabled": "on",
    } | fields


class TestAdmin:
    def test_adding_and_changing_a_provider_records_who_and_which_fields(
        self, admin_client, admin_user
    ):
        admin_client.post(reverse("admin:nodespecs_provider_add"), provider_form())
        provider = Provider.objects.get(name="files")
        change = reverse("admin:nodespecs_provider_change", args=[provider.pk])
        response = admin_client.post(
            change, provider_form(env=f"API_TOKEN=\nOTHER={SECRET}-2", title="Files")
        )
        assert response.status_code == 302

        # Recorded by provider_save, which names the fields whose values changed (args, left
        # empty, did not).
        assert events() == [
            ("admin", "created", "nodespecs.provider", "files", ["command", "env", "name"]),
            ("admin", "changed", "nodespecs.provider", "files", ["env", "title"]),
        ]
        assert_no_secret_in_the_trail(SECRET)

    def test_saving_without_a_change_records_nothing(self, admin_client):
        provider = Provider.objects.create(name="files", command="npx", env={"API_TOKEN": "x"})
        change = reverse("admin:nodespecs_provider_change", args=[provider.pk])

        response = admin_client.post(change, provider_form(env="API_TOKEN="))

        assert response.status_code == 302
        assert events() == []

    def test_deleting_a_provider_keeps_its_label(self, admin_client):
        provider = Provider.objects.create(name="gone", command="true", env={"T": SECRET})
        delete = reverse("admin:nodespecs_provider_delete", args=[provider.pk])

        assert admin_client.post(delete, {"post": "yes"}).status_code == 302

        assert events() == [("admin", "deleted", "nodespecs.provider", "gone", [])]

    def test_the_bulk_delete_action_records_each_provider(self, admin_client):
        first = Provider.objects.create(name="one", command="true")
        second = Provider.objects.create(name="two", command="true")
        admin_client.post(
            reverse("admin:nodespecs_provider_changelist"),
            {"action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"},
        )

        assert not Provider.objects.exists()
        assert sorted(label for *_, label, _ in events(action="deleted")) == ["one", "two"]

    def test_editing_a_spec_records_the_changed_fields(self, admin_client, db):
        spec = NodeSpec(**new_document())
        spec.full_clean()
        spec.save()
        document = spec.document() | {"description": "Ping a host, then report the time."}

        response = admin_client.post(
            reverse("admin:nodespecs_nodespec_change", args=[spec.pk]),
            spec_form_data(document, shown=spec.document()),
        )

        assert response.status_code == 302
        assert events() == [
            ("admin", "changed", "nodespecs.nodespec", "ACTION/PING_HOST", ["description"])
        ]

    def test_editing_a_workflow_records_the_graph_change(self, admin_client, db):
        import_file("loops.yaml")
        workflow = Workflow.objects.get(name="classify")
        graph = editor_text(workflow).replace("'\"small\"'", "'\"tiny\"'")
        data = {
            "name": workflow.name,
            "group": workflow.group_id,
            "enabled": "on",
            "graph": graph,
            "versions-TOTAL_FORMS": "0",
            "versions-INITIAL_FORMS": "0",
        }

        response = admin_client.post(
            reverse("admin:graphs_workflow_change", args=[workflow.pk]), data
        )

        assert response.status_code == 302
        assert events(actor="admin") == [
            ("admin", "changed", "graphs.workflow", "classify", ["graph"])
        ]

    def test_creating_and_revoking_an_api_key_never_records_the_key(self, admin_client):
        response = admin_client.post(
            reverse("admin:mcp_endpoint_apikey_add"),
            {"name": "ci", "scopes": ["tools:read"], "rate_limit_per_minute": ""},
            follow=True,
        )
        shown = next(str(m) for m in response.context["messages"] if "sy_" in str(m))
        secret = shown.split("The new API key is ")[1].split(" ")[0]
        key = ApiKey.objects.get(name="ci")
        admin_client.post(
            reverse("admin:mcp_endpoint_apikey_changelist"),
            {"action": "revoke", "_selected_action": [key.pk]},
        )

        label = f"ci ({key.prefix}…)"
        assert events() == [
            ("admin", "created", "mcp_endpoint.apikey", label, ["name", "scopes"]),
            ("admin", "revoked", "mcp_endpoint.apikey", label, []),
        ]
        assert_no_secret_in_the_trail(secret, secret.split("_", 2)[2])


class TestCommands:
    def test_load_node_specs_records_each_spec_it_wrote_and_nothing_when_unchanged(self, db):
        run("load_node_specs")
        created = events(actor="command:load_node_specs", action="created")
        assert len(created) == NodeSpec.objects.count() > 50

        run("load_node_specs")
        assert AuditEvent.objects.count() == len(created)

    def test_import_graph_records_the_workflows_and_the_providers_it_created(self, db, tmp_path):
        graph = tmp_path / "echo.yaml"
        graph.write_text(
            f"""
version: "1.0"
server: {{name: "audited", version: "1.0.0"}}
mcpServers:
  echo:
    command: echo-server
    env: {{API_TOKEN: {SECRET}}}
tools:
  - name: echo_pid
    description: The process id of the echo server.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: ask}}
      - {{id: ask, type: mcp, server: echo, tool: pid, args: {{}}, next: exit}}
      - {{id: exit, type: exit}}
"""
        )
        run("import_graph", str(graph))
        run("import_graph", str(graph))

        provider_fields = ["command", "cwd", "env", "name", "title"]
        assert events() == [
            ("command:import_graph", "created", "nodespecs.provider", "echo", provider_fields),
            ("command:import_graph", "created", "graphs.workflow", "echo_pid", []),
        ]
        assert_no_secret_in_the_trail(SECRET)

    def test_create_api_key_and_setup_demo_record_keys_created_and_revoked(self, db):
        run("create_api_key", "--name", "robot")
        run("setup_demo")
        run("setup_demo")

        assert [
            (actor, action, label.split(" ")[0]) for actor, action, _, label, _ in events()
        ] == [
            ("command:create_api_key", "created", "robot"),
            ("command:setup_demo", "created", "demo"),
            # The example workflows, and count_files's server, made once
            # (graphs/authoring/demo_graphs.py).
            ("command:setup_demo", "created", "add_up_to"),
            ("command:setup_demo", "created", "classify_number"),
            ("command:setup_demo", "created", "filesystem"),
            ("command:setup_demo", "created", "count_files"),
            ("command:setup_demo", "revoked", "demo"),
            ("command:setup_demo", "created", "demo"),
        ]


class TestTrailInTheAdmin:
    @pytest.fixture
    def trail(self, db):
        provider = Provider.objects.create(name="web", command="true")
        key, _ = api_key_create(name="ci", scopes=["tools:read"])
        audit_record(actor="alice", action=Action.CHANGED, target=provider, fields=["env"])
        audit_record(actor="command:setup_demo", action=Action.REVOKED, target=key)
        return provider

    def test_it_lists_latest_first_and_filters_by_object_type(self, admin_client, trail):
        text = admin_client.get(CHANGELIST).content.decode()
        assert text.index("command:setup_demo") < text.index("alice")

        filtered = admin_client.get(CHANGELIST, {"object_type": "nodespecs.provider"})
        assert "alice" in filtered.content.decode()
        assert "command:setup_demo" not in filtered.content.decode()

    def test_it_searches_by_actor_and_label(self, admin_client, trail):
        assert "alice" not in admin_client.get(CHANGELIST, {"q": "setup_demo"}).content.decode()
        assert "alice" in admin_client.get(CHANGELIST, {"q": "web"}).content.decode()

    def test_it_is_read_only_even_for_a_superuser(self, admin_client, trail):
        event = AuditEvent.objects.first()
        change = reverse("admin:nodespecs_auditevent_change", args=[event.pk])

        assert admin_client.get(reverse("admin:nodespecs_auditevent_add")).status_code == 403
        assert admin_client.post(change, {"actor": "someone else"}).status_code == 403
        delete = reverse("admin:nodespecs_auditevent_delete", args=[event.pk])
        assert admin_client.post(delete, {"post": "yes"}).status_code == 403
        assert AuditEvent.objects.get(pk=event.pk).actor == event.actor

    def test_a_change_page_links_the_objects_own_events(self, admin_client, trail):
        page = admin_client.get(reverse("admin:nodespecs_provider_change", args=[trail.pk]))
        url = audit_url(Provider, trail.pk)
        assert f'href="{url.replace("&", "&amp;")}"' in page.content.decode()

        listed = admin_client.get(url).content.decode()
        assert "alice" in listed
        assert "command:setup_demo" not in listed

    def test_staff_without_the_view_permission_cannot_read_it(self, client, author, trail):
        author.user_permissions.remove(Permission.objects.get(codename="view_auditevent"))
        client.force_login(author)

        assert client.get(CHANGELIST).status_code == 403
