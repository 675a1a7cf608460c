"""The start command leaves workflows to call (issue 25, item 18): `setup_demo` imports a loop
and a switch (JSONata, JSON Logic) and seed 003's count_files beside a folder it creates,
so that each runs as it is; running it again changes nothing."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Workflow, WorkflowVersion
from nodespecs.downstream import client
from tests.peers import npx_offline_env, require_npm_server

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(tmp_path):
    """setup_demo run twice, its folder under `tmp_path`; what it printed."""
    outputs = []
    for _ in range(2):
        call_command("setup_demo", data_dir=tmp_path, stdout=(out := io.StringIO()))
        outputs.append(out.getvalue())
    return tmp_path, outputs


def call(name: str, arguments: dict) -> object:
    outcome = workflow_call(RunRequest(name=name, arguments=arguments, caller="tests"))
    assert outcome.succeeded, outcome.error
    return outcome.result


def test_setup_demo_leaves_a_loop_and_a_switch_that_run_as_they_are(demo):
    _, (first, again) = demo

    assert "demo: 2 created" in first
    assert "fileUtils: 1 created" in first
    assert "demo: 0 created, 0 updated, 2 unchanged" in again
    assert "fileUtils: 0 created, 0 updated, 1 unchanged" in again
    assert WorkflowVersion.objects.count() == 3  # one version each, however often it runs
    served = set(
        Workflow.objects.filter(current_version__isnull=False).values_list("name", flat=True)
    )
    assert served == {"add_up_to", "classify_number", "count_files"}
    assert call("add_up_to", {"n": 10}) == {"sum": 55, "steps": 10}
    assert [call("classify_number", {"value": v})["size"] for v in (5, 50, 500)] == [
        "small",
        "medium",
        "large",
    ]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_count_files_counts_the_folder_setup_demo_made_with_the_real_filesystem_server(
    demo, monkeypatch
):
    require_npm_server("@modelcontextprotocol/server-filesystem")
    for name, value in npx_offline_env().items():  # npx starts the cached copy, offline
        monkeypatch.setenv(name, value)
    folder, (first, _) = demo
    counted = folder / "tests" / "counting"

    assert f"count_files counts the files in {counted}" in first
    try:
        assert call("count_files", {"directory": str(counted)}) == {"count": 3}
    finally:
        client.close_all()
