"""A stand-in OpenTelemetry collector for benchmarks: `python bench/otlp_sink.py PORT`.

It takes OTLP over HTTP (`POST /v1/traces`, protobuf) as a collector does and answers 200 with
an empty export response, keeping the bodies; `GET /spans` decodes them then and answers the
number of spans received, so a benchmark can check that its server exported every span (a
BatchSpanProcessor whose queue is full drops spans, which would make tracing look cheaper
than it is). Decoding waits for that request so the sink takes as little CPU as it can while
the server under test is measured: a real collector runs on another host.
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

BODIES: list[bytes] = []
EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()


def spans_in(body: bytes) -> int:
    """The number of spans in one OTLP export request."""
    request = ExportTraceServiceRequest.FromString(body)
    return sum(
        len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans
    )


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        BODIES.append(self.rfile.read(length))
        self._answer(EMPTY_RESPONSE, "application/x-protobuf")

    def do_GET(self) -> None:
        count = sum(spans_in(body) for body in BODIES)
        self._answer(f"{count}\n".encode(), "text/plain")

    def _answer(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
