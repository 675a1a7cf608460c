"""A workflow's outputSchema is its contract with its callers (issue 25, items 5 and 6): a
result that breaks it fails the run, recorded so, naming the JSON path that fails, however
the run was made; a value that is not an object never vanishes into `{"result": value}`
unless the schema declares `result`; and an exit whose value certainly breaks the schema is
refused at import and save, not only warned about by validate_workflow."""

from __future__ import annotations

import copy

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from graphs.authoring.files import GraphFileError, graph_import
from graphs.authoring.services import workflow_save
from graphs.authoring.validation import validate_workflow
from graphs.execution import runs
from graphs.execution.runs import RunRequest, run_create, run_execute, workflow_call
from graphs.models import NodeExecution, Run, Workflow, WorkflowVersion
from tests.graph_files import FILES, OPERATOR, import_file

CONTRACTS = yaml.safe_load((FILES / "contracts.yaml").read_text())


@pytest.fixture
def contracts(db):
    return import_file("contracts.yaml")


def _failed_at_the_exit(run_id: int) -> Run:
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.FAILED
    assert run.error_node_id == "exit"
    exit_node = NodeExecution.objects.get(run=run, node_id="exit")
    assert exit_node.status == "failed"
    assert exit_node.error == run.error
    return run


def test_a_result_that_breaks_the_output_schema_fails_the_run_naming_the_path(contracts):
    outcome = workflow_call(RunRequest(name="counted", arguments={"n": "three"}))

    assert outcome.status == Run.Status.FAILED
    run = _failed_at_the_exit(outcome.run_id)
    assert run.error == (
        "node 'exit': the result does not match the tool's outputSchema at $.count: 'three' is "
        "not of type 'integer'; change what the exit returns (the output of the node before "
        "it), or the outputSchema"
    )
    assert run.result is None
    met = workflow_call(RunRequest(name="counted", arguments={"n": 3}))
    assert (met.status, met.result) == (Run.Status.SUCCEEDED, {"count": 3})


def test_a_queued_run_whose_result_breaks_the_output_schema_fails_on_its_worker(contracts):
    run = run_create(RunRequest(name="counted", arguments={"n": "three"}))

    outcome = run_execute(run_id=run.pk, arguments={"n": "three"})

    assert outcome.status == Run.Status.FAILED
    assert "at $.count: 'three' is not of type 'integer'" in _failed_at_the_exit(run.pk).error


def test_a_version_saved_before_the_refusal_still_runs_its_results_checked(contracts, monkeypatch):
    # A row written as a save before exit values were checked left it: its calls still run
    # (another branch may never return such a value), and each result is checked.
    version = Workflow.objects.get(name="bare_number").current_version
    definition = copy.deepcopy(version.definition)
    definition["nodes"][1]["transform"]["expr"] = "42"
    WorkflowVersion.objects.filter(pk=version.pk).update(definition=definition)
    monkeypatch.setattr(runs, "_prepared", {})  # ids repeat from one test database to the next

    outcome = workflow_call(RunRequest(name="bare_number", arguments={"n": 1}))

    assert "the result is an integer, not an object" in _failed_at_the_exit(outcome.run_id).error


def _returning_a_constant() -> dict:
    document = copy.deepcopy(CONTRACTS)
    bare = next(tool for tool in document["tools"] if tool["name"] == "bare_number")
    bare["nodes"][1]["transform"]["expr"] = "42"
    return document


CONSTANT_REFUSED = (
    "tool 'bare_number', node 'pick': every run that ends here fails: the exit returns this "
    "node's output, an integer, not an object as the tool's outputSchema asks"
)


def test_an_exit_returning_a_constant_the_output_schema_cannot_hold_is_refused_at_import(db):
    with pytest.raises(GraphFileError) as refused:
        graph_import(text=_returning_a_constant(), caller=OPERATOR)

    assert CONSTANT_REFUSED in str(refused.value)
    assert not Workflow.objects.exists()


def test_import_graph_refuses_such_a_file_and_changes_nothing(db, tmp_path):
    path = tmp_path / "constant.yaml"
    path.write_text(yaml.safe_dump(_returning_a_constant()))

    with pytest.raises(CommandError) as refused:
        call_command("import_graph", str(path))

    assert CONSTANT_REFUSED in str(refused.value)
    assert not Workflow.objects.exists()


def test_saving_a_workflow_whose_exit_certainly_breaks_its_schema_is_refused(contracts):
    workflow = Workflow.objects.get(name="bare_number")
    workflow.nodes[1]["transform"]["expr"] = '"none"'

    with pytest.raises(ValidationError) as refused:
        workflow_save(workflow=workflow)

    assert "output, a string, not an object" in str(refused.value.message_dict["nodes"])


def test_validation_calls_a_certain_mismatch_an_error_and_a_likely_one_a_warning(db):
    certain = validate_workflow(_returning_a_constant(), caller=OPERATOR).problems
    likely = validate_workflow(copy.deepcopy(CONTRACTS), caller=OPERATOR).problems

    assert [(p.severity, p.code, p.node) for p in certain] == [
        ("error", "exit_output_mismatch", "pick")
    ]
    # The caller's integer, as the inputSchema says it: runs with it fail, but the schema
    # could be wrong, so it is not refused.
    assert [(p.severity, p.code, p.node) for p in likely] == [
        ("warning", "exit_output_mismatch", "pick")
    ]


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ('{ "total": 1 }', "with total, none of the properties the tool's outputSchema declares"),
        ('{ "count": "many" }', "whose 'count' is a string, but the tool's outputSchema declares"),
        ('"done"', "output, a string, not an object"),
    ],
)
def test_an_object_certainly_lacking_or_mistyping_a_required_property_is_refused(db, expr, says):
    document = copy.deepcopy(CONTRACTS)
    document["tools"][0]["nodes"][1]["transform"]["expr"] = expr

    with pytest.raises(GraphFileError) as refused:
        graph_import(text=document, caller=OPERATOR)

    assert says in str(refused.value)


def test_a_switch_going_to_the_exit_under_an_object_schema_is_refused(db):
    # A switch's output is its target's id: a run taking this branch returns "exit".
    document = copy.deepcopy(CONTRACTS)
    document["tools"][0]["nodes"][0]["next"] = "route"
    document["tools"][0]["nodes"].insert(
        1,
        {
            "id": "route",
            "type": "switch",
            "conditions": [{"rule": {"var": "entry.n"}, "target": "shape"}],
            "default": "exit",
        },
    )

    with pytest.raises(GraphFileError) as refused:
        graph_import(text=document, caller=OPERATOR)

    assert "tool 'counted', node 'route': every run that ends here fails" in str(refused.value)
    assert "output, a string, not an object" in str(refused.value)
