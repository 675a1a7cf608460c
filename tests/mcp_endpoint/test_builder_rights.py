"""Owners and rights over MCP (issue 24, parts 1-2): a key changes, tests drafts of and
publishes only the groups its user (or the key itself) owns, unless it holds
workflows:admin; publishing needs workflows:publish; a draft uses an operator's provider only
where the operator opened it to builders; a server an agent declares stays its own.
(tests/e2e/test_builder_owners.py plays the hostile agent against a live server.)"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from graphs.authoring.files import provider_entry
from graphs.models import Workflow, WorkflowGroup, WorkflowVersion
from mcp_endpoint.models import ApiKey
from nodespecs.models import AuditEvent, Provider
from nodespecs.providers.lifecycle import ProviderRefreshError, provider_refresh
from tests.mcp_endpoint.helpers import make_key, modern, result, rpc_error

pytestmark = pytest.mark.timeout(30)

BUILDER = ["tools:read", "tools:execute", "workflows:write"]
PUBLISHER = [*BUILDER, "workflows:publish"]


def call(client, key, name, arguments):
    return result(modern(client, "tools/call", {"name": name, "arguments": arguments}, key=key))


def refusal_text(answer) -> str:
    assert answer.get("isError") is True, answer
    return answer["content"][0]["text"]


def definition(
    group: str = "mine", name: str = "fetcher", server: str = "", servers: dict | None = None
) -> dict:
    """One workflow: an mcp node calling `server`'s `echo` when given, else a transform."""
    middle = (
        {"id": "work", "type": "mcp", "server": server, "tool": "echo", "args": {}, "next": "exit"}
        if server
        else {"id": "work", "type": "transform", "transform": {"expr": "1"}, "next": "exit"}
    )
    return {
        "version": "1.0",
        "server": {"name": group, "version": "1.0.0"},
        **({"mcpServers": servers} if servers else {}),
        "tools": [
            {
                "name": name,
                "description": "Does one thing.",
                "inputSchema": {"type": "object"},
                "nodes": [
                    {"id": "entry", "type": "entry", "next": "work"},
                    middle,
                    {"id": "exit", "type": "exit"},
                ],
            }
        ],
    }


def user(name: str):
    return get_user_model().objects.create_user(username=name, password="x")


def versions_of(name: str) -> int:
    return WorkflowVersion.objects.filter(workflow__name=name).count()


class TestAnOperatorsGroup:
    """loops.yaml, imported by an operator's command: a group without owners."""

    def test_a_builder_key_cannot_patch_an_operators_workflow(self, client, loops):
        before = versions_of("is_zero")
        patch = [{"op": "replace", "path": "/tools/0/description", "value": "tidy-up"}]
        answer = call(
            client, make_key(PUBLISHER), "update_workflow", {"name": "is_zero", "patch": patch}
        )
        text = refusal_text(answer)
        assert "may not change workflows in the workflow group 'loops'" in text
        assert "none: it is the operators' group" in text
        assert "workflows:admin" in text
        assert versions_of("is_zero") == before

    def test_a_builder_key_cannot_add_a_workflow_to_an_operators_group(self, client, loops):
        answer = call(
            client, make_key(PUBLISHER), "create_workflow", {"definition": definition("loops")}
        )
        assert "may not create workflows in the workflow group 'loops'" in refusal_text(answer)
        assert not Workflow.objects.filter(name="fetcher").exists()

    def test_a_builder_key_cannot_publish_an_operators_workflow(self, client, loops):
        answer = call(
            client, make_key(PUBLISHER), "publish_workflow", {"name": "is_zero", "version": 1}
        )
        assert "may not publish workflows" in refusal_text(answer)

    def test_a_builder_key_cannot_test_an_operators_draft(self, client, loops):
        patch = [{"op": "replace", "path": "/tools/0/description", "value": "draft"}]
        admin = make_key(["workflows:write", "workflows:admin"])
        assert (
            call(client, admin, "update_workflow", {"name": "is_zero", "patch": patch}).get(
                "isError"
            )
            is not True
        )
        answer = call(client, make_key(BUILDER), "test_workflow", {"name": "is_zero"})
        assert "may not test drafts" in refusal_text(answer)

    def test_a_workflows_admin_key_changes_and_publishes_it(self, client, loops):
        admin = make_key([*PUBLISHER, "workflows:admin"])
        patch = [{"op": "replace", "path": "/tools/0/description", "value": "Is it zero?"}]
        saved = call(client, admin, "update_workflow", {"name": "is_zero", "patch": patch})
        number = saved["structuredContent"]["version"]
        published = call(client, admin, "publish_workflow", {"name": "is_zero", "version": number})
        assert published["structuredContent"]["status"] == "published"


def test_publishing_needs_the_publish_scope_even_for_an_owner(client, db):
    key = make_key(BUILDER)
    assert (
        call(client, key, "create_workflow", {"definition": definition()}).get("isError")
        is not True
    )
    error = rpc_error(
        modern(
            client,
            "tools/call",
            {"name": "publish_workflow", "arguments": {"name": "fetcher", "version": 1}},
            key=key,
        )
    )
    assert "needs the scope workflows:publish" in error["message"]
    assert Workflow.objects.get(name="fetcher").current_version is None


class TestOwnership:
    def test_an_ownerless_key_owns_the_group_it_creates_and_no_other_key_does(self, client, db):
        mine, other = make_key(PUBLISHER), make_key(PUBLISHER)
        call(client, mine, "create_workflow", {"definition": definition()})
        group = WorkflowGroup.objects.get(name="mine")
        prefix = mine.split("_")[1]
        assert group.owner_key == f"key:{prefix}"
        assert not group.owners.exists()
        patch = [{"op": "replace", "path": "/tools/0/description", "value": "Mine now."}]
        refused = call(client, other, "update_workflow", {"name": "fetcher", "patch": patch})
        assert f"its owners (key:{prefix})" in refusal_text(refused)
        saved = call(client, mine, "update_workflow", {"name": "fetcher", "patch": patch})
        assert saved["structuredContent"]["version"] == 2

    def test_a_key_acts_for_its_user_whose_other_keys_share_the_group(self, client, db):
        alice = user("alice")
        first = make_key(PUBLISHER, owner=alice)
        second = make_key(PUBLISHER, owner=alice)
        call(client, first, "create_workflow", {"definition": definition()})
        group = WorkflowGroup.objects.get(name="mine")
        assert list(group.owners.all()) == [alice]
        assert group.owner_key == ""
        published = call(client, second, "publish_workflow", {"name": "fetcher", "version": 1})
        assert published["structuredContent"]["status"] == "published"

    def test_the_trail_names_the_key_with_its_user(self, client, db):
        alice = user("alice")
        key = make_key(PUBLISHER, owner=alice)
        call(client, key, "create_workflow", {"definition": definition()})
        prefix = ApiKey.objects.get(owner=alice).prefix
        version = WorkflowVersion.objects.get(workflow__name="fetcher")
        assert version.author_name == f"key:{prefix} (alice)"
        assert AuditEvent.objects.filter(actor=f"key:{prefix} (alice)").exists()
        call(client, key, "publish_workflow", {"name": "fetcher", "version": 1})
        published = AuditEvent.objects.get(
            actor=f"key:{prefix} (alice)", fields=["current_version"]
        )
        assert published.object_label == "fetcher"

    def test_an_owner_added_in_the_admin_may_change_the_group(self, client, db):
        call(client, make_key(PUBLISHER), "create_workflow", {"definition": definition()})
        bob = user("bob")
        WorkflowGroup.objects.get(name="mine").owners.add(bob)
        patch = [{"op": "replace", "path": "/tools/0/description", "value": "Bob's."}]
        saved = call(
            client,
            make_key(BUILDER, owner=bob),
            "update_workflow",
            {"name": "fetcher", "patch": patch},
        )
        assert saved["structuredContent"]["version"] == 2


def registered(url: str = "https://tools.example.com/mcp", **fields) -> Provider:
    """An operator's provider named `tools`."""
    return Provider.objects.create(name="tools", transport="streamable_http", url=url, **fields)


class TestProviders:
    def test_an_operators_provider_is_unknown_to_a_builder_until_opened(self, client, db):
        registered(headers={"Authorization": "Bearer operator-secret"})
        key = make_key(BUILDER)
        report = call(client, key, "validate_workflow", {"definition": definition(server="tools")})
        assert report["structuredContent"]["valid"] is False
        assert [p["code"] for p in report["structuredContent"]["problems"]] == ["unknown_server"]
        answer = call(client, key, "create_workflow", {"definition": definition(server="tools")})
        refusal_text(answer)
        assert not Workflow.objects.filter(name="fetcher").exists()

    def test_sending_back_its_masked_entry_is_refused_naming_who_opens_it(self, client, db):
        provider = registered(headers={"Authorization": "Bearer operator-secret"})
        servers = {"tools": provider_entry(provider)}  # as get_workflow shows it
        answer = call(
            client,
            make_key(BUILDER),
            "validate_workflow",
            {"definition": definition(server="tools", servers=servers)},
        )
        problems = {p["code"]: p for p in answer["structuredContent"]["problems"]}
        assert problems["provider_not_allowed"]["severity"] == "error"
        assert "PROVIDERS_OPEN_TO_BUILDERS" in problems["provider_not_allowed"]["message"]

    @pytest.mark.parametrize("how", ["admin", "setting", "listed"])
    def test_an_opened_provider_is_usable(self, client, db, settings, how):
        provider = registered()
        alice = user("alice")
        if how == "admin":
            provider.open_to_builders = True
            provider.save()
        elif how == "setting":
            settings.PROVIDERS_OPEN_TO_BUILDERS = ["tools"]
        else:
            provider.builders.add(alice)
        key = make_key(BUILDER, owner=alice)
        answer = call(client, key, "create_workflow", {"definition": definition(server="tools")})
        assert answer.get("isError") is not True, answer
        assert Workflow.objects.get(name="fetcher").versions.get().servers == {"tools": provider.pk}

    def test_a_declared_server_stays_the_agents_and_out_of_the_catalog(self, client, db):
        servers = {"mine": {"type": "http", "url": "https://agent.example.net/mcp"}}
        key = make_key(BUILDER)
        answer = call(
            client,
            key,
            "create_workflow",
            {"definition": definition(server="mine", servers=servers)},
        )
        assert answer.get("isError") is not True, answer
        provider = Provider.objects.get(url="https://agent.example.net/mcp")
        assert provider.declared_by == f"key:{key.split('_')[1]}"
        assert provider.connection().egress_checked
        with pytest.raises(ProviderRefreshError, match="never enter the catalog"):
            provider_refresh(provider=provider)
        call_command("refresh_providers")  # refreshes operators' providers only: none here
        assert not provider.specs.exists()
        # Another builder naming it, or an operator's provider at that address, is not it.
        other = make_key(BUILDER)
        again = call(
            client,
            other,
            "create_workflow",
            {"definition": definition("theirs", "theirs", server="mine", servers=servers)},
        )
        assert again.get("isError") is not True, again
        assert Provider.objects.filter(url="https://agent.example.net/mcp").count() == 2

    def test_a_key_declares_at_most_its_limit_of_servers(self, client, db, settings):
        settings.BUILDER_MAX_DECLARED_SERVERS = 2
        key = make_key(BUILDER)
        for number in range(3):
            servers = {"s": {"type": "http", "url": f"https://agent{number}.example.net/mcp"}}
            answer = call(
                client,
                key,
                "create_workflow",
                {
                    "definition": definition(
                        name=f"w{number}", group=f"g{number}", server="s", servers=servers
                    )
                },
            )
        assert "BUILDER_MAX_DECLARED_SERVERS = 2" in refusal_text(answer)
        assert Provider.objects.exclude(declared_by="").count() == 2

    def test_an_agent_copying_an_operators_address_gets_a_server_of_its_own(self, client, db):
        operator = registered(url="https://internal.example.com/mcp")
        servers = {"internal": {"type": "http", "url": "https://internal.example.com/mcp"}}
        answer = call(
            client,
            make_key(BUILDER),
            "create_workflow",
            {"definition": definition(server="internal", servers=servers)},
        )
        assert answer.get("isError") is not True, answer
        bound = Workflow.objects.get(name="fetcher").versions.get().servers["internal"]
        assert bound != operator.pk
        assert Provider.objects.get(pk=bound).connection().egress_checked
        assert not operator.connection().egress_checked
