"""Schemas never fetch: a `$ref` or `$id` that is not local (`#…`) is refused wherever a
workflow is validated or saved (validate_workflow, import_graph, the admin's save), naming
the field; and every schema the service evaluates resolves references only within itself,
so a schema stored before that rule fails to resolve instead of reaching a listener."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from graphs.authoring.services import workflow_save
from graphs.authoring.validation import validate_workflow
from graphs.engine.outputs import OutputCheck
from graphs.engine.schemas import (
    SchemaUnresolvable,
    nonlocal_references,
    schema_errors,
    schema_validator,
)
from graphs.execution import runs
from graphs.execution.runs import RunRequest, WorkflowCallError, workflow_call
from graphs.models import Workflow, WorkflowVersion
from nodespecs.callers import caller_command
from tests.graph_files import FILES
from tests.witnesses import Listener

OPERATOR = caller_command("tests")


@pytest.fixture
def listener() -> Iterator[Listener]:
    with Listener() as listening:
        yield listening


def _remote(url: str) -> dict:
    return {
        "type": "object",
        "properties": {"value": {"$ref": url}},
        "required": ["value"],
    }


def test_the_references_that_would_need_fetching_are_found_with_their_paths():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "a": {"$ref": "http://example.test/a.json"},
            "b": {"$ref": "#/$defs/local"},
            "default": {"items": [{"$dynamicRef": "other.json#meta"}]},
            "$ref": {"type": "string"},  # a property named "$ref", not a reference
            "c": {"const": {"$ref": "http://data.test/not-a-ref"}},
        },
        "$defs": {"local": {"$id": "file:///etc/passwd", "type": "string"}},
        "allOf": [{"$schema": "http://attacker.test/dialect"}],
    }

    found = [(ref.pointer, ref.keyword, ref.value) for ref in nonlocal_references(schema)]

    assert found == [
        ("/properties/a/$ref", "$ref", "http://example.test/a.json"),
        ("/properties/default/items/0/$dynamicRef", "$dynamicRef", "other.json#meta"),
        ("/$defs/local/$id", "$id", "file:///etc/passwd"),
        ("/allOf/0/$schema", "$schema", "http://attacker.test/dialect"),
    ]
    assert nonlocal_references({"$ref": "#/$defs/x", "$defs": {"x": {"$id": "#x"}}}) == []


@pytest.mark.timeout(20)
@pytest.mark.parametrize("scheme", ["http", "file"])
def test_a_schema_with_a_remote_ref_fails_to_resolve_and_fetches_nothing(listener, scheme):
    url = listener.url if scheme == "http" else "file:///etc/passwd"
    validator = schema_validator(_remote(url))

    with pytest.raises(SchemaUnresolvable) as refused:
        list(schema_errors(validator, {"value": 1}))

    assert f"its reference {url!r} is not local and was not fetched" in str(refused.value)
    assert "inline the referred schema under $defs" in str(refused.value)
    assert listener.connections == []


def test_local_references_still_validate():
    schema = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/count"}},
        "$defs": {"count": {"type": "integer", "minimum": 0}},
    }
    validator = schema_validator(schema)

    assert list(schema_errors(validator, {"n": 3})) == []
    [error] = schema_errors(validator, {"n": -1})
    assert error.message == "-1 is less than the minimum of 0"


def _definition(schema: dict, *, output: dict | None = None) -> dict:
    tool = {
        "name": "fetches",
        "description": "Refers to a schema elsewhere.",
        "inputSchema": schema,
        "nodes": [
            {"id": "entry", "type": "entry", "next": "exit"},
            {"id": "exit", "type": "exit"},
        ],
    }
    if output is not None:
        tool["outputSchema"] = output
    return {"version": "1.0", "server": {"name": "refs", "version": "1.0.0"}, "tools": [tool]}


@pytest.mark.django_db
@pytest.mark.parametrize("scheme", ["http", "file"])
def test_validate_workflow_refuses_a_remote_ref_naming_the_field(listener, scheme):
    url = listener.url if scheme == "http" else "file:///etc/passwd"

    report = validate_workflow(_definition(_remote(url)), caller=OPERATOR)

    [problem] = [p for p in report.problems if p.code == "schema_ref_not_local"]
    assert not report.valid
    assert problem.path == "/tools/0/inputSchema/properties/value/$ref"
    assert problem.message.startswith(
        f"tool 'fetches', field 'inputSchema': $ref {url!r} at /properties/value/$ref is not "
        "local; only local references (starting with '#', as '#/$defs/name') are allowed"
    )
    assert listener.connections == []


@pytest.mark.django_db
def test_validate_workflow_refuses_a_remote_id_in_an_output_schema():
    output = {"$id": "https://schemas.test/out.json", "type": "object"}

    report = validate_workflow(_definition({"type": "object"}, output=output), caller=OPERATOR)

    assert [(p.code, p.path) for p in report.problems if p.severity == "error"] == [
        ("schema_ref_not_local", "/tools/0/outputSchema/$id")
    ]


def test_import_graph_refuses_a_file_ref_and_stores_nothing(db, tmp_path, listener):
    graph = tmp_path / "refs.yaml"
    text = (FILES / "loops.yaml").read_text()
    graph.write_text(
        text.replace('          type: "integer"\n', '          $ref: "file:///etc/passwd"\n', 1)
    )

    with pytest.raises(CommandError) as refused:
        call_command("import_graph", str(graph))

    assert (
        "tool 'sum_to', field 'inputSchema': $ref 'file:///etc/passwd' at /properties/n/$ref "
        "is not local"
    ) in str(refused.value)
    assert not WorkflowVersion.objects.exists()


def test_saving_a_workflow_with_a_remote_ref_is_refused(loops, listener):
    workflow = Workflow.objects.get(name="sum_to")
    workflow.input_schema = _remote(listener.url)

    with pytest.raises(ValidationError) as refused:
        workflow_save(workflow=workflow)

    assert "schema_ref_not_local" not in str(refused.value)  # words, not codes
    assert f"$ref {listener.url!r} at /properties/value/$ref is not local" in str(refused.value)
    assert workflow.versions.count() == 1
    assert listener.connections == []


def _store_unchecked(schema: dict, monkeypatch) -> None:
    """Write a schema into sum_to's served version directly, as a row saved before schemas
    were checked would hold it, in a process that has not run that version yet."""
    version = Workflow.objects.get(name="sum_to").current_version
    WorkflowVersion.objects.filter(pk=version.pk).update(
        definition={**version.definition, "inputSchema": schema}
    )
    # Prepared versions are kept by (id, digest), which repeat from one test database to the
    # next: another test may have run this one.
    monkeypatch.setattr(runs, "_prepared", {})


@pytest.mark.timeout(20)
def test_a_stored_schema_with_a_remote_ref_is_not_fetched_when_called(loops, listener, monkeypatch):
    _store_unchecked(_remote(listener.url), monkeypatch)

    with pytest.raises(WorkflowCallError) as refused:
        workflow_call(RunRequest(name="sum_to", arguments={"value": 1}))

    assert "Version 1 of 'sum_to' cannot run" in str(refused.value)
    assert f"$ref {listener.url!r}" in str(refused.value)
    assert listener.connections == []


def test_a_stored_schema_whose_local_ref_points_nowhere_is_a_clear_call_error(loops, monkeypatch):
    schema = {"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}}
    _store_unchecked(schema, monkeypatch)

    with pytest.raises(WorkflowCallError) as refused:
        workflow_call(RunRequest(name="sum_to", arguments={"n": 1}))

    assert str(refused.value) == (
        "The inputSchema of sum_to cannot be checked: its reference '#/$defs/missing' does not "
        "resolve within the schema; point it to a subschema the schema holds, as "
        "'#/$defs/name'. Fix the schema and save the workflow again."
    )


@pytest.mark.timeout(20)
def test_an_output_schema_with_a_remote_ref_fails_the_result_without_fetching(listener):
    check = OutputCheck.of(_remote(listener.url))

    failure = check.failure({"value": 1})

    assert failure is not None
    assert (
        f"the tool's outputSchema cannot be checked: its reference {listener.url!r} is not "
        "local and was not fetched"
    ) in failure
    assert listener.connections == []
