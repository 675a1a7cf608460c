"""Real MCP servers for tests, all local: the echo peer built with the Python SDK (see
`echo_server.py` for its fault-injection tools) and npm servers that
`.ci/install-mcp-peers.sh` installs into MCP_PEERS_HOME (default /tmp/mcp-peers).

Tests never reach the network: a missing npm server fails the test with the command that
installs it (CI runs it before the suite).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

PEERS_HOME = Path(os.environ.get("MCP_PEERS_HOME", "/tmp/mcp-peers"))
ECHO_SERVER = Path(__file__).with_name("echo_server.py")
INSTALL_SCRIPT = ".ci/install-mcp-peers.sh"


def echo_server_command(*args: str) -> list[str]:
    """The command that starts the echo peer over stdio (or HTTP, with `--http PORT`)."""
    return [sys.executable, str(ECHO_SERVER), *args]


def npm_server_command(package: str) -> list[str] | None:
    """The command that starts an installed npm MCP server without touching the network
    (`node` and the package's bin script), or None when it is not installed."""
    manifest = PEERS_HOME / "node_modules" / package / "package.json"
    node = shutil.which("node")
    if node is None or not manifest.is_file():
        return None
    bin_entry = json.loads(manifest.read_text(encoding="utf-8"))["bin"]
    script = bin_entry if isinstance(bin_entry, str) else next(iter(bin_entry.values()))
    return [node, str(manifest.parent / script)]


def require_npm_server(package: str) -> list[str]:
    """`npm_server_command`, failing the test with how to install the server if it is not."""
    command = npm_server_command(package)
    if command is None:
        pytest.fail(
            f"The npm MCP server {package} is not installed in {PEERS_HOME}: "
            f"run `bash {INSTALL_SCRIPT}` (CI runs it before the tests)."
        )
    return command


def npm_package_dir(package: str) -> Path:
    """The folder of an npm package the install script put in MCP_PEERS_HOME (for the files
    it ships), failing the test with how to install it if it is not there."""
    folder = PEERS_HOME / "node_modules" / package
    if not (folder / "package.json").is_file():
        pytest.fail(
            f"The npm package {package} is not installed in {PEERS_HOME}: "
            f"run `bash {INSTALL_SCRIPT}` (CI runs it before the tests)."
        )
    return folder


def npx_offline_env() -> dict[str, str]:
    """Variables under which `npx -y <package>` starts the copy the install script cached,
    offline. Set them in the test process: stdio servers inherit `npm_config_*`."""
    return {"npm_config_cache": str(PEERS_HOME / "npm-cache"), "npm_config_offline": "true"}


# An operator's graph file registering the filesystem server on one folder (its tools become
# TOOL specs once refreshed): `FILESYSTEM_PROVIDER_GRAPH.format(folder=json.dumps(path))`.
FILESYSTEM_PROVIDER_GRAPH = """
version: "1.0"
server: {{name: "fsProvider", version: "1.0.0"}}
mcpServers:
  filesystem:
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", {folder}]
tools:
  - name: fs_roots
    description: The folders the filesystem server may read.
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: roots}}
      - {{id: roots, type: mcp, server: filesystem, tool: list_allowed_directories, args: {{}},
          next: exit}}
      - {{id: exit, type: exit}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def echo_http_server(*args: str) -> Iterator[str]:
    """Run the echo peer as a Streamable HTTP server on 127.0.0.1; yields its MCP URL.

    `args` go to the server, e.g. `"--require-token", "secret"`, or `"--sse"` for an SSE
    server (whose URL then ends in /sse).
    """
    port = free_port()
    process = subprocess.Popen(
        echo_server_command("--http", str(port), *args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"The echo peer did not start on port {port}: "
                        f"{process.stderr.read().decode(errors='replace')}"
                    ) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/{'sse' if '--sse' in args else 'mcp'}"
    finally:
        process.terminate()
        process.wait(10)
        process.stderr.close()
