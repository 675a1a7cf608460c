"""What every REST route shares: who is calling (`rest_caller`), how a refusal is raised and
answered (`ApiRefusal`, `ErrorOut`), and how a route documents the statuses it may answer."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Schema
from pydantic import Field

from mcp_endpoint.access.auth import admit
from mcp_endpoint.access.challenges import Refusal, scope_refusal
from mcp_endpoint.observability import request_metrics
from nodespecs.callers import Caller


class ErrorOut(Schema):
    """The body of every refusal: one message that says what was wrong and how to fix it."""

    error: str = Field(description="What was wrong with the request and how to fix it.")


# Refusals a keyed route can answer before it does anything: no or a bad key (401), a key
# without the route's scope (403), the key's per-minute limit spent (429).
KEYED = (401, 403, 429)
# A run's id in a route's path: a number the id column can hold (a larger one would reach the
# database and fail there, as a 500, rather than be refused as bad input).
RunId = Annotated[int, Field(ge=1, le=2**63 - 1, description="A run's id.")]
# A path parameter that does not match its declared type.
INVALID = 422
# A body that is not JSON (400), over the size limit (413) or does not match its declared
# schema (422).
INVALID_BODY = (400, 413, INVALID)


def responses(ok: Any, *errors: int) -> dict[int, Any]:
    """A route's documented responses: `ok` for 200 and the shared `ErrorOut` for each status
    in `errors`, so the OpenAPI schema lists every answer a client can get."""
    return {200: ok, **dict.fromkeys(errors, ErrorOut)}


class ApiRefusal(Exception):
    """A request refused with `status` and a message saying how to fix it (an `ErrorOut`)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        self.status, self.message, self.headers = status, message, headers or {}


def rest_caller(request: HttpRequest, scope: str) -> Caller:
    """Authenticate, rate-limit and check `scope`; raise `ApiRefusal` otherwise."""
    headers = {name.lower(): value for name, value in request.headers.items()}
    caller = admit(headers, request.META.get("REMOTE_ADDR", ""))
    if isinstance(caller, Refusal):
        raise ApiRefusal(caller.status, caller.message, caller.headers)
    request_metrics.rest_note(request, key=caller.actor)
    if not caller.has_scope(scope):
        refusal = scope_refusal(scope, f"Forbidden: this endpoint needs the scope {scope}.")
        raise ApiRefusal(refusal.status, refusal.message, refusal.headers)
    return caller
