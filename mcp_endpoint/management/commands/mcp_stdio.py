"""`python manage.py mcp_stdio`: the MCP tools over stdio, for desktop clients."""

import asyncio
import logging
import sys

from django.core.management.base import BaseCommand

from mcp_endpoint.stdio import serve


class Command(BaseCommand):
    help = "Serve the MCP tools over stdin/stdout (newline-delimited JSON-RPC)."

    def handle(self, *args: object, **options: object) -> None:
        # stdout carries the protocol; logs go to stderr only.
        logging.getLogger().handlers = [logging.StreamHandler(sys.stderr)]
        # MCP's stdio messages are UTF-8, whatever the locale says.
        sys.stdin.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
        sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]

        def write_line(line: str) -> None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

        async def read_line() -> str:
            return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

        asyncio.run(serve(read_line, write_line))
