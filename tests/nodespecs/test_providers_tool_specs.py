"""How an MCP tool's definition becomes a TOOL spec document, for tools as servers write them, and
how its output is described: as the engine gives it, in validate_workflow's words."""

from __future__ import annotations

from mcp.types import CallToolResult, ImageContent, TextContent, Tool, ToolAnnotations

from graphs.engine.checks.all_checks import ToolSchema
from graphs.engine.results import tool_output
from nodespecs.knowledge.names import provider_node_name, provider_subtype
from nodespecs.providers.tool_specs import (
    ERROR_OUTPUT,
    STRUCTURED_OUTPUT,
    TEXT_OUTPUT,
    port_schema,
    tool_document,
)
from tests.graphs.validation.helpers import count_files, only, validate


def document_of(input_schema: dict, **tool_fields) -> dict:
    tool = Tool(name="read-file", input_schema=input_schema, **tool_fields)
    return tool_document(provider="files", provider_title="Files", tool=tool)


def param(schema: dict, *, required: bool = False, name: str = "p") -> dict:
    input_schema = {"type": "object", "properties": {name: schema}}
    if required:
        input_schema["required"] = [name]
    return document_of(input_schema)["input_params"][name]


def test_the_node_name_follows_seed_004_and_the_subtype_is_its_upper_snake_form():
    assert provider_node_name("files", "read-file.v2") == "mcp-files-read_file_v2"
    assert provider_subtype("mcp-files-read_file_v2") == "MCP_FILES_READ_FILE_V2"
    document = document_of({"type": "object"}, description="Read a file.")
    assert (document["subtype"], document["display_name"]) == (
        "MCP_FILES_READ_FILE",
        "mcp-files-read_file",
    )


def test_the_description_says_which_tool_of_which_server_it_runs():
    description = document_of({"type": "object"}, description="Read a file.")["description"]
    assert (
        description == "Read a file.\n\nRuns the tool 'read-file' of the MCP server Files (files)."
    )


def test_a_tool_without_a_description_still_gets_one():
    assert document_of({"type": "object"})["description"].startswith("The read-file tool.")


def test_enum_range_default_and_pattern_are_kept():
    assert param({"type": "string", "enum": ["a", "b"], "default": "a"}, required=True) == {
        "type": "string",
        "description": "p",
        "required": True,
        "options": ["a", "b"],
        "default": "a",
        "sensitive": False,
    }
    number = param({"type": "integer", "minimum": 1, "maximum": 10, "description": "Lines."})
    assert (number["min"], number["max"], number["description"]) == (1, 10, "Lines.")
    assert param({"type": "string", "pattern": "^/"})["validation_pattern"] == "^/"


def test_a_constraint_the_spec_format_cannot_hold_is_dropped_not_fatal():
    # A JavaScript-only regex and a default outside the range.
    assert "validation_pattern" not in param({"type": "string", "pattern": "(?<name>x)"})
    assert "default" not in param({"type": "integer", "minimum": 5, "default": 1})


def test_nullable_and_union_types_take_their_first_concrete_type():
    assert param({"type": ["null", "string"]})["type"] == "string"
    assert param({"anyOf": [{"type": "null"}, {"type": "array", "items": {}}]})["type"] == "array"
    assert param({"properties": {"x": {}}})["type"] == "object"


def test_a_property_without_a_type_is_described_as_any_json_value():
    value = param({"title": "Value"}, name="value")
    assert (value["type"], value["description"]) == ("string", "value (any JSON value)")


def test_read_only_and_destructive_hints_become_tags():
    tags = document_of(
        {"type": "object"},
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False),
    )["tags"]
    assert tags == ["mcp", "provider", "files", "read-only"]


def test_without_an_output_schema_the_output_is_the_parsed_text_and_has_no_named_fields():
    document = document_of({"type": "object"})
    # The engine gives the first text block, parsed as JSON when it is: no `text`, `images` or
    # `audio` field to read.
    assert document["output_params"] == {}
    port = document["output_ports"][0]
    assert "validation_schema" not in port
    assert port["description"] == TEXT_OUTPUT + ERROR_OUTPUT
    assert "parsed as JSON when it is JSON, else the text itself" in port["description"]


def test_under_an_output_schema_the_outputs_are_its_fields_and_nothing_else():
    output_schema = {
        "type": "object",
        "properties": {"count": {"type": "integer", "description": "How many files."}},
        "required": ["count"],
    }
    document = document_of({"type": "object"}, output_schema=output_schema)
    assert document["output_params"] == {
        "count": {
            "type": "integer",
            "description": "How many files.",
            "required": True,
            "sensitive": False,
        }
    }
    port = document["output_ports"][0]
    assert port["validation_schema"] == output_schema
    assert port["description"] == STRUCTURED_OUTPUT + ERROR_OUTPUT


def test_the_words_are_what_the_engine_gives_for_each_kind_of_result():
    """What each description promises is what graphs/engine/results.py makes of a result."""
    structured = CallToolResult(
        content=[TextContent(type="text", text='{"count": 2}')], structured_content={"count": 2}
    )
    assert tool_output(structured) == {"count": 2}  # STRUCTURED_OUTPUT: the structuredContent
    parsed = CallToolResult(content=[TextContent(type="text", text='{"a": [1]}')])
    assert tool_output(parsed) == {"a": [1]}  # TEXT_OUTPUT: parsed as JSON when it is JSON
    plain = CallToolResult(content=[TextContent(type="text", text="hello")])
    assert tool_output(plain) == "hello"  # else the text itself
    image = CallToolResult(content=[ImageContent(type="image", data="AA==", mime_type="image/png")])
    assert tool_output(image) == {
        "text": "",
        "images": [{"data": "AA==", "mime_type": "image/png"}],
        "audio": [],
    }
    assert tool_output(CallToolResult(content=[])) is None  # and no content null


def test_the_output_is_named_in_the_words_validate_workflow_uses():
    """validate_workflow, of a field an mcp node's output cannot have, says "the output of
    'node' (its tool's outputSchema)"; the spec names the output in the same words, and the
    schema validation reads is the one the spec's output port holds."""
    output_schema = {"type": "object", "properties": {"size": {"type": "integer"}}}
    document = tool_document(
        provider="filesystem",
        provider_title="Files",
        tool=Tool(
            name="list_directory", input_schema={"type": "object"}, output_schema=output_schema
        ),
    )
    schema = ToolSchema({"type": "object"}, port_schema(document["output_ports"]))
    definition = count_files()
    definition["tools"][0]["nodes"][1]["args"] = {}
    definition["tools"][0]["nodes"][2]["transform"]["expr"] = (
        '{ "count": $.list_directory_node.sise }'
    )

    problems = validate(definition, tools_of=lambda server: {"list_directory": schema})

    message = only(problems, "field_not_produced").message
    words = "(its tool's outputSchema)"
    assert f"the output of 'list_directory_node' {words}" in message
    assert STRUCTURED_OUTPUT.startswith(f"The output of this node {words}")
