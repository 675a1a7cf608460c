"""A provider's `sse_read_timeout`: how long an SSE or Streamable HTTP connection waits for the
server's next event. Validated, carried by the connection, and used by the transport: an answer
slower than it fails, one within it arrives (the echo peer's `sleep`, over both transports)."""

from __future__ import annotations

import html

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from nodespecs.downstream import client
from nodespecs.models import Provider
from tests.nodespecs.providers_helpers import servers  # noqa: F401
from tests.peers import echo_http_server

pytestmark = [pytest.mark.timeout(60)]

TRANSPORTS = [((), "streamable_http"), (("--sse",), "sse")]


def provider_with(url: str, transport: str, sse_read_timeout: float) -> Provider:
    return Provider(name="web", transport=transport, url=url, sse_read_timeout=sse_read_timeout)


class TestTheSetting:
    def test_the_default_is_the_mcp_sdks_300_seconds(self):
        provider = Provider(name="web", transport="sse", url="https://h/sse")
        assert provider.sse_read_timeout == 300
        assert provider.connection().sse_read_timeout == 300

    @pytest.mark.parametrize("seconds", [0, 0.5, -1, 3601])
    def test_it_is_at_least_a_second_and_at_most_an_hour(self, db, seconds):
        provider = provider_with("https://h/mcp", "streamable_http", seconds)
        with pytest.raises(ValidationError) as refused:
            provider.full_clean()
        assert list(refused.value.message_dict) == ["sse_read_timeout"]

    def test_the_connection_carries_it_and_a_change_is_another_session(self):
        short = provider_with("https://h/mcp", "streamable_http", 5).connection()
        long = provider_with("https://h/mcp", "streamable_http", 600).connection()
        assert short.sse_read_timeout == 5
        # A live session keeps the read timeout it started with: a new value needs a new one.
        assert short != long

    def test_a_connection_refuses_a_read_timeout_that_is_not_positive(self):
        with pytest.raises(ValueError, match="sse_read_timeout must be positive"):
            client.Connection(name="x", transport="sse", url="https://h/sse", sse_read_timeout=0)


@pytest.mark.slow
@pytest.mark.usefixtures("servers")
class TestTheTransport:
    @pytest.mark.parametrize(("flag", "transport"), TRANSPORTS)
    def test_an_answer_slower_than_the_read_timeout_fails(self, flag, transport):
        with echo_http_server(*flag) as url:
            connection = provider_with(url, transport, 1).connection()
            with pytest.raises(client.DownstreamError):
                client.call_tool(connection, "sleep", {"seconds": 2.5}, timeout=10)

    @pytest.mark.parametrize(("flag", "transport"), TRANSPORTS)
    def test_an_answer_within_the_read_timeout_arrives(self, flag, transport):
        with echo_http_server(*flag) as url:
            connection = provider_with(url, transport, 6).connection()
            result = client.call_tool(connection, "sleep", {"seconds": 2.5}, timeout=10)
        assert result.content[0].text == "slept 2.5"


class TestTheAdmin:
    def test_the_form_offers_it_and_an_empty_field_keeps_the_value(self, client, admin_user):
        provider = Provider.objects.create(
            name="web", transport="sse", url="https://h/sse", sse_read_timeout=42
        )
        client.force_login(admin_user)
        url = reverse("admin:nodespecs_provider_change", args=[provider.pk])
        page = html.unescape(client.get(url).content.decode())
        assert 'name="sse_read_timeout" value="42.0"' in page
        assert "HTTP and SSE: how many seconds to wait for the server's next event" in page

        data = {"name": "web", "transport": "sse", "url": "https://h/sse", "timeout_seconds": "30"}
        assert client.post(url, {**data, "sse_read_timeout": ""}).status_code == 302
        provider.refresh_from_db()
        assert provider.sse_read_timeout == 42
        assert client.post(url, {**data, "sse_read_timeout": "90"}).status_code == 302
        provider.refresh_from_db()
        assert provider.sse_read_timeout == 90
        refused = client.post(url, {**data, "sse_read_timeout": "0"})
        assert "Ensure this value is greater than or equal to 1" in refused.content.decode()
