"""Starting processes is a superuser's right (issue 13, item 5): only a superuser may register
a stdio provider or change what it runs, in the admin and in the service every save goes through
(nodespecs/providers/lifecycle.py, nodespecs/downstream/process_rights.py);
PROVIDER_ALLOWED_COMMANDS narrows the commands for everyone; each such change is in the audit
trail."""

from __future__ import annotations

import sys

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.urls import reverse

from nodespecs.callers import Caller, caller_command, caller_user
from nodespecs.downstream import client as mcp_client
from nodespecs.models import AuditEvent, Provider
from nodespecs.providers.lifecycle import ProviderRefreshError, provider_refresh, provider_save
from tests.nodespecs.test_providers_admin import change_url, page_text

ADD = reverse("admin:nodespecs_provider_add")
SECRET = "process-rights-secret-4242"
REFUSAL = "only a superuser (or an operator, with manage.py) may register such a server"


def stdio_form(**fields: str) -> dict[str, str]:
    """What the add form posts for the stdio provider of the issue: a shell that runs `touch`."""
    return {
        "name": "shell",
        "title": "",
        "enabled": "on",
        "transport": "stdio",
        "command": "/bin/sh",
        "args": "-c\ntouch /tmp/switchyard-process-rights-proof",
        "env": f"API_TOKEN={SECRET}",
        "cwd": "",
        "url": "",
        "headers": "",
        "timeout_seconds": "30",
    } | fields


def events() -> list[tuple[str, str, str, list[str]]]:
    rows = AuditEvent.objects.filter(object_type="nodespecs.provider").order_by("id")
    return [(e.actor, e.action, e.object_label, e.fields) for e in rows]


@pytest.fixture
def staff(author):
    """A staff user with every provider permission (add, change, delete, view), not a
    superuser: the shared `author`, checked to hold them, so the refusals below are about
    processes and not about permissions."""
    provider_permissions = Permission.objects.filter(content_type__model="provider")
    assert set(provider_permissions) <= set(author.user_permissions.all())
    assert provider_permissions.count() == 4
    assert not author.is_superuser
    return author


@pytest.fixture
def stdio_provider(db) -> Provider:
    provider = Provider(name="echo", command=sys.executable, args=["-m", "echo"])
    provider_save(provider=provider, caller=caller_command("test"))
    AuditEvent.objects.all().delete()
    return provider


class TestAdmin:
    def test_staff_with_every_provider_permission_is_refused_a_stdio_provider(self, client, staff):
        client.force_login(staff)

        response = client.post(ADD, stdio_form())

        assert response.status_code == 200
        text = page_text(response)
        assert "'shell' is a stdio server: Switchyard would run its command as a process" in text
        assert REFUSAL in text
        assert "use a Streamable HTTP or SSE server" in text
        assert not Provider.objects.exists()
        assert events() == []

    def test_staff_are_not_offered_the_stdio_fields(self, client, staff, stdio_provider):
        client.force_login(staff)

        add_page = page_text(client.get(ADD))
        change_page = page_text(client.get(change_url(stdio_provider)))

        for page in (add_page, change_page):
            assert 'name="command"' not in page
            assert 'name="args"' not in page
            assert 'name="cwd"' not in page
            assert 'name="env"' not in page
            assert 'name="url"' in page
        # A new provider starts as HTTP, which they may register.
        assert '<option value="streamable_http" selected>' in add_page
        # The command they may not change is shown read-only.
        assert sys.executable in change_page

    def test_staff_may_register_an_http_provider(self, client, staff):
        client.force_login(staff)
        data = stdio_form(transport="streamable_http", url="https://mcp.example.com/mcp")

        response = client.post(ADD, data)

        assert response.status_code == 302, page_text(response)
        provider = Provider.objects.get(name="shell")
        # The stdio fields they were not offered stay empty, whatever was posted.
        assert (provider.command, provider.args, provider.env) == ("", [], {})
        assert events() == [(staff.username, "created", "shell", ["name", "transport", "url"])]

    def test_staff_may_rename_a_stdio_provider_but_not_change_what_it_runs(
        self, client, staff, stdio_provider
    ):
        client.force_login(staff)
        data = stdio_form(name="echo", title="Echo server", command="/bin/sh", env="")

        response = client.post(change_url(stdio_provider), data)

        assert response.status_code == 302, page_text(response)
        stdio_provider.refresh_from_db()
        assert stdio_provider.title == "Echo server"
        assert (stdio_provider.command, stdio_provider.args) == (sys.executable, ["-m", "echo"])

    def test_staff_may_not_switch_an_http_provider_to_stdio(self, client, staff):
        provider = Provider.objects.create(
            name="web", transport="streamable_http", url="https://mcp.example.com/mcp"
        )
        client.force_login(staff)

        response = client.post(change_url(provider), stdio_form(name="web", url=provider.url))

        assert response.status_code == 200
        assert REFUSAL in page_text(response)
        provider.refresh_from_db()
        assert provider.transport == "streamable_http"

    def test_a_superuser_registers_a_stdio_provider_and_the_trail_names_the_fields(
        self, admin_client, admin_user
    ):
        response = admin_client.post(ADD, stdio_form())

        assert response.status_code == 302, page_text(response)
        provider = Provider.objects.get(name="shell")
        assert provider.command == "/bin/sh"
        assert events() == [("admin", "created", "shell", ["args", "command", "env", "name"])]
        assert SECRET not in str(list(AuditEvent.objects.values()))


class TestService:
    def test_staff_are_refused_a_stdio_provider(self, staff):
        provider = Provider(name="shell", command="/bin/sh", args=["-c", "touch x"])

        with pytest.raises(ValidationError) as refused:
            provider_save(provider=provider, caller=caller_user(staff))

        assert REFUSAL in refused.value.messages[0]
        assert not Provider.objects.exists()

    def test_an_api_caller_is_refused_a_stdio_provider(self, db):
        provider = Provider(name="shell", command="/bin/sh")

        with pytest.raises(ValidationError, match="only a superuser"):
            provider_save(provider=provider, caller=Caller(actor="api-key:abc123"))

    def test_an_inactive_superuser_has_no_right_to_start_processes(self, admin_user):
        admin_user.is_active = False
        assert not caller_user(admin_user).may_start_processes

    @pytest.mark.parametrize(
        "change",
        [
            {"command": "/bin/sh"},
            {"args": ["-c", "touch x"]},
            {"env": {"LD_PRELOAD": "/tmp/x.so"}},
            {"cwd": "/tmp"},
        ],
    )
    def test_staff_are_refused_a_change_to_what_a_stdio_provider_runs(
        self, staff, stdio_provider, change
    ):
        for field, value in change.items():
            setattr(stdio_provider, field, value)

        with pytest.raises(ValidationError, match="only a superuser"):
            provider_save(provider=stdio_provider, caller=caller_user(staff))

        stored = Provider.objects.get(pk=stdio_provider.pk)
        assert (stored.command, stored.args, stored.env, stored.cwd) == (
            sys.executable,
            ["-m", "echo"],
            {},
            "",
        )
        assert events() == []

    def test_staff_may_change_the_rest_of_a_stdio_provider(self, staff, stdio_provider):
        stdio_provider.title = "Echo"
        stdio_provider.enabled = False
        stdio_provider.timeout_seconds = 5

        assert provider_save(provider=stdio_provider, caller=caller_user(staff)) == [
            "title",
            "enabled",
            "timeout_seconds",
        ]
        assert events() == [
            (staff.username, "changed", "echo", ["enabled", "timeout_seconds", "title"])
        ]

    def test_a_superuser_may_change_what_it_runs_and_the_trail_says_which_fields(
        self, admin_user, stdio_provider
    ):
        stdio_provider.args = ["-m", "echo", "--verbose"]
        stdio_provider.env = {"API_TOKEN": SECRET}

        provider_save(provider=stdio_provider, caller=caller_user(admin_user))

        assert events() == [("admin", "changed", "echo", ["args", "env"])]
        assert SECRET not in str(list(AuditEvent.objects.values()))


class TestAllowedCommands:
    @pytest.fixture(autouse=True)
    def allowed(self, settings):
        settings.PROVIDER_ALLOWED_COMMANDS = ["npx", "/usr/bin/node"]

    @pytest.mark.parametrize(
        "command", ["/bin/sh", "/tmp/evil/npx", "node", "/usr/bin/../bin/node"]
    )
    def test_even_a_superuser_is_refused_another_command(self, admin_user, command):
        provider = Provider(name="shell", command=command)

        with pytest.raises(ValidationError) as refused:
            provider_save(provider=provider, caller=caller_user(admin_user))

        assert refused.value.messages == [
            f"Provider 'shell': command {command!r} is not one that PROVIDER_ALLOWED_COMMANDS "
            "allows (npx, /usr/bin/node); use one of those, written exactly so, or ask the "
            "operator to add it to the setting."
        ]

    def test_an_allowed_command_is_saved(self, admin_user):
        provider = Provider(name="files", command="npx", args=["-y", "server"])
        provider_save(provider=provider, caller=caller_user(admin_user))
        assert Provider.objects.filter(name="files").exists()

    def test_an_allowed_name_may_not_be_found_on_a_path_of_the_providers_choosing(self, admin_user):
        provider = Provider(name="files", command="npx", env={"PATH": "/tmp/evil"})
        with pytest.raises(ValidationError, match="its env sets PATH"):
            provider_save(provider=provider, caller=caller_user(admin_user))

    def test_the_admin_shows_the_refusal_to_a_superuser(self, admin_client):
        response = admin_client.post(ADD, stdio_form())
        assert response.status_code == 200
        assert "command '/bin/sh' is not one that PROVIDER_ALLOWED_COMMANDS allows" in (
            page_text(response)
        )

    def test_a_provider_saved_before_the_setting_refuses_to_start(self, settings, db):
        settings.PROVIDER_ALLOWED_COMMANDS = []
        provider = Provider(name="shell", command="/bin/sh", args=["-c", "touch x"])
        provider_save(provider=provider, caller=caller_command("test"))
        settings.PROVIDER_ALLOWED_COMMANDS = ["npx"]

        try:
            with pytest.raises(ProviderRefreshError) as refused:
                provider_refresh(provider=provider)
        finally:
            mcp_client.close_all()

        assert "cannot start: command '/bin/sh' is not one that PROVIDER_ALLOWED_COMMANDS" in (
            str(refused.value)
        )
