"""ASGI entry point: `uvicorn config.asgi:application`.

`/mcp` goes to the lean MCP app (mcp_endpoint/asgi.py); everything else to Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

from mcp_endpoint.asgi import mcp_app  # noqa: E402  (needs Django set up first)


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/mcp":
        await mcp_app(scope, receive, send)
    else:
        await django_application(scope, receive, send)
