"""`python manage.py mcp_stdio`: the MCP tools over stdio, for desktop clients."""

import logging
import sys

from django.core.management.base import BaseCommand

from mcp_endpoint.stdio import serve


class Command(BaseCommand):
    help = "Serve the MCP tools over stdin/stdout (newline-delimited JSON-RPC)."

    def handle(self, *args: object, **options: object) -> None:
        # stdout carries the protocol; logs go to stderr only.
        logging.getLogger().handlers = [logging.StreamHandler(sys.stderr)]
        for line in serve(sys.stdin):
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
