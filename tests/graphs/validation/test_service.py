"""validate_workflow: a definition checked against the registered providers' real tool
schemas, the caller's rights, the settings' ceilings and the workflow it would replace."""

from __future__ import annotations

import json

import jsonpatch
import pytest
import yaml
from django.test import override_settings
from mcp.types import Tool

from graphs.authoring.files import GraphFileError, graph_import
from graphs.authoring.validation import MAX_DEFINITION_BYTES, validate_workflow
from nodespecs.callers import Caller, caller_command
from nodespecs.models import NodeSpec, Provider
from nodespecs.providers.tool_specs import tool_document
from tests.graphs.validation.helpers import FILESYSTEM, count_files, flat, node, only

pytestmark = [pytest.mark.timeout(30), pytest.mark.django_db]

API = Caller(actor="api-key:abc123")  # an API caller: may not start processes
OPERATOR = caller_command("import_graph")


def _register(name: str = "filesystem", *, specs: bool = True, **fields) -> Provider:
    """A registered stdio provider with the settings count_files declares, and the TOOL
    specs a refresh would have written for its tools."""
    settings = {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "./tests/counting"],
    }
    provider = Provider(name=name, **{**settings, **fields})
    provider.full_clean()
    provider.save()
    for tool_name, schema in FILESYSTEM.items() if specs else ():
        tool = Tool(
            name=tool_name, input_schema=schema.input_schema, output_schema=schema.output_schema
        )
        spec = NodeSpec(source=NodeSpec.Source.PROVIDER, provider=provider, provider_tool=tool_name)
        spec.set_document(tool_document(provider=name, provider_title="", tool=tool))
        spec.full_clean()
        spec.save()
    return provider


def _text(document) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def test_a_valid_definition_against_a_registered_providers_specs():
    _register()

    report = validate_workflow(_text(count_files()), caller=API)

    assert report.valid
    assert report.as_dict() == {"valid": True, "problems": []}


def test_tools_come_from_the_providers_specs_and_fixes_apply_to_the_text_as_json():
    _register()
    document = count_files()
    node(document, "list_directory_node").update(
        tool="list_dir", args={"paht": "$.entry.directory"}
    )

    report = validate_workflow(_text(document), caller=API)

    assert not report.valid
    problem = only(report.problems, "unknown_tool")
    assert problem.path == "/tools/0/nodes/1/tool"
    assert "did you mean 'list_directory'?" in problem.message
    patched = jsonpatch.apply_patch(document, problem.fix)
    again = validate_workflow(_text(patched), caller=API)
    arg = only(again.problems, "arg_unknown")  # now the tool is known, its args are checked
    assert arg.path == "/tools/0/nodes/1/args/paht"
    assert validate_workflow(jsonpatch.apply_patch(patched, arg.fix), caller=API).valid


def test_the_flat_form_as_text_is_answered_in_its_own_pointers():
    _register()
    document = flat(count_files())
    node(document, "list_directory_node")["tool"] = "list_dir"

    problem = only(validate_workflow(_text(document), caller=API).problems, "unknown_tool")

    assert problem.path == "/nodes/1/tool"
    assert validate_workflow(jsonpatch.apply_patch(document, problem.fix), caller=API).valid


def test_a_json_object_is_read_as_it_is():
    _register()

    assert validate_workflow(json.loads(json.dumps(count_files())), caller=API).valid


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [
        ("!!python/object/apply:os.system ['true']", "yaml_unreadable", "constructor"),
        (
            'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}" + f",*{chr(97 + i)}" * 9 + "]\n"
                for i in range(6)
            ),
            "yaml_unreadable",
            "alias bomb",
        ),
        ("tools: [", "yaml_unreadable", "not valid YAML"),
        ("- just\n- a list\n", "not_a_mapping", "got list"),
        ("x" * (MAX_DEFINITION_BYTES + 1), "definition_too_large", "over the limit of 1,000,000"),
    ],
)
def test_text_that_cannot_be_read_is_one_error_not_an_exception(text, code, says):
    report = validate_workflow(text, caller=API)

    [problem] = report.problems
    assert (problem.severity, problem.code, problem.path, problem.node) == ("error", code, "", None)
    assert says in problem.message
    assert not report.valid


def test_an_api_caller_may_not_add_a_stdio_server():
    document = count_files()
    document["mcpServers"]["filesystem"]["args"].append("--extra")

    report = validate_workflow(_text(document), caller=API)

    problem = only(report.problems, "stdio_not_allowed")
    assert (problem.severity, problem.path) == ("error", "/mcpServers/filesystem")
    assert "'filesystem' is a stdio server" in problem.message
    assert "Ask a superuser to register it as a provider" in problem.message
    # Its tools are not known either: nothing was started to find them out.
    assert only(report.problems, "tools_unknown").severity == "warning"


def test_an_operator_may_and_the_unknown_tools_are_a_warning():
    report = validate_workflow(_text(count_files()), caller=OPERATOR)

    assert report.valid
    assert [problem.code for problem in report.problems] == ["tools_unknown"]


@override_settings(PROVIDER_ALLOWED_COMMANDS=["/usr/bin/node"])
def test_a_command_the_allow_list_refuses_is_refused_for_everyone():
    report = validate_workflow(_text(count_files()), caller=OPERATOR)

    problem = only(report.problems, "command_not_allowed")
    assert problem.path == "/mcpServers/filesystem"
    assert "command 'npx' is not one that PROVIDER_ALLOWED_COMMANDS allows" in problem.message


def test_a_registered_provider_may_be_named_without_declaring_it():
    _register()
    document = count_files()
    del document["mcpServers"]
    node(document, "list_directory_node")["tool"] = "list_dir"

    report = validate_workflow(_text(document), caller=API)

    assert [problem.code for problem in report.problems] == ["unknown_tool"]


def test_a_provider_shown_masked_names_itself():
    # get_workflow shows a provider's secrets masked; sent back so, it is that provider.
    _register(env={"TOKEN": "s3cret"})
    document = count_files()
    document["mcpServers"]["filesystem"].update(env={"TOKEN": "<secret>"}, cwd="", timeout=30.0)

    report = validate_workflow(_text(document), caller=API)

    assert report.valid, report.as_dict()


def test_a_provider_never_refreshed_has_unknown_tools():
    _register(specs=False)

    report = validate_workflow(_text(count_files()), caller=API)

    assert report.valid
    assert [problem.code for problem in report.problems] == ["tools_unknown"]


@override_settings(GRAPHS_MAX_NODE_EXECUTIONS_CEILING=100)
def test_the_ceilings_are_the_settings():
    _register()

    problem = only(
        validate_workflow(_text(count_files()), caller=API).problems, "limit_above_ceiling"
    )

    assert "maxNodeExecutions is 1000, above this server's ceiling of 100" in problem.message
    assert problem.fix == [
        {"op": "replace", "path": "/executionLimits/maxNodeExecutions", "value": 100}
    ]


def test_a_change_is_compared_with_the_published_workflow():
    _register()
    graph_import(text=count_files(), caller=OPERATOR)
    document = count_files()
    tool = document["tools"][0]
    tool["inputSchema"]["properties"]["depth"] = {"type": "integer"}
    tool["inputSchema"]["required"].append("depth")
    tool["outputSchema"]["properties"] = {"total": {"type": "number"}}
    node(document, "count_files_node")["transform"]["expr"] = '{ "total": 1 }'

    report = validate_workflow(_text(document), caller=API, name="count_files")

    assert report.valid  # warnings: callers may break, the draft is still a workflow
    required = only(report.problems, "input_newly_required")
    assert required.path == "/tools/0/inputSchema/required/1"
    removed = only(report.problems, "output_property_removed")
    assert "output 'count' is removed" in removed.message
    assert validate_workflow(_text(count_files()), caller=API, name="count_files").problems == []


def test_a_name_that_is_no_workflow():
    _register()

    problem = only(
        validate_workflow(_text(count_files()), caller=API, name="nope").problems,
        "workflow_not_found",
    )

    assert problem.severity == "warning"
    assert "no workflow is named 'nope'" in problem.message


def test_a_declared_server_with_a_providers_name_but_other_settings_is_not_that_provider():
    _register()
    document = count_files()
    document["mcpServers"]["filesystem"]["args"] = ["-y", "some-other-server"]
    node(document, "list_directory_node")["tool"] = "anything"

    report = validate_workflow(_text(document), caller=OPERATOR)

    # Import would register these settings as a new provider: its tools are not known.
    assert [problem.code for problem in report.problems] == ["tools_unknown"]


def test_a_definition_declaring_too_many_servers_is_refused_without_looking_one_up(
    django_assert_max_num_queries,
):
    """Each declared server is looked up (and, on import, registered): thousands of them
    from one read-only caller would cost thousands of queries. Refused whole, as import
    refuses it."""
    document = count_files()
    document["mcpServers"] = {
        f"s{i}": {"type": "streamableHttp", "url": f"http://127.0.0.1:9/{i}"} for i in range(65)
    }

    with django_assert_max_num_queries(5):
        report = validate_workflow(document, caller=API)

    codes = [problem.code for problem in report.problems]
    assert "too_many_servers" in codes
    refused = next(p for p in report.problems if p.code == "too_many_servers")
    assert refused.path == "/mcpServers"
    assert "over the limit of 64" in refused.message
    with pytest.raises(GraphFileError, match="over the limit of 64"):
        graph_import(text=document, caller=OPERATOR)
    assert not Provider.objects.exists()
