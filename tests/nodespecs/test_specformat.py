"""The spec format: validation messages name the field and the problem; legacy specs import."""

import pytest

from nodespecs.knowledge.specformat import SpecFormatError, parse_spec_document


def minimal(**fields):
    return {"node_type": "ACTION", "subtype": "DEMO", "description": "A demo node.", **fields}


def problems_of(raw) -> dict[str, str]:
    with pytest.raises(SpecFormatError) as caught:
        parse_spec_document(raw)
    return caught.value.problems


def test_it_accepts_a_minimal_spec():
    document = parse_spec_document(minimal())
    assert document.key() == ("ACTION", "DEMO")
    assert document.version == "1.0.0"


def test_it_names_an_unknown_node_type_and_lists_the_valid_ones():
    problems = problems_of(minimal(node_type="ACTON"))
    assert "'ACTON' is not a node type" in problems["node_type"]
    assert "HUMAN_IN_THE_LOOP" in problems["node_type"]


def test_it_names_the_parameter_whose_default_has_the_wrong_type():
    config = {"timeout": {"type": "integer", "description": "t", "default": "ten"}}
    problems = problems_of(minimal(configurations=config))
    assert problems == {"configurations.timeout": "default 'ten' is not of type integer"}


@pytest.mark.parametrize(
    ("param", "message"),
    [
        (
            {"type": "integer", "description": "d", "min": 5, "max": 1},
            "min 5 is greater than max 1",
        ),
        (
            {"type": "integer", "description": "d", "default": 0, "min": 1},
            "default 0 is below min 1",
        ),
        (
            {"type": "float", "description": "d", "default": 3.0, "max": 2},
            "default 3.0 is above max 2",
        ),
        ({"type": "string", "description": "d", "min": 1}, "min/max apply to numbers only"),
        (
            {"type": "string", "description": "d", "default": "x", "options": ["a"]},
            "not one of options",
        ),
        ({"type": "string", "description": "d", "options": []}, "options is empty"),
        ({"type": "string", "description": "d", "validation_pattern": "("}, "not a valid regex"),
        ({"type": "boolean", "description": "d", "default": 1}, "not of type boolean"),
        ({"type": "integer", "description": "d", "default": True}, "not of type integer"),
    ],
)
def test_it_explains_inconsistent_parameters(param, message):
    problems = problems_of(minimal(configurations={"p": param}))
    assert message in problems["configurations.p"]


def test_it_rejects_a_misspelt_field_instead_of_ignoring_it():
    config = {"p": {"type": "string", "description": "d", "defualt": "x"}}
    problems = problems_of(minimal(configurations=config))
    assert problems == {
        "configurations.p.defualt": "unknown field: remove it or check its spelling"
    }


def test_it_rejects_attached_nodes_outside_ai_agents():
    problems = problems_of(minimal(attached_nodes=["TOOL"]))
    assert problems == {"attached_nodes": "only AI_AGENT specs can have attached nodes"}


def test_it_rejects_attaching_a_node_that_is_not_a_tool_or_memory():
    problems = problems_of(minimal(node_type="AI_AGENT", attached_nodes=["ACTION/HTTP_REQUEST"]))
    assert "not a TOOL or MEMORY node" in problems["attached_nodes"]


def test_it_requires_the_four_classification_ports_on_human_in_the_loop_specs():
    raw = minimal(node_type="HUMAN_IN_THE_LOOP", output_ports=[{"name": "confirmed"}])
    problems = problems_of(raw)
    assert "['rejected', 'unrelated', 'timeout']" in problems["output_ports"]


def test_it_refuses_subtypes_and_versions_in_the_wrong_form():
    problems = problems_of(minimal(subtype="http request", version="v1"))
    assert "UPPER_SNAKE_CASE" in problems["subtype"]
    assert "MAJOR.MINOR.PATCH" in problems["version"]


def test_it_lowercases_and_deduplicates_tags():
    assert parse_spec_document(minimal(tags=["Slack", "slack ", "Chat"])).tags == ["slack", "chat"]


def test_it_normalises_a_legacy_spec():
    legacy = {
        "type": "ACTION_NODE",
        "subtype": "HTTP_GET",
        "description": "Legacy HTTP node.",
        "parameters": [
            {
                "name": "method",
                "type": "enum",
                "required": True,
                "default_value": "GET",
                "description": "Method",
                "enum_values": ["GET", "POST"],
                "validation_pattern": None,
            },
            {"name": "timeout", "type": "int", "required": False, "default_value": 30},
        ],
        "input_ports": [{"name": "main", "type": "main", "required": True, "max_connections": 1}],
        "default_configurations": {"method": "GET"},
    }
    document = parse_spec_document(legacy)
    assert document.node_type == "ACTION"
    method = document.configurations["method"]
    assert (method.type, method.default, method.options, method.required) == (
        "string",
        "GET",
        ["GET", "POST"],
        True,
    )
    assert document.configurations["timeout"].type == "integer"
    assert document.configurations["timeout"].description == "timeout"
    assert document.input_ports[0].name == "main"


def test_it_refuses_a_document_that_is_not_a_mapping():
    assert problems_of(["not", "a", "spec"]) == {"spec": "expected a mapping of fields, got list"}
