"""`manage.py refresh_providers`: a line per provider, and exit status 1 when one failed."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from nodespecs.models import Provider
from tests.nodespecs.providers_helpers import echo_provider, servers  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("servers")]


def refresh_providers(*names: str) -> str:
    out = StringIO()
    call_command("refresh_providers", *names, stdout=out)
    return out.getvalue()


def test_every_enabled_provider_is_refreshed_and_summarised(db):
    echo_provider()
    echo_provider("parrot", env={"ECHO_SERVER_TOOLS": "echo"})
    echo_provider("off", enabled=False)
    assert refresh_providers().splitlines() == [
        "echo: 6 created, 0 updated, 0 unchanged, 0 unavailable",
        "parrot: 1 created, 0 updated, 0 unchanged, 0 unavailable",
    ]


def test_named_providers_alone_are_refreshed(db):
    echo_provider()
    echo_provider("parrot")
    assert refresh_providers("parrot") == (
        "parrot: 6 created, 0 updated, 0 unchanged, 0 unavailable\n"
    )


def test_a_failed_provider_prints_its_error_and_exits_with_status_1(db):
    echo_provider()
    Provider.objects.create(name="broken", command="no-such-mcp-server")
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 2 providers failed to refresh") as failure:
        call_command("refresh_providers", stdout=out)
    assert failure.value.returncode == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("broken: failed: MCP server 'broken' (stdio: no-such-mcp-server)")
    assert "command 'no-such-mcp-server' was not found on PATH" in lines[0]
    assert lines[1] == "echo: 6 created, 0 updated, 0 unchanged, 0 unavailable"


def test_an_unknown_name_lists_the_providers(db):
    echo_provider()
    with pytest.raises(CommandError, match=r"No provider named nope\. Providers: echo\."):
        refresh_providers("nope")


def test_without_providers_it_says_how_to_add_one(db):
    assert refresh_providers() == "No enabled providers: add one in the admin first.\n"
