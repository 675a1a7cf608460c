"""Test runs' mocks (graphs/execution/mocks.py): what each mocked mcp node answers, fixed when the
run is created and kept on it, and a run of a workflow whose server cannot be reached succeeding on
its mocks alone."""

from __future__ import annotations

import pytest

from graphs.execution.mocks import MockRefused, example_of, mock_answers, report_of_test_run
from graphs.execution.payloads import MASK
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import NodeExecution, Run, Workflow
from nodespecs.callers import Caller
from tests.graph_files import OPERATOR

# The key the test runs are made with (`_run`), and so may take outputs from them.
TESTER = Caller(actor="key:tester", scopes=frozenset({"tools:execute", "workflows:write"}))

pytestmark = pytest.mark.timeout(30)

# Two calls to a server nothing listens on: only mocks let the run through.
UNREACHABLE = """
version: "1.0"
server: {name: mocked, version: "1.0.0"}
mcpServers:
  far: {type: streamableHttp, url: "http://127.0.0.1:9/mcp"}
tools:
  - name: fetch_twice
    description: Fetches a page, then its links.
    inputSchema: {type: object, properties: {url: {type: string}}}
    nodes:
      - {id: entry, type: entry, next: page}
      - {id: page, type: mcp, server: far, tool: fetch, args: {url: "$.entry.url"}, next: links}
      - {id: links, type: mcp, server: far, tool: links, args: {html: "$.page.html"}, next: shape}
      - id: shape
        type: transform
        transform: {expr: '{"count": $count($.links.urls)}'}
        next: exit
      - {id: exit, type: exit}
"""


@pytest.fixture
def version(db):
    from graphs.authoring.files import graph_import

    graph_import(text=UNREACHABLE, caller=OPERATOR)
    return Workflow.objects.get(name="fetch_twice").current_version


def _run(version, mocks):
    request = RunRequest(
        name="fetch_twice",
        arguments={"url": "http://example.test"},
        caller="key:tester",
        version=(version.pk, version.digest),
        is_test=True,
        mocks=mocks,
    )
    return workflow_call(request)


def test_mocked_nodes_answer_instead_of_their_server(version):
    mocks = mock_answers(
        version,
        {"page": {"html": "<a>"}, "far.links": {"urls": ["a", "b", "c"]}},
        mock_all=False,
        caller=TESTER,
    )
    outcome = _run(version, mocks)

    assert outcome.succeeded, outcome.error
    assert outcome.result == {"count": 3}
    run = Run.objects.get(pk=outcome.run_id)
    assert run.is_test is True
    assert set(run.mocks) == {"page", "links"}
    report = report_of_test_run(outcome.run_id)
    assert [node["id"] for node in report["nodes"]] == ["entry", "page", "links", "shape", "exit"]
    assert report["nodes"][1] == {"id": "page", "output": {"html": "<a>"}, "mocked": True}


def test_an_unmocked_node_calls_for_real_and_fails_naming_itself(version):
    outcome = _run(
        version, mock_answers(version, {"page": {"html": ""}}, mock_all=False, caller=TESTER)
    )
    assert outcome.status == "failed"
    assert outcome.error_node_id == "links"


def test_mock_all_answers_every_other_node_from_its_output_schema(version):
    outcome = _run(version, mock_answers(version, {}, mock_all=True, caller=TESTER))
    # No TOOL spec says what `links` returns, so it answers an empty object: no urls.
    assert outcome.succeeded, outcome.error
    assert outcome.result == {"count": 0}


def test_a_call_tool_result_is_taken_as_it_is(version):
    given = {"content": [{"type": "text", "text": '{"html": "<p>"}'}]}
    answers = mock_answers(version, {"page": given}, mock_all=False, caller=TESTER)
    assert answers["page"]["content"][0]["text"] == '{"html": "<p>"}'


def test_from_run_takes_what_the_node_returned_then(version):
    first = _run(
        version,
        mock_answers(
            version, {"page": {"html": "x"}, "links": {"urls": [1]}}, mock_all=False, caller=TESTER
        ),
    )
    answers = mock_answers(
        version, {"links": {"from_run": first.run_id}}, mock_all=False, caller=TESTER
    )
    assert answers["links"]["structuredContent"] == {"urls": [1]}


def test_from_run_refuses_a_masked_or_cut_output(version):
    first = _run(
        version,
        mock_answers(
            version, {"page": {"html": "x"}, "links": {"urls": [1]}}, mock_all=False, caller=TESTER
        ),
    )
    NodeExecution.objects.filter(run_id=first.run_id, node_id="links").update(
        output={"urls": [1], "token": MASK}
    )
    with pytest.raises(MockRefused, match=r"masked \(a secret\) or cut"):
        mock_answers(version, {"links": {"from_run": first.run_id}}, mock_all=False, caller=TESTER)


@pytest.mark.parametrize(
    ("mocks", "message"),
    [
        ({"shape": 1}, "is a transform node"),
        ({"nowhere": 1}, "no mcp or approval node has that id"),
        ({"far.nothing": 1}, "mock one of: page, links, far.fetch, far.links"),
        ({"page": {"content": [{"type": "bogus"}]}}, "looks like a CallToolResult"),
        ({"page": {"from_run": 999999}}, "has no successful execution"),
        ({"page": {"from_run": "7"}}, "must be a run id"),
    ],
)
def test_mocks_for_what_does_not_exist_are_refused(version, mocks, message):
    with pytest.raises(MockRefused, match=message):
        mock_answers(version, mocks, mock_all=False, caller=TESTER)


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        (
            {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"enum": ["a"]}}},
            {"n": 0, "s": "a"},
        ),
        ({"type": "array", "items": {"type": "boolean"}}, [False]),
        ({"type": ["null", "string"]}, "example"),
        ({"anyOf": [{"const": 3}]}, 3),
        ({"$ref": "#"}, None),
    ],
)
def test_example_of_makes_a_value_of_a_schema(schema, value):
    assert example_of(schema) == value


def test_example_of_stops_at_a_bounded_depth():
    schema: dict = {"type": "object", "properties": {}}
    schema["properties"]["again"] = schema
    value = example_of(schema)
    depth = 0
    while isinstance(value, dict) and value.get("again") is not None:
        value, depth = value["again"], depth + 1
    assert depth <= 9


def test_a_queued_test_run_executes_with_the_mocks_kept_on_it(version):
    """A worker has only the run: what its mocked nodes answer must come from the run."""
    from graphs.execution.runs import run_create, run_execute

    mocks = mock_answers(
        version, {"page": {"html": ""}, "links": {"urls": [1, 2]}}, mock_all=False, caller=TESTER
    )
    request = RunRequest(
        name="fetch_twice",
        arguments={"url": "http://example.test"},
        version=(version.pk, version.digest),
        is_test=True,
        mocks=mocks,
    )
    run = run_create(request)

    outcome = run_execute(run_id=run.pk, arguments=request.arguments)

    assert outcome is not None
    assert outcome.succeeded, outcome.error
    assert outcome.result == {"count": 2}


def test_more_mocks_than_a_test_takes_are_refused(version):
    from graphs.execution.mocks import MAX_MOCKS

    too_many = {f"node{i}": i for i in range(MAX_MOCKS + 1)}
    with pytest.raises(MockRefused, match=f"at most {MAX_MOCKS}"):
        mock_answers(version, too_many, mock_all=False, caller=TESTER)


def test_a_long_test_run_reports_its_first_nodes_and_says_there_were_more(db):
    from graphs.execution.mocks import MAX_NODES_REPORTED
    from tests.graph_files import import_file

    import_file("loops.yaml")
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 100}, is_test=True))
    assert outcome.succeeded, outcome.error

    report = report_of_test_run(outcome.run_id)
    assert len(report["nodes"]) == MAX_NODES_REPORTED
    assert report["nodes_truncated"] is True
