"""The operator commands: import_graph, export_graph and run_workflow."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from graphs.models import Run
from tests.graph_files import FILES


def run_command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_import_graph_reports_what_it_created_then_that_nothing_changed(db):
    first = run_command("import_graph", str(FILES / "loops.yaml"))
    assert "created: sum_to, classify, is_zero" in first
    assert "loops: 3 created, 0 updated, 0 unchanged." in first
    assert "3 unchanged" in run_command("import_graph", str(FILES / "loops.yaml"))


def test_import_graph_refuses_a_bad_file_saying_nothing_changed(db, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("tools: [")
    with pytest.raises(CommandError, match="was not imported \\(nothing changed\\)"):
        call_command("import_graph", str(bad))


def test_run_workflow_prints_the_result_and_the_run_id(loops):
    out = run_command("run_workflow", "sum_to", "--args", '{"n": 4}')
    run = Run.objects.get()
    assert json.loads(out.rsplit("run ", 1)[0]) == {"sum": 10, "steps": 4}
    assert out.strip().endswith(f"run {run.pk} succeeded")
    assert run.caller == "manage.py"


def test_run_workflow_fails_with_the_reason(loops):
    with pytest.raises(CommandError, match="failed at node more: maxNodeExecutions"):
        call_command("run_workflow", "sum_to", "--args", '{"n": 100000}')
    with pytest.raises(CommandError, match="--args is not JSON"):
        call_command("run_workflow", "sum_to", "--args", "{n: 1}")


def test_export_graph_lists_and_prints_groups(loops):
    assert "loops/classify" in run_command("export_graph", "--list")
    assert "name: loops" in run_command("export_graph", "loops")
