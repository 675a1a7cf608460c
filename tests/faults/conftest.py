"""Fixtures of the fault tests: workflows whose nodes call the echo peer's fault tools, and a
count of what this process holds (child processes, open files, pooled sessions)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from graphs.authoring.files import graph_import
from nodespecs.downstream import client
from tests.graph_files import OPERATOR
from tests.peers import echo_server_command

# The nodes calling tools that never answer give up after this (the probe that follows takes
# up to PROBE_SECONDS more); the others allow for a server starting on a busy machine.
NODE_TIMEOUT = 1.5
QUIET_TOOLS = ("hang", "garbage", "sleep")
FAULT_TOOLS = ("hang", "garbage", "huge", "trickle", "exit", "crash", "pid", "sleep")


# `faulty_<tool>` calls a fault tool of the `faulty` server with the run's arguments;
# `healthy_add` adds on another server; `either` hangs on `faulty` or adds on `healthy`.
GRAPH = """
version: "1.0"
server: {{name: faultTests, version: "1.0.0"}}
mcpServers:
  faulty: {{command: {python}, args: [{peer}], env: {{ECHO_SERVER_FAULTS: "1", ROLE: faulty}}}}
  healthy: {{command: {python}, args: [{peer}], env: {{ROLE: healthy}}}}
tools:
{faulty_tools}
  - name: healthy_add
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: add}}
      - {{id: add, type: mcp, server: healthy, tool: add, args: {{a: $.entry.a, b: 1}}, next: exit}}
      - {{id: exit, type: exit}}
  - name: either
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: choose}}
      - id: choose
        type: switch
        conditions: [{{rule: {{var: $.entry.hang}}, target: hang}}, {{target: add}}]
      - {{id: hang, type: mcp, server: faulty, tool: hang, args: {{}}, timeout: {timeout},
          next: exit}}
      - {{id: add, type: mcp, server: healthy, tool: add, args: {{a: $.entry.a, b: 1}}, next: exit}}
      - {{id: exit, type: exit}}
"""
FAULTY_TOOL = """
  - name: faulty_{tool}
    inputSchema: {{type: object}}
    nodes:
      - {{id: entry, type: entry, next: call}}
      - {{id: call, type: mcp, server: faulty, tool: {tool}, args: $.entry, timeout: {timeout},
          next: exit}}
      - {{id: exit, type: exit}}"""


@pytest.fixture(autouse=True)
def _fresh_pool():
    """Each test starts its own servers and leaves none running."""
    client.close_all()
    yield
    client.close_all()


@pytest.fixture
def fault_workflows(db):
    """The fault workflows, imported."""
    python, peer = (json.dumps(part) for part in echo_server_command())
    faulty_tools = "".join(
        FAULTY_TOOL.format(tool=tool, timeout=NODE_TIMEOUT if tool in QUIET_TOOLS else 10)
        for tool in FAULT_TOOLS
    )
    graph = GRAPH.format(python=python, peer=peer, faulty_tools=faulty_tools, timeout=NODE_TIMEOUT)
    return graph_import(text=graph, caller=OPERATOR)


def descendants() -> set[int]:
    """The processes descending from this one (stdio servers run under `sh`)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue  # it ended meanwhile
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def server_processes() -> set[int]:
    """This process's descendants that run the test peer (its `sh` wrappers included): other
    suites in the same pytest process leave processes of their own (a browser that starts
    and ends renderers), which are no fault's doing."""
    peer = echo_server_command()[1].encode()
    running = set()
    for pid in descendants():
        try:
            if peer in Path(f"/proc/{pid}/cmdline").read_bytes():
                running.add(pid)
        except OSError:
            continue  # it ended meanwhile
    return running


@dataclass(frozen=True)
class Holdings:
    """What this process holds that a fault could leak."""

    processes: int
    files: int
    sessions: int

    @classmethod
    def now(cls) -> Holdings:
        return cls(len(server_processes()), len(os.listdir("/proc/self/fd")), client.pool_size())

    def within(self, baseline: Holdings) -> bool:
        """Nothing more than at `baseline` (a leak is more; what an earlier test was still
        letting go of at the baseline may be gone since)."""
        return (
            self.processes <= baseline.processes
            and self.files <= baseline.files
            and self.sessions <= baseline.sessions
        )


def wait_until(condition, seconds: float = 15.0, describe=lambda: "") -> None:
    """Wait for `condition`; on time out, fail with what `describe()` says of the state."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"condition not met in time {describe()}"
        time.sleep(0.05)
