"""Saving a provider in the admin refreshes its tools: at once when the server is quick, in the
background when it is slow, the state shown on its pages; a failed refresh keeps the specs it
had and says why. Saves commit for real here (the refresh starts once the save commits)."""

from __future__ import annotations

import datetime
import html
import sys
import time

import pytest
from django.urls import reverse
from django.utils import timezone

from nodespecs.admin import providers as provider_admin
from nodespecs.models import AuditEvent, NodeSpec, Provider
from nodespecs.providers.lifecycle import provider_refresh
from nodespecs.providers.refreshing import refresh_state_text
from tests.nodespecs.providers_helpers import echo_provider, servers  # noqa: F401
from tests.peers import ECHO_SERVER, echo_http_server
from tests.peers.not_mcp import closed_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.usefixtures("servers"),
    pytest.mark.django_db(transaction=True),
]

ADD = reverse("admin:nodespecs_provider_add")
REFRESHING = Provider.RefreshState.REFRESHING


def change_url(provider: Provider) -> str:
    return reverse("admin:nodespecs_provider_change", args=[provider.pk])


def form(**fields: str) -> dict[str, str]:
    """What the add form posts for a provider."""
    return {
        "title": "",
        "transport": "stdio",
        "command": "",
        "args": "",
        "env": "",
        "cwd": "",
        "url": "",
        "headers": "",
        "timeout_seconds": "30",
        "sse_read_timeout": "300",
        "enabled": "on",
        **fields,
    }


def echo_form(name: str = "echo", **fields: str) -> dict[str, str]:
    return form(name=name, command=sys.executable, args=str(ECHO_SERVER), **fields)


def settled(name: str, seconds: float = 30) -> Provider:
    """The provider once its refresh has ended."""
    deadline = time.monotonic() + seconds
    while True:
        provider = Provider.objects.get(name=name)
        if provider.tools_refresh_state != REFRESHING:
            return provider
        assert time.monotonic() < deadline, f"{name} is still refreshing after {seconds} s"
        time.sleep(0.1)


@pytest.fixture
def signed_in(client, admin_user):
    client.force_login(admin_user)
    return client


def test_adding_a_provider_refreshes_its_tools(signed_in, admin_user):
    response = signed_in.post(ADD, echo_form())
    assert response.status_code == 302, html.unescape(response.content.decode())

    provider = settled("echo")
    assert provider.tools_refresh_state == Provider.RefreshState.REFRESHED
    assert provider.specs.filter(available=True).count() == 6
    assert AuditEvent.objects.filter(
        action="refreshed", object_id=str(provider.pk), actor=admin_user.username
    ).exists()
    page = html.unescape(signed_in.get(change_url(provider)).content.decode())
    assert "refreshed at " in page
    assert "mcp-echo-add" in page


def test_a_slow_server_is_refreshed_in_the_background_and_the_page_says_so(signed_in, monkeypatch):
    monkeypatch.setattr(provider_admin, "REFRESH_WAIT_SECONDS", 0.1)
    # The echo peer, after two seconds of getting ready.
    slow_start = (
        "import runpy, sys, time; time.sleep(2); sys.argv = [sys.argv[1]]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    started = time.monotonic()
    response = signed_in.post(
        ADD, form(name="slow", command=sys.executable, args=f"-c\n{slow_start}\n{ECHO_SERVER}")
    )
    assert response.status_code == 302
    assert time.monotonic() - started < 2  # the save did not wait for the server

    changelist = signed_in.get(reverse("admin:nodespecs_provider_changelist"))
    assert "refreshing… (since " in html.unescape(changelist.content.decode())
    provider = settled("slow")
    assert provider.tools_refresh_state == Provider.RefreshState.REFRESHED
    assert provider.specs.count() == 6


def test_a_failed_refresh_keeps_the_specs_and_says_why(signed_in):
    with echo_http_server() as url:
        provider = Provider.objects.create(name="web", transport="streamable_http", url=url)
        provider_refresh(provider=provider)
    assert provider.specs.filter(available=True).count() == 6
    gone = f"http://127.0.0.1:{closed_port()}/mcp"

    response = signed_in.post(
        change_url(provider), form(name="web", transport="streamable_http", url=gone)
    )
    assert response.status_code == 302

    provider = settled("web")
    assert provider.tools_refresh_state == Provider.RefreshState.FAILED
    assert "Connection refused" in provider.last_error
    assert provider.specs.filter(available=True).count() == 6
    page = html.unescape(signed_in.get(change_url(provider)).content.decode())
    assert "failed at " in page
    assert "Connection refused" in page


def test_a_disabled_provider_is_saved_without_a_refresh(signed_in):
    fields = echo_form(name="off")
    del fields["enabled"]

    assert signed_in.post(ADD, fields).status_code == 302

    provider = Provider.objects.get(name="off")
    assert provider.tools_refresh_state == ""
    assert not NodeSpec.objects.filter(provider=provider).exists()


def test_the_state_in_words_and_a_refresh_that_never_ended(db):
    provider = echo_provider(timeout_seconds=5)
    assert refresh_state_text(provider) == "never refreshed"
    at = timezone.now()
    provider.tools_refresh_state, provider.tools_refresh_at = REFRESHING, at
    assert refresh_state_text(provider, now=at).startswith("refreshing… (since ")
    later = at + datetime.timedelta(seconds=5 + 61)
    assert refresh_state_text(provider, now=later).startswith("interrupted: started at ")
    provider.tools_refresh_state, provider.last_error = Provider.RefreshState.FAILED, "it broke"
    assert refresh_state_text(provider).endswith(": it broke")
