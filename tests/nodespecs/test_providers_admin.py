"""The provider admin: secrets never shown back, and the "Refresh tools" action."""

from __future__ import annotations

import html

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from nodespecs.models import Provider
from tests.nodespecs.providers_helpers import echo_provider, servers  # noqa: F401

CHANGELIST = reverse("admin:nodespecs_provider_changelist")
ADD = reverse("admin:nodespecs_provider_add")
ENV_SECRET = "env-secret-value-1234"
HEADER_SECRET = "Bearer header-secret-5678"


def change_url(provider: Provider) -> str:
    return reverse("admin:nodespecs_provider_change", args=[provider.pk])


def page_text(response) -> str:
    return html.unescape(response.content.decode())


def form_data(provider: Provider, **changes: str) -> dict[str, str]:
    """What the change form posts, with the secret fields as the browser shows them."""
    data = {
        "name": provider.name,
        "title": provider.title,
        "transport": provider.transport,
        "command": provider.command,
        "args": "\n".join(provider.args),
        "env": "".join(f"{name}=\n" for name in provider.env),
        "cwd": provider.cwd,
        "url": provider.url,
        "headers": "".join(f"{name}:\n" for name in provider.headers),
        "timeout_seconds": str(provider.timeout_seconds),
    }
    if provider.enabled:
        data["enabled"] = "on"
    return data | changes


@pytest.fixture
def provider(db) -> Provider:
    return Provider.objects.create(
        name="web",
        transport="streamable_http",
        url="https://mcp.example.com/mcp",
        env={"API_TOKEN": ENV_SECRET},
        headers={"Authorization": HEADER_SECRET},
    )


@pytest.fixture
def signed_in(client, admin_user):
    """A superuser: the only one offered a provider's stdio settings (command, args, env);
    what other staff see and may do is in tests/nodespecs/test_process_rights.py."""
    client.force_login(admin_user)
    return client


def test_the_pages_show_secret_names_but_never_their_values(signed_in, provider):
    for url in (change_url(provider), CHANGELIST):
        text = page_text(signed_in.get(url))
        assert ENV_SECRET not in text
        assert "header-secret" not in text
    change_page = page_text(signed_in.get(change_url(provider)))
    assert "API_TOKEN=" in change_page
    assert "Authorization:" in change_page
    assert "never shown" in change_page


def test_a_line_without_a_value_keeps_the_stored_secret(signed_in, provider):
    response = signed_in.post(change_url(provider), form_data(provider, env="API_TOKEN=\nDEBUG=1"))
    assert response.status_code == 302, page_text(response)
    provider.refresh_from_db()
    assert provider.env == {"API_TOKEN": ENV_SECRET, "DEBUG": "1"}
    assert provider.headers == {"Authorization": HEADER_SECRET}


def test_a_value_replaces_the_secret_and_a_deleted_line_removes_it(signed_in, provider):
    data = form_data(provider, env="", headers="Authorization: Bearer new-token")
    assert signed_in.post(change_url(provider), data).status_code == 302
    provider.refresh_from_db()
    assert provider.env == {}
    assert provider.headers == {"Authorization": "Bearer new-token"}


def test_a_new_name_without_a_value_is_refused_and_typed_secrets_are_not_echoed(
    signed_in, provider
):
    data = form_data(provider, env="API_TOKEN=typed-secret-999\nNEW_TOKEN=")
    response = signed_in.post(change_url(provider), data)
    text = page_text(response)
    assert response.status_code == 200
    assert "NEW_TOKEN has no value: give one after the separator." in text
    assert "typed-secret-999" not in text
    provider.refresh_from_db()
    assert provider.env == {"API_TOKEN": ENV_SECRET}


def test_a_line_without_the_separator_says_how_to_write_it(signed_in, provider):
    response = signed_in.post(change_url(provider), form_data(provider, headers="Authorization"))
    assert "Line 1 is not in the form Name: value" in page_text(response)


def test_a_provider_is_added_with_one_argument_per_line(signed_in):
    data = {
        "name": "files",
        "title": "Files",
        "enabled": "on",
        "transport": "stdio",
        "command": "npx",
        "args": "-y\n@modelcontextprotocol/server-filesystem\n/srv/my files\n",
        "env": "ROOT=/srv\n",
        "headers": "",
        "timeout_seconds": "30",
    }
    response = signed_in.post(ADD, data)
    assert response.status_code == 302, page_text(response)
    provider = Provider.objects.get(name="files")
    assert provider.args == ["-y", "@modelcontextprotocol/server-filesystem", "/srv/my files"]
    assert provider.env == {"ROOT": "/srv"}


def test_an_invalid_provider_shows_what_is_missing(signed_in):
    response = signed_in.post(ADD, {"name": "files", "transport": "stdio", "timeout_seconds": "30"})
    assert "A stdio provider needs the command that starts it." in page_text(response)


@pytest.mark.slow
@pytest.mark.usefixtures("servers")
def test_the_refresh_action_reports_each_providers_counts_or_error(signed_in, db):
    working = echo_provider()
    broken = Provider.objects.create(name="broken", command="/nonexistent/server")
    response = signed_in.post(
        CHANGELIST,
        {"action": "refresh_tools", "_selected_action": [working.pk, broken.pk]},
        follow=True,
    )
    text = page_text(response)
    assert "Refreshed echo: 6 created, 0 updated, 0 unchanged, 0 unavailable." in text
    assert "Could not refresh broken: MCP server 'broken' (stdio: /nonexistent/server)" in text
    # The list then shows the tools, the refresh and the error.
    assert '<td class="field-tool_count">6</td>' in text
    assert "/nonexistent/server is not an executable file" in text
    change_page = page_text(signed_in.get(change_url(working)))
    assert "mcp-echo-add" in change_page


def test_a_user_without_change_permission_cannot_refresh(client, django_user_model, provider):
    viewer = django_user_model.objects.create_user("victor", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_provider"))
    client.force_login(viewer)
    text = page_text(client.get(CHANGELIST))
    assert "refresh_tools" not in text
