"""At LOG_LEVEL=DEBUG the libraries that carry downstream calls (the MCP SDK, httpx2,
httpcore2) write no record of what a call sends: its arguments may hold what the history
masks (issue 25, item 17)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers import echo_http_server

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-the-secret-argument"

# A process configured as the server is, at LOG_LEVEL=DEBUG, that calls the echo peer's `echo`
# tool with SECRET and prints every log record it made (the handlers write to stderr).
CALL = """
import logging, sys
import django
django.setup()
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep())
from nodespecs.downstream import client as mcp_client
from nodespecs.downstream.client import Connection
transport, url, secret = sys.argv[1:]
connection = Connection(name="echo", transport=transport, url=url)
result = mcp_client.call_tool(connection, "echo", {"value": {"password": secret}})
assert not result.is_error, result
mcp_client.close_all()
print(len(records), "records")
print("\\n".join(records))
"""


@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_at_debug_a_downstream_call_leaves_no_log_record_holding_its_arguments(transport):
    env = {**os.environ, "LOG_LEVEL": "DEBUG", "DJANGO_SETTINGS_MODULE": "config.settings"}
    with echo_http_server(*(["--sse"] if transport == "sse" else [])) as url:
        finished = subprocess.run(
            [sys.executable, "-c", CALL, transport, url, SECRET],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    assert finished.returncode == 0, finished.stderr
    # The level is DEBUG: the process did log (Django's and asyncio's own debug lines).
    assert " records" in finished.stdout
    assert SECRET not in finished.stdout
    assert SECRET not in finished.stderr


def test_the_libraries_that_log_payloads_never_write_below_warning_whatever_the_level():
    env = {**os.environ, "LOG_LEVEL": "debug", "DJANGO_SETTINGS_MODULE": "config.settings"}
    probe = (
        "import logging, django; django.setup(); "
        "print(*[logging.getLogger(n).getEffectiveLevel() for n in "
        "('mcp.client.streamable_http', 'client', 'httpx2', 'httpcore2.http11', "
        "'sse_starlette.sse', 'switchyard.events')])"
    )
    finished = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert finished.returncode == 0, finished.stderr
    *libraries, own = map(int, finished.stdout.split())
    assert libraries == [30] * 5  # WARNING
    assert own == 10  # DEBUG: our own loggers follow LOG_LEVEL
