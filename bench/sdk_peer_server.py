"""The peer of `bench/mcp_endpoint.py`: the same `get_node_details` tool on the official SDK.

An `MCPServer` (the SDK v2 high-level server, formerly FastMCP) with one tool, `get_node_details`,
answering from the same catalog as Switchyard: the built-in spec files are parsed by our own loader
and served from an in-memory `nodespecs.knowledge.registry.Registry` through
`nodespecs.knowledge.service.get_node_details` (no database). Served by uvicorn through the SDK's
streamable HTTP app, with JSON responses (as Switchyard answers):

    .venv/bin/uvicorn bench.sdk_peer_server:app --host 127.0.0.1 --port 8801 --workers 2

`SDK_PEER_STATELESS=true` (the default) serves the stateless transport (any worker may answer
any request); `false` keeps sessions in the process's memory, so it needs one worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Our catalog loader and registry import Django modules (settings, cache); nothing here
# touches the database.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django  # noqa: E402

django.setup()

from mcp.server.mcpserver import MCPServer  # noqa: E402

from mcp_endpoint.features.tools import TOOLS  # noqa: E402
from nodespecs.knowledge import service as knowledge  # noqa: E402
from nodespecs.knowledge.catalog import read_builtin_catalog  # noqa: E402
from nodespecs.knowledge.registry import Registry  # noqa: E402
from nodespecs.knowledge.specformat import dump_spec_document  # noqa: E402

STATELESS = os.environ.get("SDK_PEER_STATELESS", "true").strip().lower() in {"1", "true", "yes"}

REGISTRY = Registry([dump_spec_document(document) for document in read_builtin_catalog()])

server: MCPServer = MCPServer(name="switchyard-sdk-peer", log_level="WARNING")


@server.tool(description=TOOLS["get_node_details"].description)
def get_node_details(
    nodes: list[dict], include_examples: bool = True, include_schemas: bool = True
) -> dict[str, Any]:
    """Detailed specifications for workflow nodes (the same data as Switchyard's tool).

    `dict[str, Any]` (not a bare `dict`) makes the SDK send `structuredContent` as ours does.
    """
    return {
        "nodes": knowledge.get_node_details(
            nodes, include_examples, include_schemas, registry=REGISTRY
        )
    }


app = server.streamable_http_app(json_response=True, stateless_http=STATELESS)
