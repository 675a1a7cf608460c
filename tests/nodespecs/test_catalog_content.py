"""The built-in catalog is complete and every spec in it is usable by an agent."""

import pytest

from nodespecs.knowledge.catalog import read_builtin_catalog
from nodespecs.knowledge.service import get_node_details
from nodespecs.knowledge.specformat import HIL_CLASSIFICATIONS, NODE_TYPES, dump_spec_document

# Every subtype the seed documents name: 001 (canonical) and 000 (older names, as aliases).
SEED_001_NAMES = {
    "TRIGGER": ["MANUAL", "WEBHOOK", "CRON", "GITHUB", "SLACK", "EMAIL"],
    "AI_AGENT": ["OPENAI_CHATGPT", "ANTHROPIC_CLAUDE", "GOOGLE_GEMINI"],
    "ACTION": ["HTTP_REQUEST", "DATA_TRANSFORMATION"],
    "EXTERNAL_ACTION": [
        "SLACK", "GITHUB", "NOTION", "GOOGLE_CALENDAR", "FIRECRAWL", "DISCORD_ACTION",
        "TELEGRAM_ACTION",
    ],
    "FLOW": ["IF", "LOOP", "MERGE", "FILTER", "SORT", "WAIT", "DELAY"],
    "HUMAN_IN_THE_LOOP": [
        "SLACK_INTERACTION", "GMAIL_INTERACTION", "OUTLOOK_INTERACTION", "DISCORD_INTERACTION",
        "TELEGRAM_INTERACTION", "MANUAL_REVIEW",
    ],
    "TOOL": [
        "NOTION_MCP_TOOL", "GOOGLE_CALENDAR_MCP_TOOL", "SLACK_MCP_TOOL", "FIRECRAWL_MCP_TOOL",
        "DISCORD_MCP_TOOL",
    ],
    "MEMORY": ["VECTOR_DATABASE", "CONVERSATION_BUFFER", "KEY_VALUE_STORE"],
}  # fmt: skip
SEED_000_NAMES = {
    "ACTION_NODE": [
        "RUN_CODE", "HTTP_REQUEST", "PARSE_IMAGE", "WEB_SEARCH", "DATABASE_OPERATION",
        "FILE_OPERATION", "DATA_TRANSFORMATION",
    ],
    "TRIGGER_NODE": [
        "TRIGGER_MANUAL", "TRIGGER_CRON", "TRIGGER_WEBHOOK", "TRIGGER_CHAT", "TRIGGER_EMAIL",
        "TRIGGER_FORM", "TRIGGER_CALENDAR",
    ],
    "AI_AGENT_NODE": ["GEMINI_NODE", "OPENAI_NODE", "CLAUDE_NODE"],
    "FLOW_NODE": ["IF", "FILTER", "LOOP", "MERGE", "SWITCH", "WAIT"],
    "TOOL_NODE": ["TOOL_GOOGLE_CALENDAR_MCP", "CALENDAR", "EMAIL", "HTTP"],
    "MEMORY_NODE": [
        "MEMORY_VECTOR_STORE", "MEMORY_SIMPLE", "MEMORY_DOCUMENT", "MEMORY_BUFFER",
        "MEMORY_KNOWLEDGE", "MEMORY_EMBEDDING",
    ],
    "HUMAN_LOOP_NODE": [
        "HUMAN_GMAIL", "HUMAN_SLACK", "HUMAN_DISCORD", "HUMAN_TELEGRAM", "HUMAN_APP",
    ],
    "EXTERNAL_ACTION_NODE": [
        "EXTERNAL_GITHUB", "EXTERNAL_GOOGLE_CALENDAR", "EXTERNAL_TRELLO", "EXTERNAL_EMAIL",
        "EXTERNAL_SLACK", "EXTERNAL_API_CALL", "EXTERNAL_WEBHOOK", "EXTERNAL_NOTIFICATION",
    ],
}  # fmt: skip


def test_the_catalog_has_at_least_sixty_specs_across_all_eight_types(builtin_documents):
    assert len(builtin_documents) >= 60
    assert {d["node_type"] for d in builtin_documents} == set(NODE_TYPES)


@pytest.mark.parametrize(
    ("node_type", "subtype"),
    [(t, s) for t, subtypes in SEED_001_NAMES.items() for s in subtypes],
)
def test_every_canonical_name_of_seed_001_exists_as_is(registry, node_type, subtype):
    assert subtype in registry.types[node_type]


@pytest.mark.parametrize(
    ("node_type", "subtype"),
    [(t, s) for t, subtypes in SEED_000_NAMES.items() for s in subtypes],
)
def test_every_older_name_of_seed_000_resolves_to_a_spec(registry, node_type, subtype):
    [result] = get_node_details([{"node_type": node_type, "subtype": subtype}], registry=registry)
    assert "error" not in result, result.get("error")
    assert result["node_type"] == node_type.removesuffix("_NODE").replace(
        "HUMAN_LOOP", "HUMAN_IN_THE_LOOP"
    )


BUILTIN = [dump_spec_document(document) for document in read_builtin_catalog()]
each_spec = pytest.mark.parametrize(
    "spec", BUILTIN, ids=[f"{d['node_type']}/{d['subtype']}" for d in BUILTIN]
)


@each_spec
def test_every_spec_is_real(spec):
    name = f"{spec['node_type']}/{spec['subtype']}"
    assert len(spec["description"]) >= 80, f"{name}: description too thin for an agent"
    assert spec["display_name"], name
    assert spec["configurations"], f"{name}: no configurations"
    assert spec["output_params"], f"{name}: no output params"
    assert len(spec["tags"]) >= 3, f"{name}: too few tags"
    assert spec["examples"], f"{name}: no example"
    for params in ("configurations", "input_params", "output_params"):
        for param_name, param in spec[params].items():
            assert param["description"], f"{name}.{params}.{param_name}"
            if param.get("sensitive"):
                assert param.get("default") is None, f"{name}.{param_name}: a secret has a default"


@each_spec
def test_every_example_uses_declared_parameters(spec):
    declared = set(spec["configurations"])
    for example in spec["examples"]:
        unknown = set(example["configurations"]) - declared
        assert not unknown, f"{spec['subtype']} example {example['name']!r} sets {unknown}"


def test_human_in_the_loop_specs_carry_the_built_in_classification(builtin_documents):
    hil = [d for d in builtin_documents if d["node_type"] == "HUMAN_IN_THE_LOOP"]
    assert len(hil) >= 6
    for spec in hil:
        assert [p["name"] for p in spec["output_ports"]][:4] == list(HIL_CLASSIFICATIONS)
        classification = spec["output_params"]["response_classification"]
        assert classification["options"] == list(HIL_CLASSIFICATIONS)
        assert "IF" in spec["description"] or "AI_AGENT" in spec["description"], spec["subtype"]


def test_ai_agents_accept_tools_and_memory(builtin_documents):
    agents = [d for d in builtin_documents if d["node_type"] == "AI_AGENT"]
    assert agents
    assert all(d["attached_nodes"] == ["TOOL", "MEMORY"] for d in agents)


def test_no_alias_shadows_a_real_subtype_of_the_same_type(builtin_documents):
    keys = {(d["node_type"], d["subtype"]) for d in builtin_documents}
    for d in builtin_documents:
        for alias in d["aliases"]:
            assert (d["node_type"], alias) not in keys, f"{d['subtype']} alias {alias}"
