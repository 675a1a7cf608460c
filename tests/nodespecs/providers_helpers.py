"""Shared by the provider tests: providers backed by the echo peer or reached over HTTP, and a
pool per test."""

from __future__ import annotations

import pytest

from nodespecs.downstream import client
from nodespecs.models import Provider
from tests.peers import echo_server_command


@pytest.fixture
def servers():
    """Stops every downstream server the test started (and any left by an earlier test)."""
    client.close_all()
    yield
    client.close_all()


def echo_provider(name: str = "echo", **fields) -> Provider:
    """A saved provider that runs the echo peer over stdio."""
    command, *args = echo_server_command()
    provider = Provider(name=name, title="Echo peer", command=command, args=args, **fields)
    provider.full_clean()
    provider.save()
    return provider


def http_provider(url: str, *, name: str = "web", transport: str = "streamable_http", **fields):
    """A saved provider reached over HTTP (Streamable HTTP unless `transport` says SSE)."""
    provider = Provider(name=name, transport=transport, url=url, **fields)
    provider.full_clean()
    provider.save()
    return provider
