"""Providers: their settings, reuse on graph import, and refreshing real servers' tools into
node specs that agents find."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from nodespecs.callers import caller_command
from nodespecs.downstream.client import Connection
from nodespecs.knowledge.service import (
    UNAVAILABLE_WARNING,
    get_node_details,
    get_node_types,
    search_nodes,
)
from nodespecs.knowledge.specs import spec_save
from nodespecs.models import NodeSpec, Provider
from nodespecs.providers.lifecycle import (
    ProviderRefreshError,
    provider_get_or_create,
    provider_refresh,
)
from nodespecs.providers.tool_specs import STRUCTURED_OUTPUT
from tests.nodespecs.providers_helpers import echo_provider, servers  # noqa: F401
from tests.peers import require_npm_server

ECHO_TOOLS = ["echo", "add", "sleep", "pid", "crash", "fail"]


def errors_of(provider: Provider) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as failure:
        provider.full_clean()
    return failure.value.message_dict


def details(subtype: str) -> dict:
    return get_node_details([{"node_type": "TOOL", "subtype": subtype}])[0]


@pytest.fixture
def refresh(django_capture_on_commit_callbacks):
    """Refresh a provider with its catalog change committed, as outside a test."""

    def run(provider: Provider):
        with django_capture_on_commit_callbacks(execute=True):
            return provider_refresh(provider=provider)

    return run


class TestSettings:
    def test_a_stdio_provider_needs_the_command_that_starts_it(self, db):
        assert errors_of(Provider(name="files"))["command"] == [
            "A stdio provider needs the command that starts it."
        ]

    def test_an_http_provider_needs_an_http_url(self, db):
        provider = Provider(name="web", transport="streamable_http", url="ftp://example.com")
        assert "http:// or https:// URL" in errors_of(provider)["url"][0]

    def test_args_env_and_headers_must_hold_strings_under_valid_names(self, db):
        provider = Provider(
            name="files",
            command="npx",
            args=["-y", 3],
            env={"API TOKEN": "x", "PORT": 8080},
            headers={"Bad Header": "x"},
        )
        errors = errors_of(provider)
        assert errors["args"] == ['args must be a list of strings, like ["--port", "8080"].']
        assert errors["env"] == [
            "'API TOKEN' is not a valid environment variable name.",
            "The value of 'PORT' must be text, not int.",
        ]
        assert errors["headers"] == ["'Bad Header' is not a valid header name."]

    def test_provider_names_are_lower_case_slugs(self, db):
        assert (
            "Use lower-case letters" in errors_of(Provider(name="My Files", command="x"))["name"][0]
        )

    def test_the_connection_carries_every_setting(self):
        provider = Provider(
            name="files",
            command="npx",
            args=["-y", "server"],
            env={"B": "2", "A": "1"},
            cwd="/srv",
            timeout_seconds=5,
        )
        assert provider.connection() == Connection(
            name="files",
            transport="stdio",
            command="npx",
            args=("-y", "server"),
            env=(("A", "1"), ("B", "2")),
            cwd="/srv",
        )
        assert provider.connection().timeout_seconds == 5


# Providers made from graph files are registered as an operator's import_graph does.
OPERATOR = caller_command("import_graph")


class TestGetOrCreate:
    def connection(self, name: str = "files", **settings) -> Connection:
        return Connection(name=name, transport="stdio", command="npx", **settings)

    def test_an_identical_server_reuses_its_provider_whatever_its_name(self, db):
        first = provider_get_or_create(
            name="files", connection=self.connection(env=(("A", "1"),)), caller=OPERATOR
        )
        again = provider_get_or_create(
            name="documents",
            connection=self.connection("documents", env=(("A", "1"),)),
            caller=OPERATOR,
        )
        assert again.pk == first.pk
        assert Provider.objects.count() == 1

    def test_a_name_taken_by_another_server_gets_a_number(self, db):
        names = [
            provider_get_or_create(
                name="files", connection=self.connection(args=(path,)), caller=OPERATOR
            ).name
            for path in ("/a", "/b", "/c")
        ]
        assert names == ["files", "files-2", "files-3"]

    def test_a_server_name_becomes_a_valid_provider_name_and_stays_the_title(self, db):
        provider = provider_get_or_create(
            name="My Files!", connection=self.connection(), caller=OPERATOR
        )
        assert (provider.name, provider.title) == ("my-files", "My Files!")

    def test_invalid_settings_are_refused(self, db):
        with pytest.raises(ValidationError):
            provider_get_or_create(
                name="web",
                connection=Connection(name="web", transport="sse", url="nowhere"),
                caller=OPERATOR,
            )


@pytest.mark.slow
@pytest.mark.usefixtures("servers")
class TestRefresh:
    def test_each_tool_becomes_a_tool_spec_named_after_provider_and_tool(self, db, refresh):
        provider = echo_provider()
        report = refresh(provider)
        assert sorted(report.created) == sorted(f"mcp-echo-{tool}" for tool in ECHO_TOOLS)
        assert report.summary() == "6 created, 0 updated, 0 unchanged, 0 unavailable"
        spec = NodeSpec.objects.get(node_type="TOOL", subtype="MCP_ECHO_ADD")
        assert (spec.provider, spec.provider_tool, spec.source) == (provider, "add", "provider")
        assert spec.display_name == "mcp-echo-add"
        assert spec.revisions.count() == 1
        provider.refresh_from_db()
        assert provider.last_refreshed_at is not None
        assert provider.last_error == ""
        assert provider.tools_refresh_state == Provider.RefreshState.REFRESHED
        assert provider.tools_refresh_at == provider.last_refreshed_at

    def test_a_tools_schemas_become_its_parameters_and_ports(self, db, refresh):
        refresh(echo_provider())
        spec = NodeSpec.objects.get(subtype="MCP_ECHO_ADD")
        a = spec.input_params["a"]
        assert (a["type"], a["description"], a["required"]) == ("number", "a", True)
        # The output is the tool's structuredContent: its fields, and nothing the engine
        # never gives (no `text`, `images`, `audio` or `structured`).
        assert list(spec.output_params) == ["sum"]
        assert spec.output_params["sum"]["type"] == "number"
        assert spec.output_ports[0]["description"].startswith(STRUCTURED_OUTPUT)
        assert spec.input_ports[0]["validation_schema"]["required"] == ["a", "b"]
        assert spec.output_ports[0]["validation_schema"]["properties"]["sum"]["type"] == "number"
        assert "Add two numbers" in spec.description

    def test_a_spec_made_with_the_old_outputs_gets_the_engines_at_the_next_refresh(
        self, db, refresh
    ):
        provider = echo_provider()
        refresh(provider)
        spec = NodeSpec.objects.get(subtype="MCP_ECHO_ADD")
        # As refreshes wrote it before the outputs said what the engine gives.
        spec.output_params = {
            "text": {"type": "string", "description": "The text content of the result, joined."},
            "structured": {"type": "object", "description": "The structured content."},
            **spec.output_params,
        }
        spec_save(spec=spec, comment="as an older refresh left it")

        report = refresh(provider)

        assert "mcp-echo-add" in report.updated
        spec.refresh_from_db()
        assert list(spec.output_params) == ["sum"]

    def test_agents_find_a_provider_tool_by_either_name_without_a_warning(self, db, refresh):
        refresh(echo_provider())
        for name in ("mcp-echo-add", "MCP_ECHO_ADD"):
            node = details(name)
            assert (node["subtype"], node["display_name"]) == ("MCP_ECHO_ADD", "mcp-echo-add")
            assert "warning" not in node
        assert set(get_node_types("TOOL").node_types["TOOL"]) >= {"MCP_ECHO_ADD", "MCP_ECHO_PID"}

    def test_a_second_refresh_of_the_same_tools_writes_nothing(self, db, refresh):
        provider = echo_provider()
        refresh(provider)
        report = refresh(provider)
        assert report.summary() == "0 created, 0 updated, 6 unchanged, 0 unavailable"
        assert all(spec.revisions.count() == 1 for spec in provider.specs.all())

    def test_a_tool_that_disappears_is_marked_unavailable_and_comes_back(self, db, refresh):
        provider = echo_provider()
        refresh(provider)
        provider.env = {"ECHO_SERVER_TOOLS": "echo,add"}
        provider.save()
        report = refresh(provider)
        assert sorted(report.unavailable) == [
            "mcp-echo-crash",
            "mcp-echo-fail",
            "mcp-echo-pid",
            "mcp-echo-sleep",
        ]
        assert NodeSpec.objects.filter(provider=provider).count() == 6
        gone = details("mcp-echo-pid")
        assert gone["available"] is False
        assert gone["warning"] == UNAVAILABLE_WARNING
        assert "MCP_ECHO_PID" not in get_node_types("TOOL").node_types["TOOL"]
        assert "MCP_ECHO_PID" not in [hit["subtype"] for hit in search_nodes("process id")]

        provider.env = {}
        provider.save()
        report = refresh(provider)
        assert sorted(report.updated) == [
            "mcp-echo-crash",
            "mcp-echo-fail",
            "mcp-echo-pid",
            "mcp-echo-sleep",
        ]
        assert "available" not in details("mcp-echo-pid")
        assert search_nodes("process id of this server")[0]["subtype"] == "MCP_ECHO_PID"

    def test_an_unreachable_server_records_the_error_and_changes_nothing(self, db, refresh):
        provider = echo_provider()
        refresh(provider)
        refreshed_at = Provider.objects.get(pk=provider.pk).last_refreshed_at
        provider.command = "/nonexistent/echo-server"
        provider.save()
        with pytest.raises(ProviderRefreshError, match="/nonexistent/echo-server is not an exe"):
            refresh(provider)
        provider.refresh_from_db()
        assert "cannot start" in provider.last_error
        assert provider.last_refreshed_at == refreshed_at
        assert provider.specs.filter(available=True).count() == 6
        assert provider.tools_refresh_state == Provider.RefreshState.FAILED

    def test_a_disabled_provider_is_not_refreshed(self, db, refresh):
        with pytest.raises(ProviderRefreshError, match="'echo' is disabled: enable it"):
            refresh(echo_provider(enabled=False))

    def test_a_tool_whose_subtype_is_taken_is_reported_and_the_others_written(self, db, refresh):
        spec_save(spec=NodeSpec(node_type="TOOL", subtype="MCP_ECHO_PID", description="Mine."))
        provider = echo_provider()
        report = refresh(provider)
        assert list(report.failed) == ["mcp-echo-pid"]
        assert "already taken by TOOL/MCP_ECHO_PID" in report.failed["mcp-echo-pid"]
        assert len(report.created) == 5
        assert NodeSpec.objects.get(subtype="MCP_ECHO_PID").description == "Mine."
        provider.refresh_from_db()
        assert provider.last_error.startswith("mcp-echo-pid: its subtype")

    def test_renaming_a_provider_renames_its_specs_at_the_next_refresh(self, db, refresh):
        provider = echo_provider()
        refresh(provider)
        provider.name = "parrot"
        provider.save()
        report = refresh(provider)
        assert len(report.updated) == 6
        assert details("mcp-parrot-add")["subtype"] == "MCP_PARROT_ADD"
        assert not NodeSpec.objects.filter(subtype__startswith="MCP_ECHO_").exists()

    def test_deleting_a_provider_deletes_its_specs(self, db, refresh):
        provider = echo_provider()
        refresh(provider)
        provider.delete()
        assert not NodeSpec.objects.filter(subtype__startswith="MCP_ECHO_").exists()


@pytest.mark.slow
@pytest.mark.usefixtures("servers")
def test_the_real_everything_server_becomes_specs_that_search_nodes_finds(
    db, loaded_catalog, refresh
):
    command, *args = require_npm_server("@modelcontextprotocol/server-everything")
    provider = Provider(name="everything", command=command, args=[*args, "stdio"])
    provider.full_clean()
    provider.save()
    report = refresh(provider)
    assert "mcp-everything-get_sum" in report.created
    assert not report.failed

    best = search_nodes("sum of two numbers")[0]
    assert (best["subtype"], best["display_name"]) == (
        "MCP_EVERYTHING_GET_SUM",
        "mcp-everything-get_sum",
    )
    assert search_nodes("echo back a message", type_filter="TOOL")[0]["subtype"] == (
        "MCP_EVERYTHING_ECHO"
    )
    for name in ("mcp-everything-get_sum", "MCP_EVERYTHING_GET_SUM"):
        node = details(name)
        assert node["input_params_schema"]["a"]["type"] == "number"
        assert "warning" not in node
    structured = details("mcp-everything-get-structured-content")
    assert structured["output_ports"][0]["validation_schema"]["type"] == "object"
