"""The Approvals page and the run page's wait: who may decide, the form drawn from the node's
schema, a decision taken from the page (CSRF-protected) sending the run on, and every refusal
shown as a message on the page, never a 500 (graphs/pages/, docs/history.md)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from graphs.execution.runs import RunRequest, workflow_call
from graphs.models import Approval, Run
from graphs.pages.approval_forms import form_fields, submitted_values
from graphs.pages.display import wait_length
from tests.approval_runs import ended, waiting_run
from tests.graph_files import import_file

pytestmark = pytest.mark.timeout(60)

APPROVALS = reverse("graphs:approvals")
PASSWORD = "correct-horse-battery"


@pytest.fixture
def approvals(transactional_db):
    import_file("approvals.yaml")


def signed_in(django_user_model, name: str, *, decides: bool = True, **flags) -> Client:
    flags.setdefault("is_staff", True)
    user = django_user_model.objects.create_user(name, password=PASSWORD, **flags)
    if decides:
        user.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    client = Client()
    client.force_login(user)
    return client


def decision_url(run_id: int) -> str:
    return reverse("graphs:approval_decide", args=[run_id])


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_page_lists_waiting_runs_oldest_first_with_their_form(approvals, django_user_model):
    first = waiting_run(25, "ann")
    second = waiting_run(40, "bob")
    # The second waited longer: it comes first.
    Approval.objects.filter(run_id=second).update(created_at=timezone.now() - timedelta(minutes=5))
    client = signed_in(django_user_model, "rita")

    response = client.get(APPROVALS)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.index(f'id="approval-{second}"') < html.index(f'id="approval-{first}"')
    assert "Refund 25 to ann?" in html
    assert "Refund 40 to bob?" in html
    assert re.search(
        r'<textarea id="run-\d+-f1" name="field-reason" rows="2" maxlength="500"', html
    )
    assert "times out in" in html
    assert re.search(r'class="waited">5 min 0\d s<', html)
    # The header links to the page with the count of waiting runs.
    assert re.search(r'id="nav-approvals"[^>]*>Approvals <span class="count"[^>]*>2</span>', html)


def test_no_waiting_run_says_so(approvals, django_user_model):
    response = signed_in(django_user_model, "rita").get(APPROVALS)
    assert 'id="no-approvals"' in response.content.decode()
    assert '<span class="count"' not in response.content.decode()


def test_deciding_needs_staff_and_the_permission(approvals, django_user_model):
    run_id = waiting_run()
    # Anonymous: to the admin's login and back.
    response = Client().get(APPROVALS)
    assert response.status_code == 302
    assert "/admin/login/?next=/approvals/" in response["Location"]
    # Signed in, not staff: the history pages' refusal.
    outsider = signed_in(django_user_model, "olga", is_staff=False)
    response = outsider.get(APPROVALS)
    assert response.status_code == 403
    assert b"Staff only" in response.content
    # Staff without the permission: refused, told which permission and how to get it.
    staff = signed_in(django_user_model, "sam", decides=False)
    response = staff.get(APPROVALS)
    assert response.status_code == 403
    assert b"graphs.decide_approval" in response.content
    response = staff.post(decision_url(run_id), {"decision": "approved"})
    assert response.status_code == 403
    assert Run.objects.get(pk=run_id).status == Run.Status.WAITING
    # Nor do they see the link, or the run page's form.
    page = staff.get(reverse("graphs:run_detail", args=[run_id])).content.decode()
    assert 'id="nav-approvals"' not in page
    assert 'id="run-decision"' not in page
    # A superuser has it.
    boss = signed_in(django_user_model, "root", decides=False, is_superuser=True)
    assert boss.get(APPROVALS).status_code == 200


def test_a_decision_without_the_csrf_token_is_refused(approvals, django_user_model):
    run_id = waiting_run()
    user = django_user_model.objects.create_superuser("root", password=PASSWORD)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    response = client.post(decision_url(run_id), {"decision": "approved"})

    assert response.status_code == 403
    assert Run.objects.get(pk=run_id).status == Run.Status.WAITING
    # With the page's token it goes through.
    client.get(APPROVALS)
    token = client.cookies["csrftoken"].value
    response = client.post(
        decision_url(run_id), {"decision": "rejected", "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert ended(run_id).result == {"refunded": 0, "decision": "rejected"}


def test_approving_with_a_form_and_a_comment_sends_the_run_on(approvals, django_user_model):
    run_id = waiting_run()
    client = signed_in(django_user_model, "rita")

    response = client.post(
        decision_url(run_id),
        {"decision": "approved", "comment": "  Loyal customer.  ", "field-reason": "goodwill"},
        follow=True,
    )

    assert response.redirect_chain == [(APPROVALS, 302)]
    assert messages_of(response) == [
        f"Run {run_id} approved by rita (user): it goes on along its approved route."
    ]
    run = ended(run_id)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.result == {"refunded": 25, "by": "rita", "reason": "goodwill"}
    approval = Approval.objects.get(run_id=run_id)
    assert approval.decided_by == {
        "kind": "user",
        "id": str(approval.decided_by["id"]),
        "name": "rita",
    }
    assert approval.comment == "Loyal customer."
    assert approval.form_values == {"reason": "goodwill"}

    # The run page shows the wait: from, until, how long, who, the decision, comment, form.
    page = client.get(reverse("graphs:run_detail", args=[run_id])).content.decode()
    wait = page[page.index('id="run-waits"') :]
    assert 'class="decision-approved">Approved<' in wait
    assert 'rita <span class="muted">(user)</span>' in wait
    assert "Loyal customer." in wait
    assert "<dt>reason</dt><dd>goodwill</dd>" in wait
    assert approval.created_at.strftime("%Y-%m-%d %H:%M:%S") in wait
    assert approval.decided_at.strftime("%Y-%m-%d %H:%M:%S") in wait
    assert 'id="run-decision"' not in page


def test_a_second_decision_is_told_who_decided(approvals, django_user_model):
    run_id = waiting_run()
    rita = signed_in(django_user_model, "rita")
    rita.post(decision_url(run_id), {"decision": "approved"})
    ended(run_id)

    response = signed_in(django_user_model, "bob").post(
        decision_url(run_id), {"decision": "rejected", "back": "run"}, follow=True
    )

    assert response.redirect_chain == [(reverse("graphs:run_detail", args=[run_id]), 302)]
    (message,) = messages_of(response)
    assert message.startswith(f"Run {run_id} was already decided: approved by rita (user) at ")
    assert '<li class="error">' in response.content.decode()
    assert Approval.objects.get(run_id=run_id).decision == "approved"


def test_a_bad_form_value_is_shown_naming_the_field(approvals, django_user_model):
    run_id = waiting_run()
    client = signed_in(django_user_model, "rita")

    response = client.post(
        decision_url(run_id),
        {"decision": "approved", "field-reason": "x" * 501},
        follow=True,
    )

    assert response.status_code == 200
    (message,) = messages_of(response)
    assert "field 'reason'" in message
    assert "more than 500" in message
    assert Run.objects.get(pk=run_id).status == Run.Status.WAITING


def test_an_unknown_decision_and_a_missing_run_are_messages(approvals, django_user_model):
    run_id = waiting_run()
    client = signed_in(django_user_model, "rita")
    response = client.post(decision_url(run_id), {"decision": "maybe"}, follow=True)
    assert "send 'approved' or 'rejected'" in messages_of(response)[0]
    response = client.post(decision_url(run_id + 100), {"decision": "approved"}, follow=True)
    assert messages_of(response) == [f"No run {run_id + 100}."]
    assert client.get(decision_url(run_id)).status_code == 405


def test_the_starter_may_not_decide_their_own_run(approvals, django_user_model):
    outcome = workflow_call(
        RunRequest(name="refund", arguments={"amount": 5, "customer": "cy"}, caller="rita")
    )
    client = signed_in(django_user_model, "rita")
    response = client.post(decision_url(outcome.run_id), {"decision": "approved"}, follow=True)
    assert "separation of duties" in messages_of(response)[0]


def test_the_run_page_of_a_waiting_run_shows_the_wait_and_the_form(approvals, django_user_model):
    run_id = waiting_run()
    client = signed_in(django_user_model, "rita")

    page = client.get(reverse("graphs:run_detail", args=[run_id])).content.decode()

    assert 'id="run-waiting"' in page
    assert "data-refresh-seconds" not in page  # a reload would wipe the decision being written
    assert '<span class="badge waiting" id="run-status">Waiting for approval</span>' in page
    assert re.search(r'<li class="step status-waiting"[^>]*data-node-id="approve"', page)
    assert '<span class="took">waiting for a decision</span>' in page
    decision = page[page.index('id="run-decision"') :]
    assert '<input type="hidden" name="back" value="run">' in decision
    assert 'name="field-reason"' in decision
    assert "still waiting; times out at" in page
    # The runs list filters by it.
    runs = client.get(reverse("graphs:run_list"), {"status": "waiting"}).content.decode()
    assert '<option value="waiting" selected>Waiting for approval</option>' in runs
    assert f'href="/runs/{run_id}/"' in runs


SCHEMA = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "title": "Reason", "description": "Why", "maxLength": 50},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2},
        "rate": {"type": "number", "maximum": 1.5},
        "urgent": {"type": "boolean", "title": "Urgent"},
        "level": {"type": "string", "enum": ["low", "high"], "enumNames": ["Low", "High"]},
        "team": {"type": "string", "oneOf": [{"const": "a", "title": "Team A"}]},
        "email": {"type": "string", "format": "email"},
        "when": {"type": "string", "format": "date-time"},
    },
    "required": ["quantity", "level"],
}


def test_the_schema_becomes_html_fields():
    fields = {field.name: field for field in form_fields(SCHEMA)}
    assert fields["reason"].label == "Reason"
    assert fields["reason"].description == "Why"
    assert fields["reason"].widget == "input"
    assert fields["reason"].attrs == {"type": "text", "maxlength": "50"}
    assert fields["quantity"].attrs == {"type": "number", "step": "1", "min": "1", "max": "10"}
    assert fields["quantity"].required
    assert fields["quantity"].initial == "2"
    assert fields["rate"].attrs == {"type": "number", "step": "any", "max": "1.5"}
    assert fields["urgent"].widget == "checkbox"
    assert not fields["urgent"].required
    assert fields["level"].widget == "select"
    assert fields["level"].choices == [("low", "Low"), ("high", "High")]
    assert fields["team"].choices == [("a", "Team A")]
    assert fields["email"].attrs == {"type": "email"}
    assert fields["when"].attrs == {"type": "datetime-local"}
    assert form_fields(None) == []


def test_submitted_text_is_typed_as_the_schema_says():
    from django.http import QueryDict

    data = QueryDict(
        "field-quantity=3&field-rate=0.5&field-urgent=on&field-level=high&field-reason="
        "&field-when=2026-05-01T09:30&field-stray=x"
    )
    assert submitted_values(SCHEMA, data) == {
        "quantity": 3,
        "rate": 0.5,
        "urgent": True,
        "level": "high",
        "when": "2026-05-01T09:30:00Z",
    }
    # Not a number: left as text, for the decision to refuse naming the field.
    data = QueryDict("field-quantity=three&field-rate=nan")
    assert submitted_values(SCHEMA, data) == {"quantity": "three", "rate": "nan", "urgent": False}


def test_the_permission_may_come_from_a_group(approvals, django_user_model):
    from django.contrib.auth.models import Group

    waiting_run()
    reviewers = Group.objects.create(name="reviewers")
    reviewers.permissions.add(Permission.objects.get(codename="decide_approval"))
    user = django_user_model.objects.create_user("gus", password=PASSWORD, is_staff=True)
    user.groups.add(reviewers)
    client = Client()
    client.force_login(user)

    response = client.get(reverse("graphs:run_list"))

    assert re.search(
        r'id="nav-approvals"[^>]*>Approvals <span class="count"', response.content.decode()
    )
    assert client.get(APPROVALS).status_code == 200


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.42, "0.4 s"),
        (-1, "0.0 s"),
        (12.4, "12 s"),
        (2525, "42 min 05 s"),
        (3 * 3600 + 300, "3 h 05 min"),
        (86_399.9, "1 d 0 h"),
        (86_398, "23 h 59 min"),
        (2 * 86_400 + 4 * 3600, "2 d 4 h"),
    ],
)
def test_waits_are_shown_in_minutes_to_days(seconds, shown):
    assert wait_length(seconds) == shown
