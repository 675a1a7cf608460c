"""How an MCP tool's definition becomes a TOOL spec document, for tools as servers write them."""

from __future__ import annotations

from mcp.types import Tool, ToolAnnotations

from nodespecs.knowledge.names import provider_node_name, provider_subtype
from nodespecs.providers.tool_specs import tool_document


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


def test_without_an_output_schema_the_outputs_are_the_result_content():
    document = document_of({"type": "object"})
    assert list(document["output_params"]) == ["text", "images", "audio"]
    assert "validation_schema" not in document["output_ports"][0]
