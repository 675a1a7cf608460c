"""Lineage of workflow calls (issue 24, "No recursion"): which chains are refused, and that a
run records the lineage it was called with and sends it on, itself added, with its calls: to a
real server (the echo peer over Streamable HTTP, whose `meta` tool says what `_meta` and
`Switchyard-Lineage` header it received), in direct mode and from a worker."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from graphs.authoring.files import graph_import
from graphs.execution.lineage import call_refusal, downstream_lineage
from graphs.execution.runs import RunRequest, run_create, run_execute, workflow_call
from graphs.models import Run
from nodespecs.downstream import client
from nodespecs.downstream.call_lineage import META_KEY, Hop
from tests.graph_files import FILES, OPERATOR
from tests.peers import echo_http_server

A_B = (Hop("a", "1"), Hop("b", "2"))


def test_a_call_from_outside_is_never_refused():
    assert call_refusal((), "a") is None


def test_a_workflow_that_comes_back_to_itself_is_refused_naming_the_chain_and_the_setting():
    refusal = call_refusal(A_B, "a")
    assert refusal is not None
    assert "workflow a → workflow b → workflow a" in refusal
    assert "GRAPHS_MAX_CALL_DEPTH" in refusal
    # Called by itself, directly: the shortest cycle.
    assert "workflow a → workflow a" in call_refusal((Hop("a", "1"),), "a")


def test_a_cycle_is_refused_whatever_depth_is_allowed(settings):
    settings.GRAPHS_MAX_CALL_DEPTH = 10
    assert call_refusal(A_B, "b") is not None


def test_a_chain_deeper_than_the_setting_is_refused_and_one_within_it_runs(settings):
    assert settings.GRAPHS_MAX_CALL_DEPTH == 3  # the default
    assert call_refusal(A_B, "c") is None  # a → b → c: three runs deep
    refusal = call_refusal((*A_B, Hop("c", "3")), "d")
    assert refusal is not None
    assert "workflow a → workflow b → workflow c → workflow d" in refusal
    assert "chain of 4 workflow calls" in refusal
    assert "GRAPHS_MAX_CALL_DEPTH (3)" in refusal
    settings.GRAPHS_MAX_CALL_DEPTH = 4
    assert call_refusal((*A_B, Hop("c", "3")), "d") is None


def test_hops_that_cannot_be_read_still_count_toward_the_depth():
    unreadable = (Hop("?"), Hop("?"), Hop("?"))
    assert call_refusal(unreadable, "a") is not None


def test_a_run_sends_on_the_lineage_it_recorded_with_itself_last():
    assert downstream_lineage(["a/1", "b/2"], "c", 3) == (*A_B, Hop("c", "3"))
    assert downstream_lineage([], "a", 9) == (Hop("a", "9"),)


GRAPH = """
version: "1.0"
server: {{name: "lineageTests", version: "1.0.0"}}
mcpServers:
  echo: {{type: streamableHttp, url: "{url}"}}
tools:
  - name: lineage_probe
    description: Asks the echo peer what its call came with.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: probe}}
      - {{id: probe, type: mcp, server: echo, tool: meta, args: {{}}, next: exit}}
      - {{id: exit, type: exit}}
"""


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ECHO_SERVER_TOOLS", "echo,meta")
        with echo_http_server() as url:
            yield url
    client.close_all()


@pytest.fixture
def probe(echo_url, transactional_db) -> str:
    graph_import(text=GRAPH.format(url=echo_url), base_dir=FILES, caller=OPERATOR)
    return "lineage_probe"


def received(result) -> dict:
    """What the echo peer said it received (its text answer is parsed as the node's output)."""
    return result if isinstance(result, dict) else json.loads(result)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_run_records_its_lineage_and_its_call_carries_it_on_with_the_run_added(probe):
    request = RunRequest(name=probe, arguments={}, lineage=A_B)
    outcome = workflow_call(request)

    assert outcome.succeeded, outcome.error
    run = Run.objects.get(pk=outcome.run_id)
    assert run.lineage == ["a/1", "b/2"]
    sent = ["a/1", "b/2", f"lineage_probe/{run.pk}"]
    answer = received(outcome.result)
    assert answer["meta"][META_KEY] == sent
    assert answer["lineage"] == ",".join(sent)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_run_called_from_outside_is_the_first_hop_of_its_calls(probe):
    outcome = workflow_call(RunRequest(name=probe, arguments={}))

    assert Run.objects.get(pk=outcome.run_id).lineage == []
    assert received(outcome.result)["lineage"] == f"lineage_probe/{outcome.run_id}"


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_queued_run_carries_on_the_lineage_its_row_recorded(probe):
    run = run_create(RunRequest(name=probe, arguments={}, lineage=A_B))
    # What a worker does with the run's message: only the row tells it the lineage.
    outcome = run_execute(run_id=run.pk, arguments={})

    assert outcome is not None
    assert outcome.succeeded, outcome.error
    assert received(outcome.result)["meta"][META_KEY] == ["a/1", "b/2", f"lineage_probe/{run.pk}"]
