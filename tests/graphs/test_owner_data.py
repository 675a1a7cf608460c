"""Data stays with its owner (issue 24, item 7): test_workflow's `from_run` takes only the
caller's runs (graphs/execution/mocks.py), get_workflow shows no credentials of URLs or stdio args
(graphs/authoring/files.py), run errors quote no credentials and the history holds no secret
argument wherever it was copied (graphs/execution/payloads.py, graphs/execution/recorder.py,
graphs/execution/runs.py)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from graphs.authoring.drafts import draft_update, version_document, workflow_view
from graphs.authoring.files import GraphFileError, graph_import
from graphs.execution.mocks import MockRefused, mock_answers
from graphs.execution.payloads import MASK, run_secrets, secret_paths
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import NodeExecution, Run, Workflow
from mcp_endpoint.access.keys import api_key_create, with_same_owner_actors
from nodespecs.callers import Caller
from nodespecs.models import Provider
from tests.graph_files import OPERATOR

pytestmark = pytest.mark.timeout(60)

BUILDER_SCOPES = frozenset({"tools:read", "tools:execute", "workflows:write"})

# One mcp node on a server nothing listens on: mocks answer for it.
FETCH = """
version: "1.0"
server: {name: ownerData, version: "1.0.0"}
mcpServers:
  far: {type: streamableHttp, url: "http://127.0.0.1:9/mcp"}
tools:
  - name: fetch_private
    description: Fetches a page.
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: page}
      - {id: page, type: mcp, server: far, tool: fetch, args: {}, next: exit}
      - {id: exit, type: exit}
"""


def _key_caller(actor: str, scopes=BUILDER_SCOPES, owner=None) -> Caller:
    return Caller(
        actor=actor,
        scopes=frozenset(scopes),
        key_owner_id=owner.pk if owner is not None else None,
        key_owner_name=owner.get_username() if owner is not None else "",
    )


@pytest.fixture
def version(db):
    graph_import(text=FETCH, caller=OPERATOR)
    return Workflow.objects.get(name="fetch_private").current_version


def _private_run(version, actor: str) -> int:
    """A test run by `actor` whose node `page` answered something private."""
    mocks = {"page": {"content": [{"type": "text", "text": f"private data of {actor}"}]}}
    answers = mock_answers(version, mocks, mock_all=False, caller=_key_caller(actor))
    request = RunRequest(
        name="fetch_private",
        arguments={},
        caller=actor,
        version=(version.pk, version.digest),
        is_test=True,
        mocks=answers,
    )
    outcome = workflow_call(request)
    assert outcome.succeeded, outcome.error
    return outcome.run_id


def _answered(answers) -> str:
    """What the mocked node answers: the stored output, as JSON text."""
    return json.loads(answers["page"]["content"][0]["text"])


def _refusal(version, run_id, caller) -> str:
    with pytest.raises(MockRefused) as refused:
        mock_answers(version, {"page": {"from_run": run_id}}, mock_all=False, caller=caller)
    return str(refused.value)


def test_from_run_refuses_another_keys_run_as_if_it_did_not_exist(version):
    theirs = _private_run(version, "key:alice001")
    me = _key_caller("key:mallory1")

    mine = _private_run(version, "key:mallory1")

    refused = _refusal(version, theirs, me)
    missing = _refusal(version, theirs + 1000, me)
    answers = mock_answers(version, {"page": {"from_run": mine}}, mock_all=False, caller=me)

    assert _answered(answers) == "private data of key:mallory1"  # its own run it may take

    assert "private data" not in refused
    # Word for word the answer for a run that does not exist: nothing tells them apart.
    assert refused.replace(str(theirs), "N") == missing.replace(str(theirs + 1000), "N")
    assert "this API key or another key of the same user" in refused
    assert "runs:read" in refused


def test_from_run_takes_a_run_of_another_key_of_the_same_user_only(version):
    users = get_user_model().objects
    alice, bob = users.create(username="alice"), users.create(username="bob")
    first, _ = api_key_create(name="alice's first", scopes=list(BUILDER_SCOPES), owner=alice)
    second, _ = api_key_create(name="alice's second", scopes=list(BUILDER_SCOPES), owner=alice)
    bobs, _ = api_key_create(name="bob's", scopes=list(BUILDER_SCOPES), owner=bob)
    unowned, _ = api_key_create(name="nobody's", scopes=list(BUILDER_SCOPES))
    run = _private_run(version, f"key:{first.prefix}")

    alice_again = with_same_owner_actors(_key_caller(f"key:{second.prefix}", owner=alice))
    answers = mock_answers(version, {"page": {"from_run": run}}, mock_all=False, caller=alice_again)
    assert _answered(answers) == f"private data of key:{first.prefix}"

    for other in (
        with_same_owner_actors(_key_caller(f"key:{bobs.prefix}", owner=bob)),
        with_same_owner_actors(_key_caller(f"key:{unowned.prefix}")),
    ):
        assert "private data" not in _refusal(version, run, other)


def test_from_run_takes_any_run_with_runs_read_and_only_with_it(version):
    theirs = _private_run(version, "key:alice001")
    reader = _key_caller("key:auditor", scopes={*BUILDER_SCOPES, "runs:read"})

    answers = mock_answers(version, {"page": {"from_run": theirs}}, mock_all=False, caller=reader)

    assert _answered(answers) == "private data of key:alice001"
    assert "private data" not in _refusal(version, theirs, _key_caller("key:auditor"))


def test_a_caller_without_a_name_owns_no_run(version):
    nameless = _private_run(version, "")

    assert "private data" not in _refusal(version, nameless, _key_caller(""))


def test_from_run_refuses_an_output_with_a_secret_masked_inside_a_string(version):
    mine = _private_run(version, "key:alice001")
    NodeExecution.objects.filter(run_id=mine, node_id="page").update(
        output={"text": f"token is {MASK}"}
    )

    refused = _refusal(version, mine, _key_caller("key:alice001"))

    assert "stored masked" in refused


# An operator's servers: a stdio server given a DSN with its password, and an HTTP server
# with user info and an API key in its URL (nothing listens at either).
CREDENTIALS = """
version: "1.0"
server: {name: withCredentials, version: "1.0.0"}
mcpServers:
  pg:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-postgres",
           "postgresql://app:PG-PASSWORD-77@db.internal/app", "--token", "TOKEN-VALUE-88"]
  remote:
    type: streamableHttp
    url: "http://svc:HTTP-PASS-99@127.0.0.1:9/mcp?api_key=API-KEY-66&region=eu"
    headers: {Authorization: "Bearer HEADER-TOKEN-55"}
tools:
  - name: both_servers
    description: Calls both.
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: query}
      - {id: query, type: mcp, server: pg, tool: query, args: {sql: "select 1"}, next: call}
      - {id: call, type: mcp, server: remote, tool: call, args: {}, next: exit}
      - {id: exit, type: exit}
"""
# The HTTP server alone, called for real: nothing listens at 127.0.0.1:9.
REMOTE_ONLY = """
version: "1.0"
server: {name: remoteOnly, version: "1.0.0"}
mcpServers:
  remote:
    type: streamableHttp
    url: "http://svc:HTTP-PASS-99@127.0.0.1:9/mcp?api_key=API-KEY-66&region=eu"
    headers: {Authorization: "Bearer HEADER-TOKEN-55"}
tools:
  - name: remote_only
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: call}
      - {id: call, type: mcp, server: remote, tool: call, args: {}, next: exit}
      - {id: exit, type: exit}
"""
SECRETS = ("PG-PASSWORD-77", "TOKEN-VALUE-88", "HTTP-PASS-99", "API-KEY-66", "HEADER-TOKEN-55")


@pytest.fixture
def credentials(db):
    graph_import(text=CREDENTIALS, caller=OPERATOR)


def test_get_workflow_shows_where_servers_are_but_none_of_their_credentials(credentials):
    view = workflow_view(name="both_servers")

    text = json.dumps(view)
    for secret in SECRETS:
        assert secret not in text
    servers = view["definition"]["mcpServers"]
    assert servers["pg"]["args"] == [
        "-y",
        "@modelcontextprotocol/server-postgres",
        "postgresql://app:<secret>@db.internal/app",
        "--token",
        "<secret>",
    ]
    assert (
        servers["remote"]["url"] == "http://svc:<secret>@127.0.0.1:9/mcp?api_key=<secret>&region=eu"
    )


def test_a_definition_sent_back_as_shown_keeps_its_providers(credentials):
    before = dict(Provider.objects.values_list("name", "pk"))
    view = workflow_view(name="both_servers")
    assert "PG-PASSWORD-77" not in json.dumps(view)
    agent = _key_caller("key:builder", scopes={*BUILDER_SCOPES, "workflows:admin"})

    definition = view["definition"]
    definition["tools"][0]["description"] = "Calls both, again."
    saved = draft_update(name="both_servers", caller=agent, definition=definition)

    draft = Workflow.objects.get(name="both_servers").versions.get(number=saved.version)
    assert draft.servers == {"pg": before["pg"], "remote": before["remote"]}
    assert dict(Provider.objects.values_list("name", "pk")) == before
    assert not Provider.objects.filter(url__contains="<secret>").exists()
    assert "PG-PASSWORD-77" in Provider.objects.get(name="pg").args[2]


# A second workflow naming the same server under a name of its own: it is bound to the
# existing provider (identical settings), whose name is not the workflow's server name.
SAME_SERVER_OTHER_NAME = """
version: "1.0"
server: {name: otherName, version: "1.0.0"}
mcpServers:
  mine:
    type: streamableHttp
    url: "http://svc:HTTP-PASS-99@127.0.0.1:9/mcp?api_key=API-KEY-66&region=eu"
    headers: {Authorization: "Bearer HEADER-TOKEN-55"}
tools:
  - name: other_name
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: call}
      - {id: call, type: mcp, server: mine, tool: call, args: {}, next: exit}
      - {id: exit, type: exit}
"""


def test_a_masked_entry_sent_back_under_the_workflows_own_name_keeps_its_provider(credentials):
    graph_import(text=SAME_SERVER_OTHER_NAME, caller=OPERATOR)
    remote = Provider.objects.get(name="remote")
    workflow = Workflow.objects.get(name="other_name")
    assert workflow.servers == {"mine": remote.pk}
    count = Provider.objects.count()

    document = version_document(workflow.current_version)
    assert "API-KEY-66" not in json.dumps(document)
    graph_import(text=document, caller=OPERATOR, publish=False)

    assert Provider.objects.count() == count
    assert not Provider.objects.filter(url__contains="<secret>").exists()
    assert workflow.versions.order_by("-number").first().servers == {"mine": remote.pk}


def test_a_masked_entry_that_matches_no_server_the_workflow_used_is_refused(credentials):
    graph_import(text=SAME_SERVER_OTHER_NAME, caller=OPERATOR)
    workflow = Workflow.objects.get(name="other_name")
    document = version_document(workflow.current_version)
    document["mcpServers"]["mine"]["url"] = "http://svc:<secret>@127.0.0.1:9/other"
    count = Provider.objects.count()

    with pytest.raises(GraphFileError, match=r"server 'mine': its settings hold <secret>"):
        graph_import(text=document, caller=OPERATOR, publish=False)

    assert Provider.objects.count() == count


def test_a_run_error_names_the_server_without_its_credentials(credentials):
    graph_import(text=REMOTE_ONLY, caller=OPERATOR)

    outcome = workflow_call(RunRequest(name="remote_only", arguments={}, caller="key:x"))

    assert outcome.status == "failed"
    run = Run.objects.get(pk=outcome.run_id)
    node = NodeExecution.objects.get(run=run, node_id="call")
    assert "127.0.0.1:9" in node.error  # still says which server
    for text in (outcome.error, run.error, node.error):
        for secret in SECRETS:
            assert secret not in text


def test_a_broker_error_quoting_its_url_is_stored_without_the_brokers_password(
    credentials, monkeypatch
):
    from graphs.execution import control

    def unreachable(run_id, arguments):
        raise ConnectionError("cannot connect to amqp://guest:BROKER-PASS-12@mq.internal:5672//")

    monkeypatch.setattr(control, "run_send", unreachable)

    run_id = control.run_enqueue(RunRequest(name="both_servers", arguments={}, caller="key:x"))

    error = Run.objects.get(pk=run_id).error
    assert "could not be queued" in error
    assert "mq.internal:5672" in error
    assert "BROKER-PASS-12" not in error


# A workflow copying its secret arguments under other keys, whole and inside longer strings.
COPIES = """
version: "1.0"
server: {name: copiesSecrets, version: "1.0.0"}
tools:
  - name: copy_secrets
    inputSchema:
      type: object
      properties:
        user: {type: string}
        pw: {type: string, format: password}
        vault:
          type: object
          properties:
            pin: {type: string, writeOnly: true}
        keys: {type: array, items: {$ref: "#/$defs/secretKey"}}
        short: {type: string, format: password}
      $defs:
        secretKey: {type: string, writeOnly: true}
    nodes:
      - {id: entry, type: entry, next: copy}
      - id: copy
        type: transform
        transform:
          expr: >-
            {"copied": $.entry.pw, "note": "the password is " & $.entry.pw,
             "pin": $.entry.vault.pin, "key": $.entry.keys[1], "short": $.entry.short,
             "user": $.entry.user}
        next: exit
      - {id: exit, type: exit}
"""
ARGUMENTS = {
    "user": "alice",
    "pw": "hunter2-PASSWORD",
    "vault": {"pin": "PIN-4242"},
    "keys": ["KEY-ONE-1", "KEY-TWO-2"],
    "short": "abc",
}


def test_secret_arguments_reach_the_nodes_but_the_history_holds_none_of_their_copies(db):
    graph_import(text=COPIES, caller=OPERATOR)

    outcome = workflow_call(RunRequest(name="copy_secrets", arguments=ARGUMENTS, caller="key:x"))

    assert outcome.succeeded, outcome.error
    assert outcome.result["copied"] == "hunter2-PASSWORD"  # the real value reached the node
    assert outcome.result["note"] == "the password is hunter2-PASSWORD"
    run = Run.objects.get(pk=outcome.run_id)
    stored = json.dumps(
        [
            run.arguments,
            run.result,
            list(NodeExecution.objects.filter(run=run).values("detail", "output", "error")),
        ]
    )
    for secret in ("hunter2-PASSWORD", "PIN-4242", "KEY-ONE-1", "KEY-TWO-2"):
        assert secret not in stored
    assert run.arguments["pw"] == MASK
    assert run.arguments["vault"] == {"pin": MASK}
    assert run.result["note"] == f"the password is {MASK}"
    assert run.result["user"] == "alice"
    # Shorter than 4 characters: not searched for (it would blank ordinary words out).
    assert run.result["short"] == "abc"


def test_a_node_error_quoting_a_secret_argument_is_stored_masked(db):
    graph_import(
        text=COPIES.replace(
            '"note": "the password is " & $.entry.pw', '"e": $error("bad " & $.entry.pw)'
        ),
        caller=OPERATOR,
    )

    outcome = workflow_call(RunRequest(name="copy_secrets", arguments=ARGUMENTS, caller="key:x"))

    assert outcome.status == "failed"
    node = NodeExecution.objects.get(run_id=outcome.run_id, node_id="copy")
    assert "bad " in node.error
    for text in (outcome.error, Run.objects.get(pk=outcome.run_id).error, node.error):
        assert "hunter2-PASSWORD" not in text


def test_the_secret_paths_of_a_schema_follow_properties_items_and_local_refs():
    schema = {
        "type": "object",
        "properties": {
            "pw": {"type": "string", "format": "password"},
            "plain": {"type": "string"},
            "nested": {"properties": {"deep": {"anyOf": [{"writeOnly": True}]}}},
            "many": {"items": {"$ref": "#/$defs/secret"}},
            "map": {"additionalProperties": {"writeOnly": True}},
            "loop": {"$ref": "#"},
        },
        "$defs": {"secret": {"type": "string", "writeOnly": True}},
    }

    paths = secret_paths(schema)

    assert ("pw",) in paths
    assert ("nested", "deep") in paths
    assert ("many", None) in paths
    assert ("map", None) in paths
    assert ("plain",) not in paths
    secrets = run_secrets(paths, {"pw": "p-1234", "map": {"a": "m-5678"}, "plain": "visible"})
    assert set(secrets) == {"p-1234", "m-5678"}
    # Most runs have none: nothing is searched for in their history.
    plain = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert run_secrets(secret_paths(plain), {"q": "visible"}) == ()


def test_an_argument_under_a_secret_name_is_masked_where_it_is_copied_too():
    secrets = run_secrets(
        secret_paths({"type": "object"}), {"api_key": "sk-live-123456", "q": "hello"}
    )

    assert secrets == ("sk-live-123456",)
