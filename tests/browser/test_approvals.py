"""A reviewer decides a waiting run in a real browser (issue 27, must show (a)): signs in,
opens the Approvals page, fills the node's form and a comment, clicks Approve; the run goes
on and its page shows it succeeded, with the decision, who took it and the comment."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db.models import F
from playwright.sync_api import expect

from graphs.authoring.files import graph_import
from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Approval, Run
from tests.browser.conftest import PASSWORD
from tests.graph_files import OPERATOR, import_file

pytestmark = pytest.mark.django_db(transaction=True)

# A refund asked with a fuller form than tests/graphs/files/approvals.yaml's: a choice, a
# whole number with bounds, a checkbox and a long text, each drawn from the schema.
GRAPH = """
version: "1.0"
server: {name: "payouts", version: "1.0.0"}
tools:
  - name: payout
    description: Pay a supplier invoice once finance approves it
    inputSchema:
      type: object
      properties:
        supplier: {type: string}
        amount: {type: number}
      required: [supplier, amount]
    nodes:
      - id: entry
        type: entry
        next: approve
      - id: approve
        type: approval
        message: '"Pay " & $string($.entry.amount) & " EUR to " & $.entry.supplier & "?"'
        form:
          type: object
          properties:
            account:
              type: string
              title: Pay from
              enum: [operating, reserve]
              enumNames: [Operating account, Reserve account]
            instalments: {type: integer, title: Instalments, minimum: 1, maximum: 12, default: 1}
            notify: {type: boolean, title: Tell the supplier}
            reason:
              {type: string, title: Reason, description: kept with the payment, maxLength: 500}
          required: [account]
        timeoutMs: 86400000
        routes:
          approved: paid
          rejected: held
          timeout: held
      - id: paid
        type: transform
        transform:
          expr: '{"paid": $.entry.amount, "from": $.approve.form.account, "by": $.approve.by.name}'
        next: done
      - id: held
        type: transform
        transform:
          expr: '{"paid": 0, "decision": $.approve.decision}'
        next: done
      - id: done
        type: exit
"""


def waiting(name: str, arguments: dict, *, waited: timedelta = timedelta()) -> int:
    outcome = workflow_call(RunRequest(name=name, arguments=arguments, caller="key:shop"))
    assert outcome.status == Run.Status.WAITING, outcome
    if waited:
        # As if it had started `waited` ago: the run and its wait, its timeout as far ahead.
        Run.objects.filter(pk=outcome.run_id).update(
            created_at=F("created_at") - waited, started_at=F("started_at") - waited
        )
        Approval.objects.filter(run_id=outcome.run_id).update(
            created_at=F("created_at") - waited, timeout_at=F("timeout_at") - waited
        )
    return outcome.run_id


@pytest.fixture
def waiting_runs() -> dict[str, int]:
    graph_import(text=GRAPH, caller=OPERATOR)
    # Refunds wait up to 8 hours here, so one waiting for 3 has time left.
    import_file("approvals.yaml", **{"timeoutMs: 60000": "timeoutMs: 28800000"})
    return {
        "refund": waiting("refund", {"amount": 25, "customer": "ann"}, waited=timedelta(hours=3)),
        "payout": waiting(
            "payout", {"supplier": "Acme Tools", "amount": 1200}, waited=timedelta(minutes=42)
        ),
        "later": waiting("refund", {"amount": 9.5, "customer": "bo"}),
    }


@pytest.fixture
def reviewer(page, live_server, django_user_model):
    """A staff user holding graphs.decide_approval, signed in from the Approvals page."""
    user = django_user_model.objects.create_user(
        "rita", password=PASSWORD, is_staff=True, first_name="Rita"
    )
    user.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    page.goto(f"{live_server.url}/approvals/")
    expect(page).to_have_url(re.compile(r"/admin/login/\?next=/approvals/"))
    page.fill("#id_username", "rita")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{live_server.url}/approvals/")
    return page


def test_a_reviewer_approves_a_run_on_the_approvals_page(
    waiting_runs, reviewer, live_server, screenshot, settings
):
    # The decided run goes on in a thread of the live server; no heartbeat writes meanwhile
    # (the in-memory SQLite test database takes one writer at a time).
    settings.GRAPHS_HEARTBEAT_SECONDS = 120
    page = reviewer
    run_id = waiting_runs["payout"]
    sections = page.locator("section.approval")
    # Oldest wait first.
    expect(sections).to_have_count(3)
    assert [int(each.split("-")[1]) for each in sections.evaluate_all("s => s.map(e => e.id)")] == [
        waiting_runs["refund"],
        waiting_runs["payout"],
        waiting_runs["later"],
    ]
    expect(page.locator("#nav-approvals .count")).to_have_text("3")

    card = page.locator(f"#approval-{run_id}")
    expect(card.locator(".ask")).to_have_text("Pay 1200 EUR to Acme Tools?")
    expect(card.locator(".waited")).to_contain_text("42 min")
    expect(card.locator(".times-out")).to_have_text(re.compile(r"23 h 1[78] min"))
    # The form from the node's schema: a select, bounds as attributes, a checkbox.
    account = card.locator("select[name=field-account]")
    expect(account).to_have_attribute("required", "")
    expect(card.locator("input[name=field-instalments]")).to_have_attribute("max", "12")
    expect(card.locator("input[name=field-instalments]")).to_have_value("1")
    account.select_option("reserve")
    card.locator("input[name=field-instalments]").fill("3")
    card.locator("input[name=field-notify]").check()
    card.locator("textarea[name=field-reason]").fill("Invoice 2026-118, checked against the PO.")
    card.locator("textarea[name=comment]").fill("Approved; split as agreed with Acme.")
    screenshot("history-approvals")

    card.locator("button.approve").click()

    expect(page).to_have_url(f"{live_server.url}/approvals/")
    expect(page.locator(".messages")).to_have_text(
        f"Run {run_id} approved by rita (user): it goes on along its approved route."
    )
    expect(page.locator("section.approval")).to_have_count(2)
    expect(page.locator("#nav-approvals .count")).to_have_text("2")

    page.goto(f"{live_server.url}/runs/{run_id}/")
    # Still running for a moment, the page reloads itself until the run ends.
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=15_000)
    wait = page.locator("#run-waits tbody tr")
    expect(wait).to_have_count(1)
    expect(wait.locator(".decision")).to_have_text("Approved")
    expect(wait.locator(".decided-by")).to_have_text("rita (user)")
    expect(wait.locator(".comment")).to_have_text("Approved; split as agreed with Acme.")
    expect(wait.locator(".form-values")).to_contain_text("instalments")
    expect(wait.locator(".form-values")).to_contain_text("reserve")
    expect(page.locator("#run-decision")).to_have_count(0)
    expect(page.locator("#run-result")).to_contain_text('"from": "reserve"')
    screenshot("history-run-approved")

    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.result == {"paid": 1200, "from": "reserve", "by": "rita"}
    approval = Approval.objects.get(run_id=run_id)
    assert approval.form_values == {
        "account": "reserve",
        "instalments": 3,
        "notify": True,
        "reason": "Invoice 2026-118, checked against the PO.",
    }


def test_a_reviewer_rejects_from_the_run_page_and_a_bad_value_is_named(
    waiting_runs, reviewer, live_server, settings, screenshot
):
    settings.GRAPHS_HEARTBEAT_SECONDS = 120
    page = reviewer
    run_id = waiting_runs["refund"]
    page.click(f"#approval-{run_id} h2 a")
    expect(page.locator("#run-status")).to_have_text("Waiting for approval")
    expect(page.locator("li.step.status-waiting .took")).to_have_text("waiting for a decision")
    decision = page.locator("#run-decision")
    expect(decision.locator("button.reject")).to_be_visible()
    screenshot("history-run-waiting")
    # Past the browser's own check (maxlength), the server names the field.
    decision.locator("textarea[name=field-reason]").evaluate(
        "e => { e.removeAttribute('maxlength'); e.value = 'x'.repeat(501); }"
    )
    decision.locator("button.reject").click()
    expect(page.locator(".messages li.error")).to_contain_text("field 'reason'")
    expect(page.locator("#run-status")).to_have_text("Waiting for approval")

    decision.locator("textarea[name=comment]").fill("Customer already refunded by hand.")
    decision.locator("button.reject").click()

    expect(page.locator(".messages")).to_contain_text(f"Run {run_id} rejected by rita (user)")
    expect(page.locator("#run-status")).to_have_text("Succeeded", timeout=15_000)
    expect(page.locator("#run-waits .decision")).to_have_text("Rejected")
    expect(page.locator("#run-result")).to_contain_text('"decision": "rejected"')
