"""Who may make Switchyard start a process, and which programs it may start.

A stdio MCP server is a command this service runs on its host, as its own user. So
registering one, or changing what it runs, is a superuser's right (and an operator's, at
the shell, where they can run anything anyway); every other staff user and every API
caller uses registered providers or HTTP/SSE servers. The services that save providers
(`nodespecs.providers.lifecycle.provider_save`) and turn a graph file's `mcpServers` into providers
(`graphs.authoring.services.workflow_providers`) apply these rules to whoever calls them.

`PROVIDER_ALLOWED_COMMANDS` (a setting, empty by default) narrows this for everyone,
superusers included: when set, a stdio server may run only a command it lists. Commands
are compared exactly as written, not by file name: `npx` on the list does not allow
`/tmp/x/npx`, and `/usr/bin/node` does not allow `node` or `/usr/bin/../bin/node`. A bare
name is found on PATH, so while the list is set a stdio server's env may not set PATH
(that would choose which file the allowed name runs). The list pins the program, not what
it does: an interpreter or `npx` on it runs whatever its arguments say, so list dedicated
server programs by absolute path where that matters.

This module reads settings only (no models), so the transport that spawns processes
(`nodespecs.downstream.transports`) can check the list at the last moment too.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

# The provider fields that decide which process runs and how: changing one of them on a
# stdio provider is starting a new process as far as rights go. `transport` is here
# because switching an HTTP provider to stdio starts its (until then unused) command, and
# `cwd` because a relative command or argument runs whatever that folder holds.
PROCESS_FIELDS = ("transport", "command", "args", "env", "cwd")


def allowed_commands() -> list[str]:
    """The commands `PROVIDER_ALLOWED_COMMANDS` allows; empty when any command is."""
    return list(getattr(settings, "PROVIDER_ALLOWED_COMMANDS", []))


def command_refusal(command: str, env_names: Iterable[str] = ()) -> str | None:
    """Why `PROVIDER_ALLOWED_COMMANDS` refuses a stdio server running `command` with an
    environment setting `env_names`, or None when it allows it (or is not set)."""
    allowed = allowed_commands()
    if not allowed:
        return None
    if command not in allowed:
        return (
            f"command {command!r} is not one that PROVIDER_ALLOWED_COMMANDS allows "
            f"({', '.join(allowed)}); use one of those, written exactly so, or ask the "
            "operator to add it to the setting."
        )
    if "PATH" in env_names:
        return (
            "its env sets PATH, which would choose the program the allowed command "
            f"{command!r} runs; remove PATH from its env while PROVIDER_ALLOWED_COMMANDS is set."
        )
    return None


def stdio_refusal(*, server: str, command: str) -> str:
    """What a caller who may not start processes is told when asking for stdio server
    `server` running `command`: why, and what to do instead."""
    program = repr(command) if command else "its command"
    return (
        f"{server!r} is a stdio server: Switchyard would run {program} as a process on its "
        "host, and only a superuser (or an operator, with manage.py) may register such a "
        "server or change its command, args, env or working directory. Ask a superuser to "
        "register it as a provider, or use a Streamable HTTP or SSE server."
    )
