"""Runs written straight into the history, and checks of the REST answers about them, for
the tests of the runs routes (test_rest_runs.py, test_rest_run_detail.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jsonschema
from django.test import Client

from graphs.models import NodeExecution, Run, Workflow

RUNS = "/api/v1/runs"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def add_run(workflow: str = "classify", *, at: datetime = T0, executions: int = 0, **fields):
    """A run written directly, with `executions` node executions whose outputs are
    {"step": index}."""
    row = Workflow.objects.get(name=workflow)
    fields.setdefault("status", Run.Status.SUCCEEDED)
    fields.setdefault("node_count", executions)
    run = Run.objects.create(
        workflow=row,
        version=row.current_version,
        workflow_name=workflow,
        created_at=at,
        started_at=at,
        **fields,
    )
    NodeExecution.objects.bulk_create(
        NodeExecution(
            run=run,
            index=index,
            node_id=f"node_{index}",
            node_type="transform",
            status="succeeded",
            output={"step": index},
            started_at=at + timedelta(milliseconds=index),
            duration_ms=2.5,
        )
        for index in range(executions)
    )
    return run


def assert_documented(response, path: str) -> None:
    """The body matches the schema the OpenAPI document gives for the route and status
    (schemathesis checks the routes against it too, but with no runs stored)."""
    openapi = client_schema()
    documented = openapi["paths"][path]["get"]["responses"][str(response.status_code)]
    schema = documented["content"]["application/json"]["schema"]
    jsonschema.Draft202012Validator({**schema, "components": openapi["components"]}).validate(
        response.json()
    )


def client_schema() -> dict:
    return Client().get("/api/v1/openapi.json").json()


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [run["id"] for run in response.json()["runs"]]


def refusal(response, status: int) -> str:
    assert response.status_code == status, response.content
    return response.json()["error"]
