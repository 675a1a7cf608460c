"""The `/metrics` page that Prometheus scrapes: who may read it, and what it shows (every
process's metrics on this host, with the waiting runs and the Celery queue read now)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from graphs.execution.telemetry import RunQueueCollector
from mcp_endpoint.access.auth import admit, presented_key
from mcp_endpoint.access.challenges import REALM, Refusal, scope_refusal
from mcp_endpoint.access.client_addresses import allow_listed
from mcp_endpoint.models import Scope
from nodespecs import telemetry


def metrics_refusal(headers: Mapping[str, str], address: str) -> Refusal | None:
    """Why a scrape is refused (401 without a key or with a bad one, 403 without the scope
    metrics:read, 429 over the key's limit), or None when it may read the metrics: a client in
    `METRICS_ALLOWED_ADDRESSES` needs no key (its address read as `client_addresses.allow_listed`
    reads it, never from a header anyone may write)."""
    if allow_listed(address, headers, settings.METRICS_ALLOWED_ADDRESSES):
        return None
    if presented_key(headers) is None and not settings.MCP_ANONYMOUS_SCOPES:
        return Refusal(
            401,
            "Unauthorized: /metrics needs an API key with the scope metrics:read "
            "('Authorization: Bearer KEY'), or a client address in METRICS_ALLOWED_ADDRESSES "
            "(read from X-Forwarded-For only when FORWARDED_ALLOW_IPS names the proxy).",
            {"WWW-Authenticate": REALM},
        )
    caller = admit(headers, address)
    if isinstance(caller, Refusal):
        return caller
    if not caller.has_scope(Scope.METRICS_READ):
        return scope_refusal(
            Scope.METRICS_READ,
            "Forbidden: /metrics needs the scope metrics:read, which this key does not have "
            "(or a client address in METRICS_ALLOWED_ADDRESSES).",
        )
    return None


class _Forward(Collector):
    """Another registry's metrics, within the registry of one scrape."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Any:
        return self.registry.collect()


def exposition() -> HttpResponse:
    """The metrics in Prometheus's text format: every process's on this host in multiprocess
    mode (else this process's), with the waiting runs and the Celery queue read now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Forward(telemetry.scrape_registry()))
    registry.register(RunQueueCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
