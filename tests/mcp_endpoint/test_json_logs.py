"""`LOG_FORMAT=json`: one parsed line per request, run end and downstream failure, and no
secret in any line (issue 18, item 2).

The workflow calls a downstream server that gives its secrets away (its error echoes the
Authorization header; a stdio server prints its env), over the ASGI app with a bearer key.
Every line logged meanwhile, by any logger and at any level, is formatted by the formatter
LOG_FORMAT=json configures, parsed as JSON, and searched for the key, the header and the env
value.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings
from pythonjsonlogger.orjson import OrjsonFormatter

from graphs.authoring.files import graph_import
from graphs.models import Run
from mcp_endpoint.access.keys import api_key_create
from mcp_endpoint.models import Scope
from tests.graph_files import OPERATOR
from tests.mcp_endpoint.test_metrics import (
    modern_body,
    modern_headers,
    send_mcp,
    worker_threads,  # noqa: F401
)
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.nodespecs.test_secret_redaction import GRAPH  # a workflow calling the leaky peer
from tests.peers import echo_http_server, echo_server_command

pytestmark = [pytest.mark.timeout(60), pytest.mark.django_db(transaction=True)]

HEADER_SECRET = "header-sekrit-0123456789"
ENV_SECRET = "env-sekrit-9876543210"


@pytest.fixture
def json_lines(settings) -> Iterator[io.StringIO]:
    """LOG_FORMAT=json, and every line any logger writes meanwhile (DEBUG and up), formatted
    as that setting formats it."""
    settings.LOG_FORMAT = "json"
    options = dict(django_settings.LOGGING["formatters"]["json"])
    assert options.pop("()") == "pythonjsonlogger.orjson.OrjsonFormatter"
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(OrjsonFormatter(**options))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield buffer
    root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(params=["http error echoing the header", "stdio server printing its env"])
def leaky(request, servers) -> Iterator[str]:  # noqa: F811
    """A workflow calling a server that gives its secrets away; the provider's name."""
    if request.param.startswith("stdio"):
        command, *args = echo_server_command()
        env = {"ECHO_SERVER_LEAK_ENV": "API_TOKEN", "API_TOKEN": ENV_SECRET}
        report = graph_import(
            text=GRAPH.format(server=json.dumps({"command": command, "args": args, "env": env})),
            caller=OPERATOR,
        )
        yield report.providers["leaky"]
        return
    with echo_http_server("--reject-authorization", "200") as url:
        headers = {"Authorization": f"Bearer {HEADER_SECRET}"}
        server = {"type": "streamableHttp", "url": url, "headers": headers}
        report = graph_import(text=GRAPH.format(server=json.dumps(server)), caller=OPERATOR)
        yield report.providers["leaky"]


def parsed(buffer: io.StringIO) -> list[dict[str, Any]]:
    lines = buffer.getvalue().splitlines()
    assert lines, "nothing was logged, so nothing was checked"
    return [json.loads(line) for line in lines]


def events(lines: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("event") == name]


def test_a_failed_workflow_call_logs_its_request_run_and_failure_without_a_secret(
    leaky,
    json_lines,
    worker_threads,  # noqa: F811
):
    key, secret = api_key_create(name="tests", scopes=list(Scope.values))
    body = modern_body("tools/call", {"name": "call_leaky", "arguments": {}}, "call-1")
    headers = modern_headers(secret, "tools/call", "call_leaky")

    status, answer = asyncio.run(send_mcp(body, headers))

    assert status == 200, answer
    assert json.loads(answer)["result"]["isError"] is True
    lines = parsed(json_lines)
    run = Run.objects.get()
    [request] = [line for line in events(lines, "request") if line["method"] == "tools/call"]
    assert request["transport"] == "mcp"
    assert request["request_id"] == "call-1"
    assert request["tool"] == "call_leaky"
    assert request["key_id"] == f"key:{key.prefix}"
    assert request["status"] == 200
    assert request["outcome"] == "tool_error"
    assert request["era"] == "2026-07-28"
    assert request["duration_ms"] > 0
    assert request["level"] == "INFO"
    assert request["logger"] == "switchyard.events"
    assert "time" in request
    [run_end] = events(lines, "run_end")
    assert run_end["run_id"] == run.pk
    assert run_end["workflow"] == "call_leaky"
    assert run_end["version"] == run.version_id
    assert run_end["status"] == "failed"
    assert run_end["error_node"] == "call"
    assert run_end["node_count"] == run.node_count
    assert run_end["duration_ms"] >= 0
    failures = events(lines, "downstream_failure")
    assert failures, "the downstream failure was not logged"
    assert failures[0]["provider"] == leaky
    assert failures[0]["tool"] == "echo"
    assert failures[0]["error_class"] == "DownstreamError"
    assert failures[0]["error"]
    assert failures[0]["level"] == "WARNING"
    text = json_lines.getvalue()
    for value in (secret, secret.split("_", 2)[2], HEADER_SECRET, ENV_SECRET):
        assert value not in text


def test_rest_requests_are_logged_with_their_route_and_key_id(client, json_lines):
    key, secret = api_key_create(name="tests", scopes=["tools:read"])

    listed = client.get("/api/v1/mcp/tools", headers={"Authorization": f"Bearer {secret}"})
    refused = client.get("/api/v1/mcp/health", headers={"X-API-Key": secret})

    assert (listed.status_code, refused.status_code) == (200, 403)
    lines = events(parsed(json_lines), "request")
    assert [(line["method"], line["status"], line["outcome"]) for line in lines] == [
        ("GET /api/v1/mcp/tools", 200, "ok"),
        ("GET /api/v1/mcp/health", 403, "refused"),
    ]
    assert {line["key_id"] for line in lines} == {f"key:{key.prefix}"}
    assert {line["transport"] for line in lines} == {"rest"}
    assert secret not in json_lines.getvalue()


def test_the_plain_default_writes_no_line_per_request(client, caplog):
    caplog.set_level(logging.DEBUG, logger="switchyard.events")
    _, secret = api_key_create(name="tests", scopes=["tools:read"])

    assert django_settings.LOG_FORMAT == "plain"
    listed = client.get("/api/v1/mcp/tools", headers={"Authorization": f"Bearer {secret}"})

    assert listed.status_code == 200
    assert [r for r in caplog.records if r.name == "switchyard.events"] == []
