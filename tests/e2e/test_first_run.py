"""The README's "Talk to it" against a live server (issue 25, item 18): after the first
command's `setup_demo`, its workflow calls work exactly as written, in this folder."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import LiveServer, start_server
from tests.peers import npx_offline_env, require_npm_server

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory) -> Iterator[tuple[LiveServer, str]]:
    require_npm_server("@modelcontextprotocol/server-filesystem")
    # npx starts the copy the install script cached, offline (the server's stdio children
    # inherit these).
    for server in start_server(
        tmp_path_factory.mktemp("first-run"), [("setup_demo",)], **npx_offline_env()
    ):
        printed = server.printed[0]
        key = re.search(r"Demo API key[^:]*: (sy_\S+)", printed)
        assert key, printed
        yield server, key.group(1)


def talk_to_it_calls() -> dict[str, str]:
    """The README's "Talk to it" commands that call a workflow, by workflow name."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Talk to it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = block.replace("\\\n", " ").splitlines()
    calls = {}
    for command in commands:
        found = re.search(r'"name": "(\w+)"', command)
        if command.startswith("curl") and "/invoke" in command and found:
            calls[found.group(1)] = command
    return calls


def run(command: str, server: LiveServer, key: str) -> dict:
    command = command.replace("http://127.0.0.1:8000", server.url)
    finished = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env={**server.env, "KEY": key},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


def test_the_readme_calls_the_example_workflows_and_they_answer(demo_server):
    server, key = demo_server
    calls = talk_to_it_calls()

    assert {"add_up_to", "count_files"} <= set(calls)
    added = run(calls["add_up_to"], server, key)["result"]
    assert added["isError"] is False
    assert added["structuredContent"] == {"sum": 55, "steps": 10}
    counted = run(calls["count_files"], server, key)["result"]
    assert counted["isError"] is False, counted
    assert counted["structuredContent"] == {"count": 3}
