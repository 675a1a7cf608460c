"""Examples (issue 28, item 5; graphs/authoring/examples.py, example_checks.py): a run that
succeeded, kept with what its mcp nodes answered and its approvals decided, against which a
new version runs in process, its servers never called.

The runs here really call the echo peer (tests/peers/echo_server.py) over stdio; the checks
then run with its provider disabled, so a check that called it would fail."""

from __future__ import annotations

import json

import pytest
from django.test import TestCase

from graphs.authoring.example_checks import examples_check
from graphs.authoring.examples import (
    MAX_EXAMPLES_PER_WORKFLOW,
    ExampleRefused,
    example_create,
    example_delete,
)
from graphs.authoring.files import graph_import
from graphs.execution.mocks import mock_answers
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import ExampleCheck, Run, Workflow, WorkflowExample, WorkflowVersion
from nodespecs.callers import Caller
from nodespecs.models import AuditEvent, Provider
from tests.graph_files import OPERATOR
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.peers import echo_server_command

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db]

REVIEWER = Caller(actor="reviewer")

# add_thrice: the echo peer's `add` called three times in a loop (a + step each time), then
# the total. {done} is the final transform's expression, {times} the loop's count, {extra} more
# nodes between the loop and `done`.
GRAPH = """
version: "1.0"
server: {{name: exampleTests, version: "1.0.0"}}
mcpServers:
  echo: {server}
tools:
  - name: add_thrice
    description: Adds step to start three times with the echo peer.
    inputSchema:
      type: object
      properties: {{start: {{type: number}}, step: {{type: number}}}}
      required: [start, step]
    nodes:
      - {{id: entry, type: entry, next: add}}
      - id: add
        type: mcp
        server: echo
        tool: add
        args:
          a: {{expr: '$executionCount("add") = 0 ? $.entry.start : $.add.sum'}}
          b: "$.entry.step"
        next: more
      - id: more
        type: switch
        conditions:
          - rule: {{"<": [{{var: '$executionCount("add")'}}, {times}]}}
            target: add
          - target: {after_loop}
{extra}
      - id: done
        type: transform
        transform: {{expr: '{done}'}}
        next: exit
      - {{id: exit, type: exit}}
"""
DONE = '{"total": $.add.sum, "calls": $executionCount("add")}'
ECHO_NODE = """
      - id: shout
        type: mcp
        server: echo
        tool: echo
        args: {value: "loud"}
        next: done
"""
SECRET_NODE = """
      - id: secret
        type: mcp
        server: echo
        tool: echo
        args: {value: {password: "hunter22"}}
        next: done
"""


def graph(*, done: str = DONE, times: int = 3, extra: str = "", after: str = "done") -> str:
    command, *args = echo_server_command()
    server = json.dumps({"command": command, "args": args})
    return GRAPH.format(server=server, done=done, times=times, extra=extra, after_loop=after)


@pytest.fixture
def add_thrice(servers):  # noqa: F811
    """add_thrice imported and published; its workflow."""
    graph_import(text=graph(), caller=OPERATOR)
    return Workflow.objects.get(name="add_thrice")


def called(name: str = "add_thrice", **arguments) -> Run:
    outcome = workflow_call(
        RunRequest(name=name, arguments=arguments or {"start": 1, "step": 2}, caller="key:ab12")
    )
    return Run.objects.get(pk=outcome.run_id)


def draft(**changes) -> WorkflowVersion:
    """A new draft of add_thrice, changed as `graph` is told."""
    report = graph_import(text=graph(**changes), caller=OPERATOR, publish=False)
    assert report.drafts, report
    return Workflow.objects.get(name="add_thrice").versions.order_by("-number").first()


def no_server():
    """The echo provider disabled, as a save disables it (every process is told once it is
    committed): a check that called it would fail."""
    provider = Provider.objects.get(name="echo")
    provider.enabled = False
    with TestCase.captureOnCommitCallbacks(execute=True):
        provider.save()


def test_a_run_becomes_an_example_with_its_loop_outputs_in_order(add_thrice):
    run = called()
    assert run.status == "succeeded", run.error

    example = example_create(run.pk, REVIEWER, note="three adds")

    assert example.arguments == {"start": 1, "step": 2}
    assert example.calls == {"add": [{"sum": 3}, {"sum": 5}, {"sum": 7}]}
    assert example.decisions == {}
    assert example.result == {"total": 7, "calls": 3}
    assert (example.note, example.created_by, example.run_id) == ("three adds", "reviewer", run.pk)
    # Replayed on its own version before it was kept: that check is stored, passed.
    assert ExampleCheck.objects.get(example=example, version=run.version).passed is True
    assert AuditEvent.objects.filter(
        action="created", object_type="graphs.workflowexample", object_id=str(example.pk)
    ).exists()


def test_the_same_version_passes_without_calling_its_server(add_thrice):
    example = example_create(called().pk, REVIEWER)
    no_server()

    report = examples_check(add_thrice.current_version)

    assert [(o.example_id, o.passed, o.error) for o in report.outcomes] == [(example.pk, True, "")]
    # The workflow really cannot call its server now.
    assert called().status == "failed"


def test_a_changed_result_fails_with_its_differences(add_thrice):
    example = example_create(called().pk, REVIEWER)
    no_server()
    changed = draft(done='{"total": $.add.sum + 1, "calls": $executionCount("add")}')

    report = examples_check(changed)

    [outcome] = report.outcomes
    assert outcome.passed is False
    assert outcome.differences.items == [{"path": "/total", "a": 7, "b": 8}]
    check = ExampleCheck.objects.get(example=example, version=changed)
    assert (check.passed, check.differences["items"][0]["path"]) == (False, "/total")
    assert f"example {example.pk}" in report.refusal()
    assert "result at /total: example 7.0, now 8" in report.refusal()


def test_a_call_beyond_the_recorded_ones_fails_naming_the_node(add_thrice):
    example_create(called().pk, REVIEWER)
    no_server()

    [outcome] = examples_check(draft(times=4)).outcomes

    assert outcome.passed is False
    assert "node 'add' ran a 4th time; the example recorded only 3 output(s)" in outcome.error


def test_an_mcp_node_the_example_did_not_record_fails_naming_it(add_thrice):
    example_create(called().pk, REVIEWER)
    no_server()

    [outcome] = examples_check(draft(extra=ECHO_NODE, after="shout")).outcomes

    assert outcome.passed is False
    assert "node 'shout': the example recorded no output of it" in outcome.error
    assert "never call a server" in outcome.error


def test_arguments_the_new_version_refuses_fail_the_example(add_thrice):
    example_create(called().pk, REVIEWER)
    stricter = draft(done=DONE)
    stricter.definition["inputSchema"]["properties"]["step"] = {"type": "string"}
    stricter.save(update_fields=["definition"])

    [outcome] = examples_check(stricter).outcomes

    assert "Invalid arguments for add_thrice: step: " in outcome.error


def test_a_masked_output_is_refused_naming_its_node(servers):  # noqa: F811
    graph_import(text=graph(extra=SECRET_NODE, after="secret"), caller=OPERATOR)
    run = called()
    assert run.status == "succeeded", run.error

    with pytest.raises(ExampleRefused) as refused:
        example_create(run.pk, REVIEWER)

    assert refused.value.status == 400
    assert "output of mcp node 'secret' was stored masked (a secret) or cut" in (
        refused.value.message
    )
    assert not WorkflowExample.objects.exists()


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [
        ("running", 409, "is still running: keep it as an example once it has succeeded"),
        ("failed", 400, "failed, so it has no result to keep"),
        ("cancelled", 400, "cancelled, so it has no result to keep"),
    ],
)
def test_a_run_without_a_result_is_refused(add_thrice, status, code, message):
    run = called()
    Run.objects.filter(pk=run.pk).update(status=status, result=None)

    with pytest.raises(ExampleRefused) as refused:
        example_create(run.pk, REVIEWER)

    assert (refused.value.status, message in refused.value.message) == (code, True)
    assert not WorkflowExample.objects.exists()


def test_a_test_run_that_failed_is_refused_as_a_test_run(add_thrice):
    run = called()
    Run.objects.filter(pk=run.pk).update(status="failed", result=None, is_test=True)

    with pytest.raises(ExampleRefused, match=r"Test run \d+ failed, so it has no result"):
        example_create(run.pk, REVIEWER)


def test_a_run_is_kept_once_and_a_workflow_keeps_a_bounded_number(add_thrice, monkeypatch):
    first = called()
    example_create(first.pk, REVIEWER)
    with pytest.raises(ExampleRefused, match="already an example") as again:
        example_create(first.pk, REVIEWER)
    assert again.value.status == 409

    monkeypatch.setattr("graphs.authoring.examples.MAX_EXAMPLES_PER_WORKFLOW", 1)
    with pytest.raises(ExampleRefused) as full:
        example_create(called().pk, REVIEWER)
    assert full.value.status == 409
    assert "keeps 1 examples, the most a workflow may (1)" in full.value.message
    assert MAX_EXAMPLES_PER_WORKFLOW == 50


def test_a_key_keeps_only_runs_it_may_read_of_groups_it_may_change(add_thrice):
    run = called()  # started by key:ab12
    stranger = Caller(actor="key:zz99", scopes=frozenset({"workflows:write"}))
    with pytest.raises(ExampleRefused) as unread:
        example_create(run.pk, stranger)
    assert unread.value.status == 404
    assert "No run" in unread.value.message

    starter = Caller(actor="key:ab12", scopes=frozenset({"workflows:write"}))
    with pytest.raises(ExampleRefused) as not_owner:
        example_create(run.pk, starter)
    assert not_owner.value.status == 403
    assert "workflows:admin" in not_owner.value.message

    admin = Caller(actor="key:ad01", scopes=frozenset({"workflows:write", "runs:read"}))
    with pytest.raises(ExampleRefused) as not_admin:
        example_create(run.pk, admin)
    assert not_admin.value.status == 403

    operator = Caller(
        actor="key:op01", scopes=frozenset({"workflows:write", "workflows:admin", "runs:read"})
    )
    assert example_create(run.pk, operator).run_id == run.pk


def test_deleting_an_example_removes_it_and_its_checks(add_thrice):
    run = called()
    example = example_create(run.pk, REVIEWER)

    example_delete(run.pk, REVIEWER)

    assert not WorkflowExample.objects.filter(pk=example.pk).exists()
    assert not ExampleCheck.objects.exists()
    assert AuditEvent.objects.filter(action="deleted", object_type="graphs.workflowexample")
    with pytest.raises(ExampleRefused, match="is not an example") as again:
        example_delete(run.pk, REVIEWER)
    assert again.value.status == 404


APPROVALS = """
version: "1.0"
server: {name: approvalExamples, version: "1.0.0"}
tools:
  - name: gatekeeper
    inputSchema: {type: object, properties: {amount: {type: number}}}
    nodes:
      - {id: entry, type: entry, next: ask}
      - id: ask
        type: approval
        message: '"Pay " & $string($.entry.amount) & "?"'
        routes: {approved: paid, rejected: refused}
      - id: paid
        type: transform
        transform: {expr: '{"paid": $.entry.amount, "by": $.ask.by.name}'}
        next: exit
      - id: refused
        type: transform
        transform: {expr: '{"paid": 0, "why": $.ask.comment}'}
        next: exit
      - {id: exit, type: exit}
"""


def test_decisions_are_replayed_in_order(db):
    graph_import(text=APPROVALS, caller=OPERATOR)
    version = Workflow.objects.get(name="gatekeeper").current_version
    mocks = mock_answers(
        version,
        {"ask": {"decision": "rejected", "comment": "too much"}},
        mock_all=False,
        caller=REVIEWER,
    )
    outcome = workflow_call(
        RunRequest(
            name="gatekeeper", arguments={"amount": 5}, caller="tests", is_test=True, mocks=mocks
        )
    )
    assert outcome.result == {"paid": 0, "why": "too much"}

    example = example_create(outcome.run_id, REVIEWER)

    assert [d["decision"] for d in example.decisions["ask"]] == ["rejected"]
    # Unchanged: the rejection is replayed, so the refused route's result comes back.
    assert [o.passed for o in examples_check(version).outcomes] == [True]
    changed = APPROVALS.replace('"why": $.ask.comment', '"why": "no"')
    graph_import(text=changed, caller=OPERATOR, publish=False)
    draft_version = Workflow.objects.get(name="gatekeeper").versions.order_by("-number").first()
    [failed] = examples_check(draft_version).outcomes
    assert failed.differences.items == [{"path": "/why", "a": "too much", "b": "no"}]


# The run page's buttons and the workflow's admin page.


def test_the_run_page_keeps_and_removes_an_example(add_thrice, admin_client):
    run = called()
    page = admin_client.get(f"/runs/{run.pk}/")
    assert b'id="keep-example"' in page.content
    assert admin_client.get(f"/runs/{run.pk}/example/").status_code == 405

    kept = admin_client.post(f"/runs/{run.pk}/example/", {"note": "right"}, follow=True)

    example = WorkflowExample.objects.get(run=run)
    assert (example.note, example.created_by) == ("right", "admin")
    assert f"Kept as example {example.pk} of add_thrice" in kept.content.decode()
    assert b'id="remove-example"' in kept.content

    removed = admin_client.post(f"/runs/{run.pk}/example/remove/", follow=True)

    assert not WorkflowExample.objects.exists()
    assert f"Example {example.pk} removed" in removed.content.decode()
    assert b'id="keep-example"' in removed.content


def test_the_run_page_says_why_a_run_is_not_kept(add_thrice, admin_client):
    run = called()
    Run.objects.filter(pk=run.pk).update(status="failed", result=None)

    page = admin_client.post(f"/runs/{run.pk}/example/", follow=True)

    assert "Not kept as an example: Run" in page.content.decode()
    assert b'id="keep-example"' not in page.content  # only a run that succeeded offers it


def test_only_staff_keep_examples(add_thrice, client, django_user_model):
    run = called()
    user = django_user_model.objects.create_user("someone", password="pw")
    client.force_login(user)

    assert client.post(f"/runs/{run.pk}/example/").status_code == 403
    assert not WorkflowExample.objects.exists()


def admin_page(workflow: Workflow) -> str:
    return f"/admin/graphs/workflow/{workflow.pk}/change/"


def publish_url(workflow: Workflow, number: int) -> str:
    return f"/admin/graphs/workflow/{workflow.pk}/publish/{number}/"


def test_the_admin_refuses_a_publish_showing_the_differences_then_publishes_anyway(
    add_thrice, admin_client
):
    example = example_create(called().pk, REVIEWER)
    no_server()
    draft(done='{"total": $.add.sum + 1, "calls": $executionCount("add")}')

    refused = admin_client.post(publish_url(add_thrice, 2))

    text = refused.content.decode()
    assert refused.status_code == 200
    assert "Not published: version 2 does not give the results of 1" in text
    assert "/total: example 7.0, now 8" in text
    assert 'id="publish-anyway"' in text
    add_thrice.refresh_from_db()
    assert add_thrice.current_version.number == 1

    forced = admin_client.post(publish_url(add_thrice, 2), {"force": "1"}, follow=True)

    assert f"fails example(s) #{example.pk}" in forced.content.decode()
    add_thrice.refresh_from_db()
    assert add_thrice.current_version.number == 2
    event = AuditEvent.objects.get(action="force-published")
    assert (event.actor, event.fields) == (
        "admin",
        [f"example {example.pk} (run {example.run_id})"],
    )


def test_the_workflow_page_shows_each_versions_examples_in_bounded_queries(
    add_thrice, admin_client, django_assert_max_num_queries
):
    first = example_create(called().pk, REVIEWER)
    second = example_create(called(start=2, step=2).pk, REVIEWER)
    no_server()
    examples_check(draft(done='{"total": 0, "calls": 3}'))

    page = admin_client.get(admin_page(add_thrice)).content.decode()

    assert "examples: 2/2 passed" in page  # version 1, each checked when it was kept
    assert f"examples: 0/2 passed; failed: #{first.pk}, #{second.pk}" in page
    assert f'href="/runs/{first.run_id}/"' in page
    assert f"/admin/graphs/workflow/{add_thrice.pk}/examples/{first.pk}/remove/" in page
    # More versions, checked against every example, cost no more queries.
    with django_assert_max_num_queries(60) as captured:
        admin_client.get(admin_page(add_thrice))
    before = len(captured.captured_queries)
    for changed in ('{"total": 1, "calls": 3}', '{"total": 2, "calls": 3}'):
        examples_check(draft(done=changed))
    with django_assert_max_num_queries(before):
        admin_client.get(admin_page(add_thrice))


def test_the_admin_removes_an_example(add_thrice, admin_client):
    example = example_create(called().pk, REVIEWER)
    url = f"/admin/graphs/workflow/{add_thrice.pk}/examples/{example.pk}/remove/"
    assert "publishing a version no longer checks" in admin_client.get(url).content.decode()

    admin_client.post(url)

    assert not WorkflowExample.objects.exists()
    assert AuditEvent.objects.filter(action="deleted", actor="admin").exists()
