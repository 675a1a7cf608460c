"""get_node_details' `detail`: minimal (at most about 200 tokens a node), standard (no
examples, nothing restated), full (everything); the include_* flags ignored with it, and
today's answer without it."""

from __future__ import annotations

import copy
import json

import pytest

from nodespecs.knowledge.detail_levels import MINIMAL_CHARACTERS, one_line
from nodespecs.knowledge.registry import Registry
from nodespecs.knowledge.service import KnowledgeError, get_node_details
from tests.mcp_endpoint.helpers import make_key, modern, result

pytestmark = pytest.mark.timeout(30)

# Tokens counted as a quarter of the JSON's characters (no tokenizer is installed).
TOKEN_LIMIT = 200
STANDARD_LEFT_OUT = {
    "examples",
    "parameters",
    "default_configurations",
    "default_input_params",
    "default_output_params",
}


def tokens(value) -> float:
    return len(json.dumps(value, ensure_ascii=False)) / 4


def every_node(registry) -> list[dict]:
    return [
        {"node_type": node_type, "subtype": subtype}
        for node_type, subtypes in registry.types.items()
        for subtype in subtypes
    ]


def details(registry, nodes, **options) -> list[dict]:
    answers = []
    for start in range(0, len(nodes), 50):  # at most 50 a call
        answers += get_node_details(nodes[start : start + 50], registry=registry, **options)
    return answers


def test_every_catalog_spec_at_minimal_is_at_most_200_tokens(registry):
    nodes = every_node(registry)
    assert len(nodes) >= 60

    answers = details(registry, nodes, detail="minimal")

    sizes = {f"{a['node_type']}/{a['subtype']}": tokens(a) for a in answers}
    over = {name: size for name, size in sizes.items() if size > TOKEN_LIMIT}
    assert not over
    assert len(sizes) == len(nodes)
    # Far smaller than the full answer it replaces.
    full = details(registry, nodes)
    assert sum(sizes.values()) * 8 < sum(tokens(a) for a in full)


def test_minimal_is_type_subtype_a_line_and_the_required_parameters(registry):
    [full] = get_node_details([{"node_type": "FLOW", "subtype": "IF"}], registry=registry)

    [minimal] = get_node_details(
        [{"node_type": "FLOW", "subtype": "IF"}], detail="minimal", registry=registry
    )

    assert minimal == {
        "node_type": "FLOW",
        "subtype": "IF",
        "description": (
            "Check a condition on the incoming data and send it to the true or the false "
            "output port."
        ),
        "required_configurations": {"field": "string", "operator": "string"},
        "required_inputs": {"data": "object"},
    }
    assert full["description"].startswith(minimal["description"])
    assert len(full["description"]) > len(minimal["description"])


def test_minimal_names_every_required_parameter_of_every_spec(registry):
    nodes = every_node(registry)
    for full, minimal in zip(
        details(registry, nodes), details(registry, nodes, detail="minimal"), strict=True
    ):
        required = {n for n, p in full["configurations"].items() if p["required"]}
        inputs = {n for n, p in full["input_params_schema"].items() if p["required"]}
        assert set(minimal["required_configurations"]) == required, full["subtype"]
        assert set(minimal["required_inputs"]) == inputs, full["subtype"]
        assert "\n" not in minimal["description"]
        assert "more_required" not in minimal


def test_a_spec_with_too_many_required_parameters_is_cut_to_fit_and_says_so(builtin_documents):
    big = copy.deepcopy(
        next(d for d in builtin_documents if (d["node_type"], d["subtype"]) == ("FLOW", "IF"))
    )
    big["subtype"] = "MANY_FIELDS"
    big["description"] = "Word " * 400
    big["configurations"] = {
        f"required_setting_number_{index}": {"type": "string", "required": True}
        for index in range(60)
    }
    registry = Registry([big])

    [minimal] = get_node_details(
        [{"node_type": "FLOW", "subtype": "MANY_FIELDS"}], detail="minimal", registry=registry
    )

    assert len(json.dumps(minimal, ensure_ascii=False)) <= MINIMAL_CHARACTERS
    assert tokens(minimal) <= TOKEN_LIMIT
    kept = len(minimal["required_configurations"]) + len(minimal["required_inputs"])
    assert kept > 0
    assert kept + minimal["more_required"] == 60 + 1  # the input `data` of IF is required too
    assert minimal["description"].endswith("…")
    # The first ones are kept, in order.
    assert next(iter(minimal["required_configurations"])) == "required_setting_number_0"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Send it. Then wait.", "Send it."),
        ("Call an API, e.g. Stripe. Then more.", "Call an API, e.g. Stripe."),
        ("Two\n  lines here.\nNext One.", "Two lines here."),
        ("No full stop at all", "No full stop at all"),
        ("word " * 100, ("word " * 39).strip() + "…"),
    ],
)
def test_one_line_is_the_first_sentence_cut_at_a_word(text, expected):
    assert one_line(text) == expected
    assert len(one_line(text)) <= 200


def test_standard_leaves_out_the_examples_and_what_is_restated(registry):
    node = [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]
    [full] = get_node_details(node, registry=registry)

    [standard] = get_node_details(node, detail="standard", registry=registry)

    assert not STANDARD_LEFT_OUT & set(standard)
    assert standard == {k: v for k, v in full.items() if k not in STANDARD_LEFT_OUT}
    for kept in ("configurations", "input_params_schema", "output_params_schema", "tags"):
        assert standard[kept] == full[kept]


def test_full_is_everything_and_ignores_the_include_flags(registry):
    node = [{"node_type": "AI_AGENT", "subtype": "OPENAI_CHATGPT"}]
    [everything] = get_node_details(node, registry=registry)

    [full] = get_node_details(
        node, include_examples=False, include_schemas=False, detail="full", registry=registry
    )
    [standard] = get_node_details(node, include_examples=True, detail="standard", registry=registry)

    assert full == everything
    assert "attached_nodes" in full
    assert "examples" not in standard


def test_without_detail_the_answer_is_todays(registry):
    node = [{"node_type": "ACTION", "subtype": "HTTP_REQUEST"}]

    [plain] = get_node_details(node, include_examples=False, registry=registry)

    assert "examples" not in plain
    assert "parameters" in plain
    assert "input_params_schema" in plain


def test_corrections_and_errors_work_at_every_level(registry):
    for level in ("minimal", "standard", "full"):
        corrected, missing = get_node_details(
            [
                {"node_type": "ACTION_NODE", "subtype": "HTTP_REQUEST"},
                {"node_type": "ACTION", "subtype": "HTTP_PUSH"},
            ],
            detail=level,
            registry=registry,
        )
        assert corrected["node_type"] == "ACTION"
        assert "ACTION_NODE" in corrected["warning"]
        assert "error" in missing
        assert "ACTION/HTTP_REQUEST" in missing["suggestions"]


def test_an_unavailable_provider_tool_says_so_at_minimal(builtin_documents):
    gone = copy.deepcopy(
        next(d for d in builtin_documents if (d["node_type"], d["subtype"]) == ("FLOW", "IF"))
    )
    gone["available"] = False
    registry = Registry([gone])

    [minimal] = get_node_details(
        [{"node_type": "FLOW", "subtype": "IF"}], detail="minimal", registry=registry
    )

    assert minimal["available"] is False
    assert "no longer offers its tool" in minimal["warning"]


def test_an_unknown_level_is_refused_naming_the_levels(registry):
    with pytest.raises(KnowledgeError, match="detail must be one of minimal, standard, full"):
        get_node_details([{"node_type": "FLOW", "subtype": "IF"}], detail="tiny", registry=registry)


# Over MCP.


@pytest.mark.django_db(transaction=True)
def test_the_tool_takes_detail_over_mcp(client, loaded_catalog):
    key = make_key()

    def call(arguments):
        params = {"name": "get_node_details", "arguments": arguments}
        return result(modern(client, "tools/call", params, key=key))

    nodes = [{"node_type": "FLOW", "subtype": "IF"}]
    minimal = call({"nodes": nodes, "detail": "minimal", "include_examples": True})
    refused = call({"nodes": nodes, "detail": "tiny"})
    tools = {t["name"]: t for t in result(modern(client, "tools/list", key=key))["tools"]}

    [node] = minimal["structuredContent"]["nodes"]
    assert set(node) == {
        "node_type",
        "subtype",
        "description",
        "required_configurations",
        "required_inputs",
    }
    assert refused["isError"] is True
    assert (
        "detail: Input should be 'minimal', 'standard' or 'full'" in (refused["content"][0]["text"])
    )
    schema = tools["get_node_details"]["inputSchema"]["properties"]["detail"]
    assert schema["enum"] == ["minimal", "standard", "full"]
    assert schema["type"] == "string"
