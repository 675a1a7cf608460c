"""The provider admin's "Test connection": the button, who may press it, its CSRF token, and the
page it answers with, for a server that works and for one that answers garbage or nothing."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from nodespecs.models import Provider
from tests.nodespecs.providers_helpers import echo_provider, http_provider, servers  # noqa: F401
from tests.peers.not_mcp import silent_server, web_server

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("servers")]


def change_url(provider: Provider) -> str:
    return reverse("admin:nodespecs_provider_change", args=[provider.pk])


def connection_test_url(provider: Provider) -> str:
    return reverse("admin:nodespecs_provider_test_connection", args=[provider.pk])


def text_of(response) -> str:
    """The page's text, tags and runs of white space folded away."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.fixture
def web_provider(db) -> Provider:
    return Provider.objects.create(
        name="web", transport="streamable_http", url="http://127.0.0.1:9/mcp"
    )


@pytest.fixture
def viewer(django_user_model):
    """Staff who may see providers, not change them."""
    user = django_user_model.objects.create_user("victor", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_provider"))
    return user


@pytest.fixture
def changer(django_user_model):
    """Staff who may change providers (not a superuser: may not start new processes)."""
    user = django_user_model.objects.create_user("carol", password="pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_provider"),
        Permission.objects.get(codename="change_provider"),
    )
    return user


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


class TestTheButton:
    def test_whoever_may_change_the_provider_sees_it_as_a_form_that_posts(
        self, changer, web_provider
    ):
        page = signed_in(changer).get(change_url(web_provider)).content.decode()

        form = re.search(
            r'<form method="post" action="([^"]+)" class="connection-test-tool">', page
        )
        assert form is not None
        assert form.group(1) == connection_test_url(web_provider)
        assert "Test connection" in page

    def test_a_viewer_does_not_see_it_and_is_refused_the_test(self, viewer, web_provider):
        client = signed_in(viewer)

        page = client.get(change_url(web_provider)).content.decode()
        assert connection_test_url(web_provider) not in page
        assert client.post(connection_test_url(web_provider)).status_code == 403

    def test_someone_signed_out_is_sent_to_sign_in(self, client, web_provider):
        response = client.post(connection_test_url(web_provider))

        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))

    def test_a_post_without_the_csrf_token_is_refused_and_with_it_runs(
        self, admin_user, web_provider
    ):
        strict = Client(enforce_csrf_checks=True)
        strict.force_login(admin_user)
        page = strict.get(change_url(web_provider)).content.decode()
        token = re.search(
            r'connection-test-tool">\s*<input type="hidden" name="csrfmiddlewaretoken" '
            r'value="([^"]+)"',
            page,
        )
        assert token is not None

        assert strict.post(connection_test_url(web_provider)).status_code == 403
        answered = strict.post(
            connection_test_url(web_provider), {"csrfmiddlewaretoken": token.group(1)}
        )
        assert answered.status_code == 200

    def test_a_get_goes_back_to_the_providers_page_without_testing(self, admin_user, web_provider):
        response = signed_in(admin_user).get(connection_test_url(web_provider))

        assert (response.status_code, response["Location"]) == (302, change_url(web_provider))

    def test_an_unknown_provider_is_404(self, admin_user, db):
        missing = reverse("admin:nodespecs_provider_test_connection", args=[999])
        assert signed_in(admin_user).post(missing).status_code == 404


@pytest.mark.slow
class TestTheAnswer:
    def test_a_working_server_shows_its_name_latency_and_tools(self, admin_user, db):
        provider = echo_provider()

        response = signed_in(admin_user).post(connection_test_url(provider))

        assert response.status_code == 200
        text = text_of(response)
        assert re.search(r"Connected: 6 tools listed in \d+ ms\.", text), text
        assert "Server echo" in text
        assert "Version (no version given)" in text
        assert re.search(r"Latency \d+ ms to connect \(start the server and initialize\)", text)
        assert "add Add two numbers and return their sum as structured content." in text
        # Nothing changed: no spec was written.
        assert not provider.specs.exists()

    def test_a_server_answering_html_is_reported_not_a_500(self, admin_user, db):
        with web_server() as base:
            provider = http_provider(f"{base}/html")
            response = signed_in(admin_user).post(connection_test_url(provider))

        assert response.status_code == 200
        text = text_of(response)
        assert "Not an MCP server: it answered, but not in MCP." in text
        assert "Unexpected content type: text/html" in text

    def test_a_server_that_hangs_is_cut_off_and_the_page_answers(self, admin_user, db):
        with silent_server() as port:
            provider = http_provider(f"http://127.0.0.1:{port}/mcp", timeout_seconds=1)
            response = signed_in(admin_user).post(connection_test_url(provider))

        assert response.status_code == 200
        text = text_of(response)
        assert "Timed out." in text
        assert "the test waits at most 1 s" in text
