"""ASGI entry point: `uvicorn config.asgi:application`.

`/mcp` and each workflow group's `/mcp/<slug>` go to the lean MCP app
(mcp_endpoint/transports/asgi.py), the legacy HTTP+SSE transport's `/sse` and `/messages` to its
sibling; everything else to Django, with its body bounded.
"""

import asyncio
import json
import os
import sys

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

# A run busy in the engine holds the interpreter for up to the switch interval each time
# another thread asks for it; a short request asks dozens of times (each query, each hop to
# and from the event loop), so 5 ms (the default) made a three-step workflow take 0.4 s
# beside two long runs. 1 ms costs the long runs little and the short ones much less.
sys.setswitchinterval(0.001)

from graphs.execution.approvals.timer import timer as approval_timer  # noqa: E402
from graphs.execution.resuming.going_on import resumed_runs_wait  # noqa: E402
from mcp_endpoint.transports.asgi import mcp_app, sse_app  # noqa: E402  (needs Django set up first)
from mcp_endpoint.transports.sse import MESSAGES_PATH, STREAM_PATH  # noqa: E402
from mcp_endpoint.transports.startup import settle_startup_objects  # noqa: E402

LEGACY_SSE_PATHS = (STREAM_PATH, MESSAGES_PATH)
# `/mcp/<slug>`: the MCP server of one workflow group (its graph file).
GROUP_PREFIX = "/mcp/"
# How long a shutting-down server lets the runs it resumed after a decision finish.
SHUTDOWN_GRACE_SECONDS = 10


async def application(scope, receive, send):
    if scope["type"] == "http" and scope["path"] == "/mcp":
        await mcp_app(scope, receive, send)
    elif scope["type"] == "http" and scope["path"].startswith(GROUP_PREFIX):
        await mcp_app(scope, receive, send, group=scope["path"][len(GROUP_PREFIX) :])
    elif scope["type"] == "http" and scope["path"] in LEGACY_SSE_PATHS:
        await sse_app(scope, receive, send)
    elif scope["type"] == "http":
        await _bounded_django(scope, receive, send)
    elif scope["type"] == "lifespan":
        await _lifespan(receive, send)
    else:
        await django_application(scope, receive, send)


async def _lifespan(receive, send):
    """Start what works beside the requests: the timer of approvals' timeouts, which must run
    from the start (after a restart, waiting runs' timeouts are due whether or not a request
    comes); and settle the objects made at startup out of the garbage collector's walks."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            approval_timer.start()
            settle_startup_objects()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            # A run a reviewer just sent on finishes rather than being cut short (bounded:
            # one still going after this is failed by the reaper, as any lost run).
            await asyncio.to_thread(resumed_runs_wait, SHUTDOWN_GRACE_SECONDS)
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _bounded_django(scope, receive, send):
    """Django with a ceiling on what a request may send: MAX_REQUEST_BODY_BYTES.

    Django's ASGI handler reads a whole body before any view runs, spooling it to disk past a
    few megabytes, and checks only a declared Content-Length against its own limit; a
    chunked upload of any size to any page (the sign-in page included) would be read to the
    end. Over the ceiling, the request is answered 413 and the rest is not read.
    """
    limit = settings.MAX_REQUEST_BODY_BYTES
    declared = dict(scope["headers"]).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        await _too_large(scope, send, limit)
        return
    received = 0
    over = False

    async def bounded_receive():
        nonlocal received, over
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                over = True
                return {"type": "http.disconnect"}  # Django stops reading and answers nothing
        return message

    await django_application(scope, bounded_receive, send)
    if over:
        await _too_large(scope, send, limit)


async def _too_large(scope, send, limit):
    message = (
        f"Request body too large: the limit is {limit} bytes (MAX_REQUEST_BODY_BYTES). "
        "Send less, or raise the setting."
    )
    if scope["path"].startswith("/api/"):  # the REST API's refusals are JSON ErrorOut bodies
        body, content_type = json.dumps({"error": message}).encode(), b"application/json"
    else:
        body, content_type = message.encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
