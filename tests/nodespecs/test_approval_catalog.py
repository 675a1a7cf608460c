"""The HUMAN_IN_THE_LOOP catalog specs say how to write a Switchyard `approval` node.

An agent that searches for a person's approval lands on a HUMAN_IN_THE_LOOP spec; each one's
description says how the node is written in a graph and who decides, and its examples hold the
node's YAML (the keys of graphs/engine: message, approvers, form, timeoutMs, routes) with the
node's output as expected_output. A database loaded from the specs' 1.0.0 entries picks the
new text up on the next `load_node_specs`, unless an author edited the spec.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
import yaml

from nodespecs.knowledge.catalog import document_digest, load_builtin_catalog, read_builtin_catalog
from nodespecs.knowledge.service import search_nodes
from nodespecs.knowledge.specformat import dump_spec_document
from nodespecs.knowledge.specs import spec_save
from nodespecs.models import NodeSpec

HIL = [
    dump_spec_document(document)
    for document in read_builtin_catalog()
    if document.node_type == "HUMAN_IN_THE_LOOP"
]
each_hil_spec = pytest.mark.parametrize("spec", HIL, ids=[d["subtype"] for d in HIL])

NODE_KEYS = {"id", "type", "message", "approvers", "form", "timeoutMs", "routes"}
DECISIONS = {"approved", "rejected", "timeout"}
FORM_TYPES = {"string", "number", "integer", "boolean"}
OUTPUT_KEYS = {"decision", "by", "comment", "form", "decided_at"}
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array"}
_YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.DOTALL)
# The paragraph version 1.1.0 added to each description starts with these words.
_GRAPH_PARAGRAPH = " In a Switchyard graph"


def approval_examples(spec: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(example, the approval node its description shows) for each example holding YAML."""
    found = []
    for example in spec["examples"]:
        match = _YAML_BLOCK.search(example["description"])
        if match:
            [node] = yaml.safe_load(match.group(1))
            found.append((example, node))
    return found


def test_every_shipped_human_in_the_loop_spec_is_covered():
    assert {d["subtype"] for d in HIL} >= {
        "SLACK_INTERACTION", "GMAIL_INTERACTION", "OUTLOOK_INTERACTION", "DISCORD_INTERACTION",
        "TELEGRAM_INTERACTION", "MANUAL_REVIEW", "APP_INTERACTION",
    }  # fmt: skip
    assert all(d["version"] == "1.1.0" for d in HIL)


@each_hil_spec
def test_the_description_says_how_to_write_it_in_a_graph_and_who_decides(spec):
    description = spec["description"]
    assert "In a Switchyard graph" in description
    assert '`approval` node (type "approval"' in description
    assert "Approvals page (/approvals/)" in description
    assert "POST /api/v1/runs/{id}/decision (scope runs:decide)" in description
    assert "routes.timeout" in description
    # The paragraph comes after the 1.0.0 text, which still describes the ports and analysis.
    assert "IF" in description.split(_GRAPH_PARAGRAPH)[0]


@each_hil_spec
def test_an_example_shows_the_approval_node_yaml_with_the_fixed_keys(spec):
    examples = approval_examples(spec)
    assert examples, f"{spec['subtype']}: no example with the approval node's YAML"
    for example, node in examples:
        where = f"{spec['subtype']} example {example['name']!r}"
        assert example["name"].startswith("Switchyard graph:"), where
        assert set(node) <= NODE_KEYS, where
        assert {"id", "type", "message", "routes"} <= set(node), where
        assert node["type"] == "approval", where
        assert node.get("approvers", "reviewers") in ("reviewers", "caller"), where
        assert isinstance(node["message"], str), where
        assert "$.entry." in node["message"], where
        routes = node["routes"]
        assert {"approved", "rejected"} <= set(routes) <= DECISIONS, where
        # A timeout route exactly when the node has a timeout (the graph checks refuse either
        # without the other).
        assert ("timeout" in routes) == ("timeoutMs" in node), where
        if "timeoutMs" in node:
            assert isinstance(node["timeoutMs"], int), where
            assert node["timeoutMs"] > 0, where
        form = node.get("form")
        if form is not None:
            assert form["type"] == "object", where
            for name, prop in form["properties"].items():
                assert prop["type"] in FORM_TYPES, f"{where}: form.{name} is not flat"
        # The example's payloads: the run's context the message reads, and the node's output.
        assert set(example["input_example"]) == {"entry"}, where
        output = example["expected_output"]
        assert set(output) == OUTPUT_KEYS, where
        assert output["decision"] in routes, where
        assert output["by"]["kind"] in ("user", "api_key", "client"), where
        assert set(output["by"]) == {"kind", "id", "name"}, where
        assert set(output["form"]) <= set((form or {}).get("properties", {})), where
        assert example["configurations"] == {}, where


def test_the_slack_spec_announces_waiting_runs_through_a_slack_incoming_webhook():
    [slack] = [d for d in HIL if d["subtype"] == "SLACK_INTERACTION"]
    assert "APPROVAL_NOTIFY_URL to a Slack incoming webhook URL" in slack["description"]
    [(_, node)] = approval_examples(slack)
    # The refund node of the issue, as written there.
    assert node == {
        "id": "approve",
        "type": "approval",
        "message": '"Refund " & $string($.entry.amount) & " to " & $.entry.customer & "?"',
        "approvers": "reviewers",
        "form": {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 500}}},
        "timeoutMs": 86400000,
        "routes": {"approved": "refund", "rejected": "decline", "timeout": "escalate"},
    }


def test_the_in_app_spec_describes_asking_the_calling_clients_user():
    [app] = [d for d in HIL if d["subtype"] == "APP_INTERACTION"]
    assert 'With `approvers: "caller"`' in app["description"]
    assert "elicitation/create" in app["description"]
    approvers = {node.get("approvers") for _, node in approval_examples(app)}
    assert approvers == {"reviewers", "caller"}
    [caller] = [ex for ex, node in approval_examples(app) if node["approvers"] == "caller"]
    assert caller["expected_output"]["by"]["kind"] == "client"


def _given(output: dict[str, Any], node: Any) -> dict[str, Any]:
    """A test run's decision for its approval node: this output."""
    return output


def _graph_around(node: dict[str, Any], entry: dict[str, Any]) -> str:
    """A one-tool definition: entry, the node, and a transform per route target that returns
    its own id, then the exit."""
    targets = sorted(set(node["routes"].values()))
    nodes = [{"id": "entry", "type": "entry", "next": node["id"]}, node]
    nodes += [
        {"id": target, "type": "transform", "transform": {"expr": f'"{target}"'}, "next": "exit"}
        for target in targets
    ]
    nodes.append({"id": "exit", "type": "exit"})
    schema = {
        "type": "object",
        "properties": {name: {"type": JSON_TYPES[type(value)]} for name, value in entry.items()},
    }
    definition = {
        "version": "1.0",
        "server": {"name": "approvals", "version": "1.0.0"},
        "tools": [{"name": "t", "description": "t", "inputSchema": schema, "nodes": nodes}],
    }
    return yaml.safe_dump(definition, sort_keys=False)


@each_hil_spec
def test_the_example_node_parses_waits_with_its_message_and_follows_its_decision(spec):
    pytest.importorskip("graphs.engine.format.approval_reading")  # the graph format reads it
    from graphs.engine import Paused, compile_tool, execute, parse_definition

    def no_calls(*args: Any) -> Any:
        raise AssertionError("no mcp node here")

    for example, node in approval_examples(spec):
        entry = example["input_example"]["entry"]
        compiled = compile_tool(parse_definition(_graph_around(node, entry)).tool("t"))

        paused = execute(compiled, entry, call_tool=no_calls)
        assert isinstance(paused, Paused)
        assert paused.node_id == node["id"]
        assert paused.approvers == node.get("approvers", "reviewers")
        assert paused.form == node.get("form")
        assert paused.timeout_ms == node.get("timeoutMs")
        assert isinstance(paused.message, str)
        assert len(paused.message) > 10

        output = example["expected_output"]
        result = execute(
            compiled, entry, call_tool=no_calls, decided=functools.partial(_given, output)
        )
        assert result == node["routes"][output["decision"]]


# search_nodes, the function the MCP tool of the same name calls
APPROVAL_QUERIES = [
    "ask a manager to approve",
    "wait for approval",
    "human approval before refund",
    "approve a refund",
    "get sign-off from a manager",
]


@pytest.mark.parametrize("query", APPROVAL_QUERIES)
def test_searching_for_a_persons_approval_leads_to_the_approval_node_yaml(registry, query):
    results = search_nodes(query, max_results=10, registry=registry)
    assert results[0]["node_type"] == "HUMAN_IN_THE_LOOP", [
        (r["node_type"], r["subtype"]) for r in results
    ]
    assert "In a Switchyard graph" in results[0]["description"]
    [best] = search_nodes(query, max_results=1, include_details=True, registry=registry)
    assert any('type: "approval"' in ex["description"] for ex in best["examples"])


def test_waiting_for_approval_ranks_every_human_in_the_loop_spec_above_delay_and_wait(registry):
    names = [
        f"{r['node_type']}/{r['subtype']}"
        for r in search_nodes("wait for approval", max_results=20, registry=registry)
    ]
    first_flow = min(names.index(n) for n in ("FLOW/DELAY", "FLOW/WAIT") if n in names)
    assert all(n.startswith("HUMAN_IN_THE_LOOP/") for n in names[:first_flow])
    assert first_flow >= 6


# Loading: a database holding the 1.0.0 entries


def _as_loaded_from_1_0_0(spec: NodeSpec) -> dict[str, Any]:
    """The spec as the 1.0.0 catalog entry had it: without the graph paragraph and examples."""
    document = spec.document()
    return document | {
        "version": "1.0.0",
        "description": document["description"].split(_GRAPH_PARAGRAPH)[0],
        "examples": [
            ex for ex in document["examples"] if not ex["name"].startswith("Switchyard graph:")
        ],
    }


@pytest.fixture
def hil_at_1_0_0(loaded_catalog) -> list[NodeSpec]:
    specs = list(NodeSpec.objects.filter(node_type="HUMAN_IN_THE_LOOP"))
    for spec in specs:
        older = _as_loaded_from_1_0_0(spec)
        spec.set_document(older)
        spec.builtin_digest = document_digest(older)
        spec_save(spec=spec, comment="Loaded from the built-in catalog")
    return specs


def test_a_database_loaded_from_1_0_0_gets_the_graph_text_on_the_next_load(hil_at_1_0_0):
    report = load_builtin_catalog()

    assert sorted(report.updated) == sorted(f"HUMAN_IN_THE_LOOP/{s.subtype}" for s in hil_at_1_0_0)
    assert report.skipped == {}
    shipped = {d["subtype"]: d for d in HIL}
    for spec in hil_at_1_0_0:
        spec.refresh_from_db()
        assert spec.version == "1.1.0"
        assert spec.document() == shipped[spec.subtype]
        assert spec.builtin_digest == document_digest(shipped[spec.subtype])


def test_an_author_edit_of_a_1_0_0_spec_is_kept(hil_at_1_0_0, author):
    slack = NodeSpec.objects.get(node_type="HUMAN_IN_THE_LOOP", subtype="SLACK_INTERACTION")
    slack.description = "Our own words: ask #finance, and route on the classification."
    spec_save(spec=slack, author=author, comment="Reworded")

    report = load_builtin_catalog()

    assert list(report.skipped) == ["HUMAN_IN_THE_LOOP/SLACK_INTERACTION"]
    assert len(report.updated) == len(hil_at_1_0_0) - 1
    slack.refresh_from_db()
    assert slack.description == "Our own words: ask #finance, and route on the classification."
    assert slack.version == "1.0.0"
