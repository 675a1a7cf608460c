"""The workflow admin: the YAML editor with errors in place, the drawing, test runs, versions."""

from __future__ import annotations

import html
import re

import pytest
import yaml
from django.urls import reverse

from graphs.admin.forms import editor_text
from graphs.engine import dump_yaml, load_yaml
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Run, Workflow
from graphs.pages.display import duration

pytestmark = pytest.mark.usefixtures("loops")


def change_url(workflow: Workflow) -> str:
    return reverse("admin:graphs_workflow_change", args=[workflow.pk])


def form_data(workflow: Workflow, graph: str) -> dict:
    return {
        "name": workflow.name,
        "group": workflow.group_id,
        "enabled": "on",
        "graph": graph,
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
    }


def test_the_editor_shows_the_graph_as_yaml_and_draws_it(admin_client):
    workflow = Workflow.objects.get(name="classify")
    page = admin_client.get(change_url(workflow)).content.decode()
    assert "inputSchema:" in page
    assert "- id: size" in page
    assert page.count('class="node ') == 6
    assert 'data-node-id="medium"' in page
    assert "Test run" in page


def shown_graph(admin_client, workflow: Workflow) -> str:
    """The editor's text as a browser submits it: unescaped, with CRLF line breaks."""
    page = admin_client.get(change_url(workflow)).content.decode()
    text = re.search(r'<textarea name="graph"[^>]*>\n?(.*?)</textarea>', page, re.S).group(1)
    return html.unescape(text).replace("\n", "\r\n")


def test_multi_line_strings_show_as_block_scalars_and_save_back_unchanged(admin_client):
    workflow = Workflow.objects.get(name="sum_to")
    before = (workflow.nodes, workflow.input_schema, workflow.output_schema, workflow.limits)
    expr = next(n for n in workflow.nodes if n["id"] == "step")["transform"]["expr"]
    assert "\n" in expr

    graph = shown_graph(admin_client, workflow)
    # The expression as its author wrote it, one line of YAML for each line of it.
    assert "expr: |\r\n" in graph
    for line in expr.splitlines():
        assert f"{line}\r\n" in graph
    assert "\\n" not in graph

    response = admin_client.post(change_url(workflow), form_data(workflow, graph))
    assert response.status_code == 302
    workflow.refresh_from_db()
    assert (workflow.nodes, workflow.input_schema, workflow.output_schema, workflow.limits) == (
        before
    )
    assert workflow.versions.count() == 1


@pytest.mark.parametrize(
    "text",
    [
        "one\ntwo\n",
        "no final break\nhere",
        "two final breaks\n\n",
        "\n  starts with a break and spaces",
        "trailing spaces \non a line",
        "a tab\tand\na line",
        "windows\r\nbreaks",
        "other breaks\u2028\x85end",
        "a: b\n- c # d\n'e' \"f\"",
    ],
)
def test_any_multi_line_string_loads_back_equal(text):
    document = {"nodes": [{"id": "t", "transform": {"expr": text}}], "description": text}
    shown = dump_yaml(document)
    assert yaml.safe_load(shown) == document
    assert load_yaml(shown) == document


def test_an_invalid_graph_is_refused_with_the_node_and_field_named(admin_client):
    workflow = Workflow.objects.get(name="classify")
    graph = editor_text(workflow).replace("target: medium", "target: mediun")
    response = admin_client.post(change_url(workflow), form_data(workflow, graph))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["graph"]
    assert any("node 'size'" in error and "mediun" in error for error in errors)
    assert workflow.versions.count() == 1


def test_a_valid_edit_saves_a_new_version_by_its_author(admin_client, admin_user):
    workflow = Workflow.objects.get(name="classify")
    graph = editor_text(workflow).replace("'\"small\"'", "'\"tiny\"'")
    response = admin_client.post(change_url(workflow), form_data(workflow, graph))
    assert response.status_code == 302
    workflow.refresh_from_db()
    assert workflow.current_version.number == 2
    assert workflow.current_version.author == admin_user
    assert '"tiny"' in yaml.safe_dump(workflow.nodes)


def test_an_unknown_provider_name_is_refused(admin_client):
    workflow = Workflow.objects.get(name="classify")
    graph = editor_text(workflow).replace("servers: {}", "servers:\n  files: nowhere")
    response = admin_client.post(change_url(workflow), form_data(workflow, graph))
    errors = response.context["adminform"].form.errors["graph"]
    assert any("no provider named files → nowhere" in error for error in errors)


def test_a_test_run_records_the_run_and_shows_its_path(admin_client):
    workflow = Workflow.objects.get(name="classify")
    url = reverse("admin:graphs_workflow_test_run", args=[workflow.pk])
    response = admin_client.post(url, {"arguments": '{"value": 50}'})
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:graphs_run_change", args=[run.pk])
    assert run.caller == "admin test run by admin"
    page = admin_client.get(response["Location"]).content.decode()
    assert 'class="node visited" data-node-id="medium"' in page
    assert 'class="node " data-node-id="small"' in page
    assert "&quot;medium&quot;" in page


def test_a_test_run_with_bad_arguments_says_what_is_wrong(admin_client):
    workflow = Workflow.objects.get(name="classify")
    url = reverse("admin:graphs_workflow_test_run", args=[workflow.pk])
    response = admin_client.post(url, {"arguments": '{"value": "big"}'})
    assert response.status_code == 200
    assert "value: &#x27;big&#x27; is not of type &#x27;number&#x27;" in response.content.decode()
    assert not Run.objects.exists()


def test_payloads_in_run_pages_are_escaped(admin_client):
    outcome = workflow_call(
        RunRequest(name="is_zero", arguments={"value": "<script>alert(1)</script>"})
    )
    page = admin_client.get(reverse("admin:graphs_run_change", args=[outcome.run_id]))
    assert "<script>alert(1)</script>" not in page.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.content.decode()


def test_run_pages_show_durations_in_human_units(admin_client):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 3}))
    run = Run.objects.get(pk=outcome.run_id)
    took = [run.duration_ms, *run.node_executions.values_list("duration_ms", flat=True)]
    for url in (
        reverse("admin:graphs_run_change", args=[run.pk]),
        reverse("admin:graphs_run_changelist"),
    ):
        page = admin_client.get(url).content.decode()
        assert duration(run.duration_ms) in page
        for raw in took:
            # As a number of its own: a time to the microsecond (12:00:10.194512) may hold
            # the same digits by chance.
            for written in (str(raw), f"{raw:.3f}"):
                assert not re.search(rf"(?<![\d.]){re.escape(written)}(?!\d)", page), written


def test_the_run_page_shows_an_expression_as_its_author_wrote_it(admin_client):
    outcome = workflow_call(RunRequest(name="sum_to", arguments={"n": 1}))
    page = admin_client.get(reverse("admin:graphs_run_change", args=[outcome.run_id]))
    assert "expr: |\n  $executionCount(&quot;step&quot;) = 0\n" in page.content.decode()


def test_the_versions_of_a_workflow_are_listed_on_its_page(admin_client):
    workflow = Workflow.objects.get(name="classify")
    page = admin_client.get(change_url(workflow)).content.decode()
    assert "Imported from YAML" in page


def test_someone_who_is_not_staff_is_sent_to_log_in(client, outsider):
    client.force_login(outsider)
    workflow = Workflow.objects.get(name="classify")
    for url in (
        change_url(workflow),
        reverse("admin:graphs_workflow_test_run", args=[workflow.pk]),
        reverse("admin:graphs_run_changelist"),
    ):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
