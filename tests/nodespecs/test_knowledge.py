"""The knowledge service: node types, details with corrections, and search."""

import time

import pytest

from nodespecs.knowledge.registry import Registry
from nodespecs.knowledge.service import (
    MAX_APPROXIMATE_PER_CALL,
    KnowledgeError,
    get_node_details,
    get_node_types,
    search_nodes,
)
from nodespecs.knowledge.specformat import NODE_TYPES


def detail(registry, node_type, subtype, **options):
    [result] = get_node_details(
        [{"node_type": node_type, "subtype": subtype}], registry=registry, **options
    )
    return result


# get_node_types


def test_it_lists_every_type_with_sorted_subtypes(registry):
    types = get_node_types(registry=registry)
    assert list(types.node_types) == list(NODE_TYPES)
    for subtypes in types.node_types.values():
        assert subtypes == sorted(subtypes)
        assert subtypes
    assert "HTTP_REQUEST" in types.node_types["ACTION"]
    assert types.warning is None


def test_it_filters_by_type(registry):
    types = get_node_types("AI_AGENT", registry=registry)
    assert types.as_dict() == {"AI_AGENT": ["ANTHROPIC_CLAUDE", "GOOGLE_GEMINI", "OPENAI_CHATGPT"]}


@pytest.mark.parametrize("raw", ["AI_AGENT_NODE", "ai_agent", "Ai_Agent_Node"])
def test_it_corrects_a_filter_a_suffix_or_case_away_with_a_warning(registry, raw):
    types = get_node_types(raw, registry=registry)
    assert list(types.node_types) == ["AI_AGENT"]
    assert f"'{raw}' → 'AI_AGENT'" in types.warning
    assert types.as_dict()["warning"] == types.warning


def test_it_maps_the_old_human_loop_name(registry):
    assert list(get_node_types("HUMAN_LOOP_NODE", registry=registry).node_types) == [
        "HUMAN_IN_THE_LOOP"
    ]


def test_a_bad_filter_lists_the_valid_types(registry):
    with pytest.raises(KnowledgeError) as caught:
        get_node_types("SPACESHIP", registry=registry)
    message = str(caught.value)
    assert "type_filter" in message
    assert all(node_type in message for node_type in NODE_TYPES)


# get_node_details


def test_it_returns_the_full_response_structure(registry):
    result = detail(registry, "AI_AGENT", "OPENAI_CHATGPT")
    for key in (
        "node_type",
        "subtype",
        "version",
        "description",
        "parameters",
        "configurations",
        "input_params_schema",
        "output_params_schema",
        "default_configurations",
        "default_input_params",
        "default_output_params",
        "input_ports",
        "output_ports",
        "tags",
        "attached_nodes",
        "examples",
    ):
        assert key in result, key
    assert result["node_type"] == "AI_AGENT"
    assert "warning" not in result
    assert result["default_configurations"]["temperature"] == 0.7
    assert result["attached_nodes"] == ["TOOL", "MEMORY"]
    assert {p["name"] for p in result["parameters"]} == set(result["configurations"])


def test_attached_nodes_appear_only_on_ai_agents(registry):
    assert "attached_nodes" not in detail(registry, "ACTION", "HTTP_REQUEST")


def test_it_can_leave_out_examples_and_schemas(registry):
    result = detail(
        registry, "ACTION", "HTTP_REQUEST", include_examples=False, include_schemas=False
    )
    assert "examples" not in result
    assert "input_params_schema" not in result
    assert "output_params_schema" not in result
    assert "configurations" in result


def test_leaving_out_schemas_does_not_change_the_shared_registry(registry):
    detail(registry, "HUMAN_IN_THE_LOOP", "SLACK_INTERACTION", include_schemas=False)
    assert "input_params_schema" in detail(registry, "HUMAN_IN_THE_LOOP", "SLACK_INTERACTION")


def test_it_corrects_the_node_suffix_as_the_seed_describes(registry):
    result = detail(registry, "ACTION_NODE", "HTTP_REQUEST")
    assert (result["node_type"], result["subtype"]) == ("ACTION", "HTTP_REQUEST")
    assert result["warning"] == (
        "Auto-corrected: 'ACTION_NODE' → 'ACTION'. Please use correct format without "
        "'_NODE' suffix."
    )


@pytest.mark.parametrize(
    ("raw_type", "raw_subtype", "expected"),
    [
        ("AI_AGENT_NODE", "OPENAI_NODE", ("AI_AGENT", "OPENAI_CHATGPT")),
        ("HUMAN_LOOP_NODE", "HUMAN_SLACK", ("HUMAN_IN_THE_LOOP", "SLACK_INTERACTION")),
        ("TRIGGER_NODE", "TRIGGER_MANUAL", ("TRIGGER", "MANUAL")),
        ("MEMORY_NODE", "MEMORY_BUFFER", ("MEMORY", "CONVERSATION_BUFFER")),
        ("action", "http_request", ("ACTION", "HTTP_REQUEST")),
        ("ACTION", "HTTP_REQUST", ("ACTION", "HTTP_REQUEST")),
        ("FLOW", "if", ("FLOW", "IF")),
        ("FLOW", "IFF", ("FLOW", "IF")),
        ("FLOW", "SOTR", ("FLOW", "SORT")),
        ("FLOW", "LOP", ("FLOW", "LOOP")),
        ("EXTERNAL_ACTION_NODE", "EXTERNAL_GITHUB", ("EXTERNAL_ACTION", "GITHUB")),
        ("ACTION", "OPENAI_CHATGPT", ("AI_AGENT", "OPENAI_CHATGPT")),
    ],
)
def test_it_corrects_common_mistakes_and_says_what_it_corrected(
    registry, raw_type, raw_subtype, expected
):
    result = detail(registry, raw_type, raw_subtype)
    assert (result["node_type"], result["subtype"]) == expected
    assert result["warning"].startswith("Auto-corrected: ")
    assert "error" not in result


def test_an_unknown_node_gets_an_error_with_the_closest_names(registry):
    result = detail(registry, "ACTION", "HTTP_PUSH")
    assert result["node_type"] == "ACTION"
    assert "Node specification not found: ACTION/HTTP_PUSH" in result["error"]
    assert "ACTION/HTTP_REQUEST" in result["suggestions"]
    assert "get_node_types" in result["error"]


def test_an_unknown_type_gets_an_error_not_an_exception(registry):
    result = detail(registry, "SPACESHIP", "WARP")
    assert "not found" in result["error"]


def test_one_bad_entry_never_spoils_the_others(registry):
    results = get_node_details(
        [
            {"node_type": "ACTION", "subtype": "HTTP_REQUEST"},
            {"node_type": "ACTION", "subtype": "NOPE_NOPE"},
            "not an object",
            {"node_type": 7, "subtype": None},
            {"node_type": "FLOW", "subtype": "IF"},
        ],
        registry=registry,
    )
    assert [r.get("subtype") for r in results] == ["HTTP_REQUEST", "NOPE_NOPE", None, None, "IF"]
    assert ["error" in r for r in results] == [False, True, True, True, False]


@pytest.mark.parametrize("nodes", [[], None, "ACTION/HTTP_REQUEST", [{}] * 51])
def test_it_refuses_a_malformed_node_list(registry, nodes):
    with pytest.raises(KnowledgeError, match="nodes"):
        get_node_details(nodes, registry=registry)


# search_nodes


def test_search_returns_scored_summaries_best_first(registry):
    results = search_nodes("send an http request to an api", registry=registry)
    assert (results[0]["node_type"], results[0]["subtype"]) == ("ACTION", "HTTP_REQUEST")
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert set(results[0]) == {
        "node_type",
        "subtype",
        "display_name",
        "description",
        "tags",
        "relevance_score",
        "matched_terms",
    }


def test_search_can_include_full_details(registry):
    [result] = search_nodes("http request", max_results=1, include_details=True, registry=registry)
    assert "configurations" in result
    assert result["relevance_score"] > 0


def test_search_filters_by_type_with_correction(registry):
    results = search_nodes("slack", type_filter="tool_node", registry=registry)
    assert results
    assert {r["node_type"] for r in results} == {"TOOL"}


def test_search_honours_max_results(registry):
    assert len(search_nodes("send", max_results=3, registry=registry)) == 3


def test_search_for_nonsense_finds_nothing(registry):
    assert search_nodes("zzzqxv", registry=registry) == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"query": ""}, "query is empty"),
        ({"query": "   "}, "query is empty"),
        ({"query": "x", "max_results": 0}, "max_results"),
        ({"query": "x", "max_results": 101}, "max_results"),
        ({"query": "x", "max_results": True}, "max_results"),
        ({"query": "x", "type_filter": "SPACESHIP"}, "type_filter"),
    ],
)
def test_search_explains_bad_arguments(registry, arguments, message):
    with pytest.raises(KnowledgeError, match=message):
        search_nodes(registry=registry, **arguments)


def test_a_call_of_many_misspelt_names_on_a_large_catalog_costs_a_few_approximate_matches(
    builtin_documents,
):
    template = next(doc for doc in builtin_documents if doc["node_type"] == "TOOL")
    large = Registry(
        [
            *builtin_documents,
            *({**template, "subtype": f"PROVIDER_TOOL_{index:05d}"} for index in range(5000)),
        ]
    )
    misspelt = [
        {"node_type": "TOOL", "subtype": f"PROVIDR_TOL_{index:05d}X"} for index in range(50)
    ]

    started = time.perf_counter()
    results = get_node_details(misspelt, registry=large)
    elapsed = time.perf_counter() - started

    approximated = results[:MAX_APPROXIMATE_PER_CALL]
    assert all("error" not in result or result["suggestions"] for result in approximated)
    for result in results[MAX_APPROXIMATE_PER_CALL:]:
        assert "matched approximately; ask for this one in a call of its own" in result["error"]
    # 50 approximate matches against 5,063 names took 6.9 s; five take well under one.
    assert elapsed < 1.5, elapsed


def test_an_unknown_node_suggests_what_its_words_describe_related_types_first(registry):
    [result] = get_node_details(
        [{"node_type": "ACTION", "subtype": "SEND_EMAIL"}], registry=registry
    )

    assert result["suggestions"][0] == "EXTERNAL_ACTION/EMAIL"
    assert "EXTERNAL_ACTION/GMAIL" in result["suggestions"]
    assert "Closest valid names: EXTERNAL_ACTION/EMAIL" in result["error"]
