"""A downstream call's lineage (issue 24, "No recursion"): its forms, and that it really
arrives, per call, at a real server, the echo peer, whose `meta` tool says which `_meta` and
which `Switchyard-Lineage` header its request came with: over Streamable HTTP and legacy SSE
in both, over stdio in `_meta` (a pipe has no headers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from nodespecs.downstream import call_lineage, client
from nodespecs.downstream.call_lineage import HEADER, META_KEY, Hop
from nodespecs.downstream.client import Connection
from tests.peers import echo_http_server, echo_server_command

pytestmark = [pytest.mark.timeout(60)]

A = (Hop("outer", "7"), Hop("middle", "12"))


def test_a_lineage_reads_back_from_its_json_and_its_header_forms():
    assert call_lineage.as_json(A) == ["outer/7", "middle/12"]
    assert call_lineage.as_header(A) == "outer/7,middle/12"
    assert call_lineage.from_meta(call_lineage.as_json(A)) == A
    assert call_lineage.from_header(call_lineage.as_header(A)) == A
    assert call_lineage.from_header(" outer/7 , middle/12 ") == A
    assert call_lineage.extended(A, "inner", 30)[-1] == Hop("inner", "30")


def test_what_a_caller_sends_is_read_within_bounds_and_an_odd_hop_still_counts():
    assert call_lineage.from_meta("outer/7") == ()
    assert call_lineage.from_meta(None) == ()
    assert call_lineage.from_header(None) == ()
    # A hop that is no workflow name still counts toward the depth, and matches no workflow.
    odd = call_lineage.from_meta(["outer/7", {"x": 1}, "a b", "x/abc"])
    assert [hop.workflow for hop in odd] == ["outer", "?", "?", "?"]
    # However long, at most MAX_HOPS are read: more than any depth allowed.
    flood = call_lineage.from_header(",".join(["w/1"] * 100_000))
    assert len(flood) == call_lineage.MAX_HOPS
    assert len(call_lineage.from_meta(["w"] * 1000)) == call_lineage.MAX_HOPS


def test_of_the_meta_and_the_header_the_longer_lineage_is_believed():
    assert call_lineage.longest(A[:1], A) == A
    assert call_lineage.longest(A, ()) == A
    assert call_lineage.longest() == ()


@pytest.fixture(autouse=True)
def _fresh_pool():
    client.close_all()
    yield
    client.close_all()


@pytest.fixture
def probe_tools(monkeypatch):
    monkeypatch.setenv("ECHO_SERVER_TOOLS", "echo,meta")


def received(connection: Connection, lineage=()) -> dict:
    """What the echo peer says its `meta` call came with."""
    answer = client.call_tool(connection, "meta", {}, lineage=lineage)
    return json.loads(answer.content[0].text)


@pytest.fixture(params=[("streamable_http", ()), ("sse", ("--sse",))], ids=["http", "sse"])
def http_echo(request, probe_tools) -> Iterator[Connection]:
    transport, args = request.param
    with echo_http_server(*args) as url:
        # An agent chooses a declared server's headers: it cannot choose the lineage.
        yield Connection(name="echo", transport=transport, url=url, headers=((HEADER, "forged/1"),))


@pytest.mark.slow
def test_each_call_on_one_pooled_http_session_carries_its_own_lineage_in_meta_and_header(
    http_echo,
):
    lineages = [(Hop("outer", str(n)), Hop("inner", str(100 + n))) for n in range(12)]
    # Concurrent calls share the one pooled session: each must carry its own lineage.
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda lineage: received(http_echo, lineage), lineages))
    for lineage, answer in zip(lineages, answers, strict=True):
        assert answer["meta"][META_KEY] == call_lineage.as_json(lineage)
        assert answer["lineage"] == call_lineage.as_header(lineage)
    assert client.pool_size() == 1


@pytest.mark.slow
def test_a_call_without_a_lineage_carries_none_of_ours(http_echo):
    answer = received(http_echo)
    assert META_KEY not in (answer["meta"] or {})
    assert answer["lineage"] == "forged/1"  # the connection's own header, unchanged


@pytest.mark.slow
def test_over_stdio_the_lineage_travels_in_meta(probe_tools):
    command, *args = echo_server_command()
    connection = Connection(
        name="echo",
        transport="stdio",
        command=command,
        args=tuple(args),
        env=(("ECHO_SERVER_TOOLS", "echo,meta"),),
    )
    answer = received(connection, A)
    assert answer["meta"][META_KEY] == ["outer/7", "middle/12"]
    assert answer["lineage"] is None
