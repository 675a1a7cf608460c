"""Comparing two runs of one workflow (graphs/history/comparison.py) and the compare page: the
same path, paths that part at a switch, runs of different versions, outputs stored masked or
cut marked rather than diffed, the work bounded, and every refusal a clear message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from graphs.execution.control import RunNotFound
from graphs.execution.runs import RunRequest, workflow_call
from graphs.history import comparison
from graphs.history.comparison import RunsNotComparable, runs_compare
from graphs.history.comparison_shapes import Divergence
from graphs.models import NodeExecution, Run, Workflow
from tests.graph_files import import_file

pytestmark = pytest.mark.usefixtures("loops")

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def call(name: str, **arguments) -> int:
    return workflow_call(RunRequest(name=name, arguments=arguments, caller="key:ci")).run_id


def states(found) -> list[tuple[str, int, str]]:
    return [(node.node_id, node.iteration, node.state) for node in found.executions]


@pytest.fixture
def reviewer(client, django_user_model) -> Client:
    user = django_user_model.objects.create_user("rita", password="x", is_staff=True)
    client.force_login(user)
    return client


def compare_url(a: int, b: int) -> str:
    return reverse("graphs:run_compare", args=[a, b])


# ---------------------------------------------------------------------------- comparisons


def test_two_runs_on_the_same_path_differ_only_where_their_values_do():
    a, b = call("classify", value=3), call("classify", value=7)

    found = runs_compare(a, b)

    assert found.divergence is None
    assert found.same_version
    assert found.arguments.state == "different"
    assert found.arguments.differences.items == [{"path": "/value", "a": 3, "b": 7}]
    assert found.result.state == "same"
    assert [(node_id, state) for node_id, _, state in states(found)] == [
        ("entry", "different"),
        ("size", "same"),
        ("small", "same"),
        ("exit", "same"),
    ]
    assert (found.a.id, found.b.id) == (a, b)
    assert found.a.result == found.b.result == "small"
    assert not found.cut
    assert not found.notes


def test_a_switch_taking_another_branch_is_where_the_paths_part():
    a, b = call("classify", value=3), call("classify", value=50)

    found = runs_compare(a, b)

    assert found.divergence == Divergence(2, ("small", 1), ("medium", 1))
    # Each run's own branch is listed as only its own, A's first, before what both ran next.
    assert states(found) == [
        ("entry", 1, "different"),
        ("size", 1, "different"),
        ("small", 1, "only_a"),
        ("medium", 1, "only_b"),
        ("exit", 1, "different"),
    ]
    assert found.result.differences.items == [{"path": "", "a": "small", "b": "medium"}]
    small = found.executions[2]
    assert small.a.index == 2
    assert small.b is None
    assert small.output.reason == f"Run {b} has no such execution."
    as_json = found.as_json()
    assert as_json["same_path"] is False
    assert as_json["divergence"] == {
        "index": 2,
        "a": {"node_id": "small", "iteration": 1},
        "b": {"node_id": "medium", "iteration": 1},
    }


def test_loops_are_matched_by_iteration_and_a_longer_run_parts_where_the_shorter_exits():
    a, b = call("sum_to", n=2), call("sum_to", n=3)

    found = runs_compare(a, b)

    # entry, step, more, step, more | result (A) / step (B, its third pass)
    assert found.divergence == Divergence(5, ("result", 1), ("step", 3))
    assert states(found) == [
        ("entry", 1, "different"),
        ("step", 1, "same"),
        ("more", 1, "same"),
        ("step", 2, "same"),
        ("more", 2, "different"),
        ("step", 3, "only_b"),
        ("more", 3, "only_b"),
        ("result", 1, "different"),
        ("exit", 1, "different"),
    ]
    # A switch's output is the branch it chose.
    assert found.executions[4].output.differences.items == [
        {"path": "", "a": "result", "b": "step"}
    ]


def test_runs_of_different_versions_compare_node_by_node():
    a = call("classify", value=3)
    import_file("loops.yaml", **{"expr: '\"small\"'": "expr: '\"tiny\"'"})
    b = call("classify", value=3)

    found = runs_compare(a, b)

    assert (found.a.version, found.b.version) == (1, 2)
    assert not found.same_version
    assert found.divergence is None
    assert found.arguments.state == "same"
    assert dict(((n, s) for n, _, s in states(found))) == {
        "entry": "same",
        "size": "same",
        "small": "different",
        "exit": "different",
    }
    assert found.executions[2].output.differences.items == [{"path": "", "a": "small", "b": "tiny"}]


def test_runs_of_different_workflows_are_refused_saying_what_to_compare():
    a, b = call("classify", value=3), call("sum_to", n=2)
    with pytest.raises(RunsNotComparable) as refused:
        runs_compare(a, b)
    assert str(refused.value) == (
        f"Run {a} is a run of classify and run {b} of sum_to: only runs of one workflow can be "
        "compared. Pick a run of classify (GET /api/v1/runs?workflow=classify, or the Runs "
        "page filtered by it)."
    )


@pytest.mark.parametrize("missing", ["a", "b"])
def test_a_run_that_does_not_exist_is_refused(missing):
    run = call("classify", value=3)
    a, b = (424242, run) if missing == "a" else (run, 424242)
    with pytest.raises(RunNotFound, match="No run 424242; it may have been deleted"):
        runs_compare(a, b)


def test_masked_arguments_and_outputs_are_marked_not_comparable():
    import_file("loops.yaml", **{"value: {}": "value: {}\n        api_key: {}"})
    a = call("is_zero", value=1, api_key="sk-live-123")
    b = call("is_zero", value=2, api_key="sk-live-456")

    found = runs_compare(a, b)

    assert found.arguments.state == "not_comparable"
    assert found.arguments.differences is None
    assert f"run {a}'s and run {b}'s arguments was stored masked" in found.arguments.reason
    entry, pick, _ = found.executions
    # The entry's output holds the masked key: not diffed as if both held "********".
    assert entry.state == "not_comparable"
    assert pick.state == "different"
    assert pick.output.differences.items == [{"path": "", "a": 1, "b": 2}]


def test_outputs_cut_at_the_size_cap_are_marked_not_comparable(settings):
    settings.GRAPHS_MAX_PAYLOAD_BYTES = 100
    a, b = call("is_zero", value="x" * 500), call("is_zero", value="y" * 500)

    found = runs_compare(a, b)

    assert NodeExecution.objects.get(run_id=a, node_id="pick").truncated
    pick = found.executions[1]
    assert pick.state == "not_comparable"
    assert "stored masked (it held a secret) or cut" in pick.output.reason
    assert found.result.state == "not_comparable"
    assert found.as_json()["executions"][1]["output"] == {
        "state": "not_comparable",
        "differences": None,
        "reason": pick.output.reason,
    }


def add_run(executions: int, *, output=lambda index: {"i": index}) -> Run:
    """A run of classify written directly, with `executions` transform executions."""
    workflow = Workflow.objects.get(name="classify")
    run = Run.objects.create(
        workflow=workflow,
        version=workflow.current_version,
        workflow_name="classify",
        status=Run.Status.SUCCEEDED,
        created_at=T0,
        node_count=executions,
    )
    NodeExecution.objects.bulk_create(
        NodeExecution(
            run=run,
            index=index,
            node_id="step",
            node_type="transform",
            iteration=index + 1,
            status="succeeded",
            output=output(index),
            started_at=T0 + timedelta(milliseconds=index),
        )
        for index in range(executions)
    )
    return run


def test_the_work_is_bounded_and_the_answer_says_where_it_stopped(
    monkeypatch, django_assert_num_queries
):
    monkeypatch.setattr(comparison, "MAX_EXECUTIONS", 30)
    monkeypatch.setattr(comparison, "MAX_TOTAL_DIFFERENCES", 25)
    monkeypatch.setattr(comparison, "_BATCH", 10)
    a = add_run(40)
    b = add_run(35, output=lambda index: {"i": -index, "big": "z" * 2000})

    # Each run and its path, then 3 batches of 10 pairs' outputs, 2 queries each.
    with django_assert_num_queries(4 + 3 * 2):
        found = runs_compare(a.pk, b.pk)

    assert found.cut
    assert len(found.executions) == 30
    assert found.divergence is None  # as far as was read: the 31 first of each are the same
    assert found.notes[0].startswith(f"Run {a.pk} has more than 30 node executions")
    assert found.notes[1].startswith(f"Run {b.pk} has more than 30 node executions")
    assert found.notes[2].startswith("The comparison stopped diffing after 25 differences")
    compared = [node.state for node in found.executions]
    # Index 0 has only the added key; the others two differences each, until 25 are spent.
    assert compared[:13] == ["different"] * 13
    assert set(compared[13:]) == {"not_compared"}
    big = found.executions[0].output.differences.items[-1]
    assert big["path"] == "/big"
    assert big["b"]["_truncated"] is True
    assert len(big["b"]["preview"]) == comparison.VALUE_CHARS
    assert found.as_json()["limits"]["executions"] == 30


# ---------------------------------------------------------------------------- the pages


def test_the_compare_page_shows_both_runs_the_parting_and_each_difference(reviewer):
    a, b = call("classify", value=3), call("classify", value=50)

    response = reviewer.get(compare_url(a, b))

    assert response.status_code == 200
    page = response.content.decode()
    assert f"Run #{a} and run #{b} of classify" in page
    assert "both v1" in page
    assert 'id="divergence">The paths part at execution 2:' in page
    assert "went to <code>small</code>" in page
    assert "went to <code>medium</code>" in page
    assert '<tr class="state-only_a parted" id="node-small-1">' in page
    assert "<code>/value</code></td>\n      <td><pre>3</pre></td>\n      <td><pre>50</pre>" in page
    assert "<pre>&quot;medium&quot;</pre>" in page
    assert f'href="{compare_url(b, a)}" id="swap-sides"' in page
    # Each execution links to its place on its run's page.
    assert f'href="/runs/{b}/?from=0#step-2">#2</a>' in page


def test_the_compare_page_says_why_it_cannot_compare(reviewer):
    a, b = call("classify", value=3), call("sum_to", n=2)

    other = reviewer.get(compare_url(a, b))
    missing = reviewer.get(compare_url(a, 424242))

    assert other.status_code == 409
    assert "only runs of one workflow can be compared" in other.content.decode()
    assert missing.status_code == 404
    assert "No run 424242; it may have been deleted." in missing.content.decode()


def test_the_compare_page_is_for_staff_only(client, outsider):
    a = call("classify", value=3)
    assert client.get(compare_url(a, a)).status_code == 302
    client.force_login(outsider)
    assert client.get(compare_url(a, a)).status_code == 403


def test_the_run_page_box_leads_to_the_compare_page(reviewer):
    a, b = call("classify", value=3), call("classify", value=50)
    page = reviewer.get(reverse("graphs:run_detail", args=[a])).content.decode()
    assert f'action="{reverse("graphs:run_compare_pick", args=[a])}"' in page
    assert 'name="with"' in page

    response = reviewer.get(reverse("graphs:run_compare_pick", args=[a]), {"with": f"#{b}"})

    assert response.status_code == 302
    assert response["Location"] == compare_url(a, b)


@pytest.mark.parametrize("typed", ["", "abc", "0", "-4", "1e9", "9" * 19])
def test_a_bad_number_in_the_box_is_named_on_the_run_page(reviewer, typed):
    a = call("classify", value=3)

    response = reviewer.get(
        reverse("graphs:run_compare_pick", args=[a]), {"with": typed}, follow=True
    )

    assert response.status_code == 200
    assert response.redirect_chain == [(reverse("graphs:run_detail", args=[a]), 302)]
    (message,) = [str(message) for message in response.context["messages"]]
    assert message.startswith("Compare with run #: ")
    assert "is not a run id. Type the number of another run of this workflow" in message
