"""ASGI entry point: `uvicorn config.asgi:application`.

`/mcp` goes to the lean MCP app (mcp_endpoint/asgi.py), the legacy HTTP+SSE transport's
`/sse` and `/messages` to its sibling; everything else to Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

from mcp_endpoint.asgi import mcp_app, sse_app  # noqa: E402  (needs Django set up first)
from mcp_endpoint.sse import MESSAGES_PATH, STREAM_PATH  # noqa: E402

LEGACY_SSE_PATHS = (STREAM_PATH, MESSAGES_PATH)


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/mcp":
        await mcp_app(scope, receive, send)
    elif scope["type"] == "http" and scope["path"] in LEGACY_SSE_PATHS:
        await sse_app(scope, receive, send)
    else:
        await django_application(scope, receive, send)
