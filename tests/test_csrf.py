"""CSRF: every POST form of the admin and of the history pages is refused without its token
and accepted with it.

The forms are found by reading each page, so a form added to a page later (a button on the
run page, say) is covered without a change here.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from graphs.execution.runs import RunRequest, run_create
from graphs.models import Workflow
from mcp_endpoint.access.keys import api_key_create
from nodespecs.models import Provider
from tests.graph_files import import_file

TOKEN = "csrfmiddlewaretoken"


class PostForms(HTMLParser):
    """The POST forms of a page: each its action and its hidden fields."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []
        self._open = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self._open = (found.get("method") or "").lower() == "post"
            if self._open:
                self.forms.append((found.get("action") or "", {}))
        elif tag == "input" and self._open and found.get("type") == "hidden" and found.get("name"):
            self.forms[-1][1][found["name"]] = found.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = False


def strict_client(user) -> Client:
    """A browser that is held to CSRF checks, as real ones are (the test client is not)."""
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def forms_on(client: Client, url: str) -> dict[str, dict[str, str]]:
    """The page's POST forms by the URL they post to."""
    response = client.get(url)
    assert response.status_code == 200, f"{url}: {response.status_code}"
    return {action or url: fields for action, fields in PostForms(response.content.decode()).forms}


def check_every_post_form(user, url: str) -> set[str]:
    """Post each form of the page without, then with, its token, each from a fresh visit (a
    form may sign out); returns the URLs posted to."""
    actions = set(forms_on(strict_client(user), url))
    assert actions, f"{url} has no POST form: the test would check nothing"
    # The page's own form last: it may delete what the page shows.
    for action in sorted(actions, key=lambda action: action == url):
        client = strict_client(user)
        fields = forms_on(client, url)[action]  # the visit also sets the CSRF cookie
        assert TOKEN in fields, f"the form posting to {action} on {url} has no CSRF token"
        without = {name: value for name, value in fields.items() if name != TOKEN}
        refused = client.post(action, without)
        assert refused.status_code == 403, f"{action} (from {url}) accepted a POST without token"
        accepted = client.post(action, fields)
        assert accepted.status_code != 403, f"{action} (from {url}) refused its own token"
    return actions


@pytest.fixture
def objects(db):
    """One of each object the admin edits, and a queued run (its page can cancel it)."""
    import_file("loops.yaml")
    provider = Provider.objects.create(name="web", command="true", env={"TOKEN": "t"})
    key, _ = api_key_create(name="ci", scopes=["tools:read"])
    run = run_create(RunRequest(name="sum_to", arguments={"n": 3}))
    return {"provider": provider, "key": key, "run": run}


def admin_pages(objects) -> list[str]:
    provider, key = objects["provider"], objects["key"]
    workflow = Workflow.objects.get(name="classify")
    return [
        reverse("admin:index"),
        reverse("admin:nodespecs_provider_changelist"),
        reverse("admin:nodespecs_provider_add"),
        reverse("admin:nodespecs_provider_change", args=[provider.pk]),
        reverse("admin:nodespecs_provider_delete", args=[provider.pk]),
        reverse("admin:nodespecs_nodespec_add"),
        reverse("admin:nodespecs_nodespec_import"),
        reverse("admin:graphs_workflow_change", args=[workflow.pk]),
        reverse("admin:graphs_workflow_test_run", args=[workflow.pk]),
        reverse("admin:mcp_endpoint_apikey_add"),
        reverse("admin:mcp_endpoint_apikey_change", args=[key.pk]),
    ]


def test_the_admin_sign_in_form_needs_its_token(db):
    assert check_every_post_form(None, reverse("admin:login")) == {reverse("admin:login")}


def test_every_admin_form_needs_its_token(objects, admin_user):
    for url in admin_pages(objects):
        check_every_post_form(admin_user, url)


def test_every_history_page_form_needs_its_token(objects, admin_user):
    run = objects["run"]
    checked = set()
    for url in (
        reverse("graphs:run_list"),
        reverse("graphs:run_detail", args=[run.pk]),
        reverse("graphs:workflows"),
    ):
        checked |= check_every_post_form(admin_user, url)
    assert reverse("admin:logout") in checked
