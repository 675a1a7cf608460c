"""`python manage.py mcp_stdio [--group SLUG]`: the MCP tools over stdio, for desktop
clients: all of them, or one workflow group's, as its graph file's own MCP server.

The option is `--group`, not `--server`: launchers that start a stdio server with its
arguments (the MCP Inspector among them) take `--server` as their own."""

import asyncio
import logging
import sys

from django.core.management.base import BaseCommand, CommandError, CommandParser

from graphs.execution.approvals.timer import timer as approval_timer
from graphs.execution.toolset import workflow_servers
from mcp_endpoint.transports.startup import settle_startup_objects
from mcp_endpoint.transports.stdio import serve


class Command(BaseCommand):
    help = "Serve the MCP tools over stdin/stdout (newline-delimited JSON-RPC)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--group",
            metavar="SLUG",
            help="Serve one workflow group's tools alone, as /mcp/SLUG does "
            "(`export_graph --list` shows each group's slug).",
        )

    def handle(self, *args: object, group: str | None = None, **options: object) -> None:
        servers = workflow_servers()
        if group is not None and group not in servers:
            known = ", ".join(servers) or "none (import a graph file first)"
            raise CommandError(f"No workflow group has the slug {group!r}; slugs: {known}.")
        # stdout carries the protocol; logs go to stderr only.
        logging.getLogger().handlers = [logging.StreamHandler(sys.stderr)]
        # MCP's stdio messages are UTF-8, whatever the locale says.
        sys.stdin.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
        sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]

        def write_line(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

        # A stdio server is a process of its own: approvals' timeouts fire here too.
        approval_timer.start()
        settle_startup_objects()

        async def read_line() -> str:
            return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

        try:
            asyncio.run(serve(read_line, write_line, group))
        finally:
            approval_timer.stop()
