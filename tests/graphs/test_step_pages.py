"""A run's step page and what a reviewer does from it or from the run page
(graphs/pages/steps.py): the context at a step and an expression evaluated there, a re-run
from the step's node with its input edited or not, and Continue, Step and Stop for a run paused
at a breakpoint; the admin's test run with breakpoints. Staff only, every form CSRF-checked,
every mistake said on the page with nothing created or changed."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from graphs.models import Run, RunPause, Workflow
from tests.step_runs import settled, tidy_import, tidy_run

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

SECRET = "s3cret-token-value"


@pytest.fixture(autouse=True)
def tidy(transactional_db):
    tidy_import()


@pytest.fixture
def reviewer(client, django_user_model):
    """A client signed in as a staff user (not a superuser)."""
    user = django_user_model.objects.create_user("rita", password="x", is_staff=True)
    client.force_login(user)
    return client


def step_url(run_id: int, index: int) -> str:
    return reverse("graphs:run_step", args=[run_id, index])


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_each_row_of_the_run_page_links_to_its_steps_context(reviewer):
    run = tidy_run()
    page = reviewer.get(reverse("graphs:run_detail", args=[run.pk])).content.decode()
    links = re.findall(r'<a class="context-link" href="([^"]+)">Context</a>', page)
    assert links == [step_url(run.pk, index) for index in range(6)]


def test_the_step_page_shows_the_step_and_its_context(reviewer):
    run = tidy_run()
    response = reviewer.get(step_url(run.pk, 3))
    assert response.status_code == 200
    page = text(response)
    assert f"Step 3 of run #{run.pk}" in page
    assert '<code id="step-node">size</code>' in page
    assert '<span class="badge succeeded" id="step-status">succeeded</span>' in page
    for node in ("entry", "upper", "count"):
        assert f'id="ctx-{node}"' in page
    assert 'id="ctx-many"' not in page
    assert '"PEAR",' in page
    assert "masked or cut" not in page
    previous = re.search(r'<pre id="ctx-previous">(.*?)</pre>', page, re.S)
    assert previous
    assert '"n": 3' in previous.group(1)
    assert re.search(r"<code>count</code></td><td class=\"num\">1</td>", page)
    # The re-run form holds the step's input as the history shows it: `count`'s output.
    box = re.search(r'<textarea id="rerun-input" name="input"[^>]*>(.*?)</textarea>', page, re.S)
    assert box
    assert box.group(1).strip() == '{\n  "n": 3,\n  "first": "PEAR"\n}'
    assert 'name="use_input"' in page
    assert "checked" not in page.split('id="use-input"')[1][:5]
    assert f'href="{step_url(run.pk, 2)}"' in page
    assert f'href="{step_url(run.pk, 4)}"' in page


def test_a_masked_output_is_marked_as_not_what_the_node_produced(reviewer):
    run = tidy_run({"words": ["kiwi"], "token": SECRET})
    page = text(reviewer.get(step_url(run.pk, 2)))
    assert page.count("masked or cut: not what the node produced") == 2
    assert SECRET not in page


def test_an_unknown_step_is_a_404(reviewer):
    run = tidy_run()
    assert reviewer.get(step_url(run.pk, 6)).status_code == 404
    assert reviewer.get(step_url(999999, 0)).status_code == 404


def test_evaluate_shows_the_value_or_the_error_with_its_position(reviewer):
    run = tidy_run()
    answer = reviewer.post(step_url(run.pk, 3), {"expression": "$.count.n * 7"})
    assert answer.status_code == 200
    value = re.search(r'<pre id="evaluate-value">(.*?)</pre>', text(answer), re.S)
    assert value
    assert value.group(1) == "21"
    assert "$.count.n * 7</textarea>" in text(answer)
    wrong = reviewer.post(step_url(run.pk, 3), {"expression": "$.count.n +"})
    assert wrong.status_code == 400
    assert "The expression does not parse: Unexpected end of expression (at character 11)." in text(
        wrong
    )
    too_long = reviewer.post(step_url(run.pk, 3), {"expression": "1" * 10_001})
    assert "a node's expression holds at most 10,000" in text(too_long)


def test_a_rerun_from_the_step_page_lands_on_the_new_runs_page(reviewer):
    run = tidy_run()
    answer = reviewer.post(
        reverse("graphs:run_rerun", args=[run.pk, 2]),
        {"version": "original", "use_input": "on", "input": '{"words": ["Q", "R"]}'},
    )
    assert answer.status_code == 302, text(answer)
    new = settled(int(answer["Location"].split("/")[-2]))
    assert answer["Location"] == reverse("graphs:run_detail", args=[new.pk])
    assert new.rerun_of_id == run.pk
    assert new.result == {"size": "few", "n": 2, "first": "Q"}
    assert new.caller == "rita"
    page = text(reviewer.get(answer["Location"]))
    assert f"Run {new.pk} re-runs run {run.pk} from node 'count'" in page
    rerun_of = re.search(r'<dd id="run-rerun-of">(.*?)</dd>', page, re.S)
    assert rerun_of is not None
    assert re.sub(r"<[^>]+>", "", rerun_of.group(1)) == (
        f"Re-run of run #{run.pk} from node count (iteration 1, version original, input "
        "edited); steps 0 to 1 replayed from it"
    )
    original = text(reviewer.get(reverse("graphs:run_detail", args=[run.pk])))
    reruns = re.search(r'<dd class="rerun-links" id="run-reruns">(.*?)</dd>', original, re.S)
    assert reruns
    assert re.sub(r"<[^>]+>", "", reruns.group(1)) == f"Re-runs: #{new.pk}"


def test_an_input_left_unticked_is_the_nodes_own_whatever_the_box_holds(reviewer):
    run = tidy_run()
    answer = reviewer.post(
        reverse("graphs:run_rerun", args=[run.pk, 3]), {"version": "current", "input": "{oops"}
    )
    assert answer.status_code == 302
    new = settled(int(answer["Location"].split("/")[-2]))
    assert new.result == run.result
    assert new.rerun_from == {
        "node": "size",
        "iteration": 1,
        "index": 3,
        "version": "current",
        "input_edited": False,
    }


def test_bad_json_or_a_refused_rerun_is_said_on_the_form_and_creates_nothing(reviewer):
    run = tidy_run()
    url = reverse("graphs:run_rerun", args=[run.pk, 0])
    bad = reviewer.post(url, {"version": "original", "use_input": "on", "input": '{"words": [}'})
    assert bad.status_code == 400
    page = text(bad)
    assert "The input is not valid JSON: Expecting value at line 1, column 12." in page
    # What was typed is kept, and the box stays ticked.
    assert '{"words": [}</textarea>' in page
    assert 'id="use-input" checked' in page
    refused = reviewer.post(url, {"use_input": "on", "input": '{"words": "pear"}'})
    assert refused.status_code == 400
    assert "'pear' is not of type 'array'" in text(refused)
    assert Run.objects.count() == 1


def test_a_paused_run_shows_where_it_stands_and_steps_then_continues(reviewer):
    run = tidy_run(caller="admin test run by rita", breakpoints=("count",))
    page_url = reverse("graphs:run_detail", args=[run.pk])
    page = text(reviewer.get(page_url))
    assert "Paused before node <code>count</code> (step 2)" in page
    assert f'href="{step_url(run.pk, 2)}" id="paused-context"' in page
    assert "expires at" in page
    # Nothing happens until someone acts: the page does not reload itself meanwhile.
    assert "data-refresh-seconds" not in page
    assert 'id="cancel-run"' not in page
    step_page = text(reviewer.get(step_url(run.pk, 2)))
    assert 'id="step-status">paused</span>' in step_page
    assert "This node has not run yet" in step_page
    assert 'id="breakpoint-step"' in step_page

    breakpoint_url = reverse("graphs:run_breakpoint", args=[run.pk])
    stepped = reviewer.post(breakpoint_url, {"action": "step"})
    assert stepped.status_code == 302
    assert stepped["Location"] == page_url
    run = settled(run.pk)
    assert run.status == Run.Status.PAUSED
    assert "Paused before node <code>size</code> (step 3)" in text(reviewer.get(page_url))
    reviewer.post(breakpoint_url, {"action": "continue"})
    run = settled(run.pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert list(RunPause.objects.filter(run=run).values_list("ending", "ended_by")) == [
        ("stepped", "rita"),
        ("continued", "rita"),
    ]
    late = reviewer.post(breakpoint_url, {"action": "stop"}, follow=True)
    assert "is not paused at a breakpoint (it is succeeded)" in text(late)
    assert 'id="run-paused"' not in text(late)


def test_stop_ends_the_paused_run_and_says_so(reviewer):
    run = tidy_run(breakpoints=("upper",))
    answer = reviewer.post(
        reverse("graphs:run_breakpoint", args=[run.pk]), {"action": "stop"}, follow=True
    )
    assert f"Run {run.pk} stopped: it ended cancelled." in text(answer)
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
    unknown = reviewer.post(reverse("graphs:run_breakpoint", args=[999999]), {"action": "stop"})
    assert unknown.status_code == 404


def test_every_form_needs_its_csrf_token(django_user_model):
    run = tidy_run(breakpoints=("count",))
    ended = tidy_run()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(django_user_model.objects.create_user("sam", password="x", is_staff=True))
    # The re-run last: it starts a run on a thread, whose writes the in-memory SQLite test
    # database would otherwise meet with the next post's ("database table is locked").
    posts = [
        (step_url(ended.pk, 3), {"expression": "1"}),
        (reverse("graphs:run_breakpoint", args=[run.pk]), {"action": "stop"}),
        (reverse("graphs:run_rerun", args=[ended.pk, 3]), {"version": "original"}),
    ]
    for url, body in posts:
        assert strict.post(url, body).status_code == 403, url
    assert Run.objects.count() == 2
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED
    # With the token the page gave, each goes through.
    page = strict.get(step_url(ended.pk, 3)).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    for url, body in posts:
        assert strict.post(url, {**body, "csrfmiddlewaretoken": token}).status_code in (200, 302)
    settled(ended.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
    assert Run.objects.filter(rerun_of=ended).count() == 1


def test_only_staff_may_see_or_act(client, outsider):
    run = tidy_run(breakpoints=("count",))
    urls = [
        ("get", step_url(run.pk, 1), {}),
        ("post", step_url(run.pk, 1), {"expression": "1"}),
        ("post", reverse("graphs:run_rerun", args=[run.pk, 1]), {}),
        ("post", reverse("graphs:run_breakpoint", args=[run.pk]), {"action": "stop"}),
    ]
    for method, url, body in urls:
        anonymous = getattr(client, method)(url, body)
        assert anonymous.status_code == 302, url
        assert "/admin/login/" in anonymous["Location"], url
    client.force_login(outsider)
    for method, url, body in urls:
        assert getattr(client, method)(url, body).status_code == 403, url
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED


def test_the_admins_test_run_takes_breakpoints_checked_against_the_nodes(admin_client):
    workflow = Workflow.objects.get(name="tidy")
    url = reverse("admin:graphs_workflow_test_run", args=[workflow.pk])
    arguments = '{"words": ["pear"]}'
    wrong = admin_client.post(url, {"arguments": arguments, "breakpoints": "count, counter"})
    assert wrong.status_code == 200
    assert (
        "The current version has no node 'counter': its nodes are entry, upper, count, size, "
        "many, few, exit." in text(wrong)
    )
    assert not Run.objects.exists()
    answer = admin_client.post(url, {"arguments": arguments, "breakpoints": " count , count,"})
    run = Run.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == reverse("graphs:run_detail", args=[run.pk])
    assert (run.status, run.breakpoints) == (Run.Status.PAUSED, ["count"])
    page = text(admin_client.get(answer["Location"]))
    assert f"Run {run.pk} paused before node 'count': continue, step or stop it here." in page
    assert "Paused before node <code>count</code> (step 2)" in page
    # Without breakpoints the test run is shown in the admin, as before.
    admin_client.post(url, {"arguments": arguments})
    assert Run.objects.count() == 2
