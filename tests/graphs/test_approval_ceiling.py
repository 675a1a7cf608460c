"""The server's ceiling on how long an approval node waits (GRAPHS_MAX_APPROVAL_TIMEOUT_MS,
graphs/execution/limits.py): validate_workflow, an import and a save each refuse a timeoutMs
above it, naming the setting."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from graphs.authoring.files import GraphFileError, graph_import
from graphs.authoring.services import workflow_save
from graphs.authoring.validation import validate_workflow
from graphs.execution.limits import approval_timeout_ceiling
from graphs.models import Workflow
from nodespecs.callers import Caller
from tests.graph_files import OPERATOR

pytestmark = [pytest.mark.timeout(30), pytest.mark.django_db]

API = Caller(actor="api-key:abc123")

WAITS = """
version: "1.0"
server: {name: waits, version: "1.0.0"}
tools:
  - name: wait_for_ok
    description: Asks a reviewer, and gives up after a while.
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: ask}
      - id: ask
        type: approval
        message: '"OK?"'
        timeoutMs: TIMEOUT
        routes: {approved: exit, rejected: exit, timeout: exit}
      - {id: exit, type: exit}
"""

MESSAGE = (
    "tool 'wait_for_ok', node 'ask', field 'timeoutMs': timeoutMs is 7200000, above this "
    "server's ceiling of 3600000 for how long an approval may wait (setting "
    "GRAPHS_MAX_APPROVAL_TIMEOUT_MS): set timeoutMs to 3600000 or less"
)


def waits(timeout: int) -> str:
    return WAITS.replace("TIMEOUT", str(timeout))


def test_the_default_ceiling_is_thirty_days():
    assert approval_timeout_ceiling() == 30 * 24 * 3600 * 1000


@override_settings(GRAPHS_MAX_APPROVAL_TIMEOUT_MS=3_600_000)
def test_validation_refuses_a_longer_wait_and_offers_the_ceiling():
    report = validate_workflow(waits(7_200_000), caller=API)

    assert not report.valid
    [problem] = report.problems
    assert problem.code == "timeout_above_ceiling"
    assert problem.message.startswith(MESSAGE)
    assert problem.fix == [
        {"op": "replace", "path": "/tools/0/nodes/1/timeoutMs", "value": 3_600_000}
    ]
    assert validate_workflow(waits(3_600_000), caller=API).valid


@override_settings(GRAPHS_MAX_APPROVAL_TIMEOUT_MS=3_600_000)
def test_an_import_above_the_ceiling_is_refused_and_changes_nothing():
    with pytest.raises(GraphFileError) as refused:
        graph_import(text=waits(7_200_000), caller=OPERATOR)

    assert MESSAGE in str(refused.value)
    assert not Workflow.objects.exists()


def test_a_save_above_a_lowered_ceiling_is_refused(settings):
    graph_import(text=waits(7_200_000), caller=OPERATOR)
    settings.GRAPHS_MAX_APPROVAL_TIMEOUT_MS = 3_600_000
    workflow = Workflow.objects.get(name="wait_for_ok")
    workflow.description = "changed"

    with pytest.raises(ValidationError) as refused:
        workflow_save(workflow=workflow)

    assert MESSAGE in refused.value.message_dict["nodes"][0]
