"""A reviewer goes through a run in a real browser (issue 28, items 1, 2 and 6): from the run
page to a step's context, where an expression is evaluated; a re-run from a node with its input
edited, landing on the new run's page; and a breakpoint session, from the admin's test run
paused before a node to Step and Continue, the run ending succeeded."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from graphs.execution.resuming.going_on import resumed_runs_wait
from graphs.models import Run, RunPause, Workflow
from tests.browser.conftest import PASSWORD
from tests.step_runs import tidy_import, tidy_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture(autouse=True)
def tidy(settings):
    tidy_import()
    # Runs sent on go on in a thread of the live server; no heartbeat writes meanwhile (the
    # in-memory SQLite test database takes one writer at a time).
    settings.GRAPHS_HEARTBEAT_SECONDS = 120


@pytest.fixture(autouse=True)
def runs_standing_still(page):
    """A re-run, a continue or a step sends a run on in a thread of the live server: its
    answer (a redirect to a run's page) reaches the browser once that run stands still again.
    The in-memory SQLite test database refuses a read beside a write ("table is locked"),
    which a file database waits out. (A route sees a redirect's first request only.)"""

    def hold(route):
        if route.request.method != "POST":
            route.continue_()
            return
        answer = route.fetch(max_redirects=0)
        resumed_runs_wait(15)
        route.fulfill(response=answer)

    page.route(re.compile(r"/(rerun|breakpoint)/$"), hold)


@pytest.fixture
def reviewer(page, live_server, django_user_model):
    """A staff user, signed in from the runs list."""
    django_user_model.objects.create_user("rita", password=PASSWORD, is_staff=True)
    page.goto(f"{live_server.url}/runs/")
    expect(page).to_have_url(re.compile(r"/admin/login/\?next=/runs/"))
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{live_server.url}/runs/")
    return page


def test_a_steps_context_is_read_and_an_expression_evaluated_there(
    reviewer, live_server, screenshot
):
    page = reviewer
    run = tidy_run({"words": ["pear", "fig", "plum"], "token": "s3cret-token-value"})
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator("#step-3 .context-link").click()

    expect(page).to_have_url(f"{live_server.url}/runs/{run.pk}/steps/3/")
    expect(page.locator("h1")).to_contain_text(f"Step 3 of run #{run.pk}: size")
    expect(page.locator("#step-status")).to_have_text("succeeded")
    # Each node's output as `$` held it; the secret's are marked as not what they produced.
    expect(page.locator("#step-context details")).to_have_count(3)
    expect(page.locator("#ctx-upper summary .flag")).to_have_text(
        "masked or cut: not what the node produced"
    )
    expect(page.locator("#ctx-count summary .flag")).to_have_count(0)
    expect(page.locator("#ctx-count pre")).to_contain_text('"first": "PEAR"')
    page.locator("#ctx-upper summary").click()
    expect(page.locator("#ctx-upper pre")).to_contain_text('"token": "********"')
    expect(page.locator("#ctx-counts")).to_contain_text("count")

    page.fill("#expression", '$.count.first & " and " & $string($.count.n - 1) & " more"')
    page.click("#evaluate")
    expect(page.locator("#evaluate-value")).to_have_text('"PEAR and 2 more"')
    page.fill("#expression", "$.count.n +")
    page.click("#evaluate")
    expect(page.locator("#evaluate-error")).to_have_text(
        "The expression does not parse: Unexpected end of expression (at character 11)."
    )
    page.fill("#expression", '$.count.first & " and " & $string($.count.n - 1) & " more"')
    page.click("#evaluate")
    expect(page.locator("#evaluate-value")).to_have_text('"PEAR and 2 more"')
    screenshot("run-step-context")


def test_a_rerun_with_an_edited_input_lands_on_the_new_runs_page(reviewer, live_server, screenshot):
    page = reviewer
    run = tidy_run()
    page.goto(f"{live_server.url}/runs/{run.pk}/steps/2/")
    box = page.locator("#rerun-input")
    # The step's input as the history shows it: what `upper` gave `count`.
    expect(box).to_have_value(re.compile(r'"words": \[\s*"PEAR",\s*"FIG",\s*"PLUM"\s*\]'))
    page.check("#use-input")
    box.fill('{"words": ["APPLE", "KIWI"')
    page.click("#rerun")
    expect(page.locator("#rerun-error")).to_contain_text(
        "The input is not valid JSON: Expecting ',' delimiter at line 1, column 27."
    )
    assert Run.objects.count() == 1
    expect(page.locator("#use-input")).to_be_checked()
    box.fill('{"words": ["APPLE", "KIWI"]}')
    page.click("#rerun")

    # The new run's page, once the run stands still (`runs_standing_still`).
    expect(page).to_have_url(re.compile(rf"/runs/(?!{run.pk}/)[0-9]+/$"))
    new = Run.objects.exclude(pk=run.pk).get()
    expect(page).to_have_url(f"{live_server.url}/runs/{new.pk}/")
    expect(page.locator(".messages")).to_contain_text(
        f"Run {new.pk} re-runs run {run.pk} from node 'count'"
    )
    expect(page.locator("#run-rerun-of")).to_have_text(
        f"Re-run of run #{run.pk} from node count (iteration 1, version original, input "
        "edited); steps 0 to 1 replayed from it"
    )
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=15_000)
    expect(page.locator("#run-result")).to_contain_text('"size": "few"')
    expect(page.locator("#step-2 .context-link")).to_be_visible()
    screenshot("run-rerun")
    page.locator("#run-rerun-of a").click()
    expect(page.locator("#run-reruns")).to_have_text(f"Re-runs: #{new.pk}")
    assert Run.objects.get(pk=new.pk).result == {"size": "few", "n": 2, "first": "APPLE"}


def test_a_breakpoint_session_steps_then_continues_to_the_end(signed_in, live_server, screenshot):
    page = signed_in
    workflow = Workflow.objects.get(name="tidy")
    page.goto(live_server.url + reverse("admin:graphs_workflow_test_run", args=[workflow.pk]))
    page.fill("#id_arguments", '{"words": ["pear", "fig", "plum"]}')
    page.fill("#id_breakpoints", "count")
    page.click("input[type=submit]")

    run = Run.objects.get()
    expect(page).to_have_url(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator("#run-status")).to_have_text("Paused at a breakpoint")
    paused = page.locator("#run-paused")
    expect(paused.locator("h2")).to_have_text("Paused before node count (step 2)")
    expect(paused).to_contain_text("It expires at")
    expect(page.locator(".messages")).to_contain_text(f"Run {run.pk} paused before node 'count'")
    # A paused run's page stays as it is: nothing happens until someone acts.
    expect(page.locator("[data-refresh-seconds]")).to_have_count(0)
    screenshot("run-breakpoint")

    paused.locator("#paused-context").click()
    expect(page.locator("#step-status")).to_have_text("paused")
    expect(page.locator("#ctx-upper pre")).to_contain_text('"PEAR"')
    page.locator("#step-run-link").click()

    page.click("#breakpoint-step")
    expect(page.locator(".messages")).to_contain_text(f"Run {run.pk} stepped")
    # `count` ran; the run paused again before the next node.
    expect(page.locator("#run-paused h2")).to_have_text(
        "Paused before node size (step 3)", timeout=15_000
    )
    expect(page.locator("#step-2")).to_contain_text("count")

    page.click("#breakpoint-continue")
    expect(page.locator(".messages")).to_contain_text(f"Run {run.pk} continued")
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=15_000)
    expect(page.locator("#run-paused")).to_have_count(0)
    expect(page.locator("#run-result")).to_contain_text('"size": "many"')
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert list(RunPause.objects.filter(run=run).values_list("ending", flat=True)) == [
        "stepped",
        "continued",
    ]
