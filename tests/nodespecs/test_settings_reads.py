"""Values made from settings once (nodespecs/settings_reads.py) follow a changed setting."""

from __future__ import annotations

from django.test import override_settings

from nodespecs.settings_reads import read_once


def test_a_value_is_made_once_until_a_setting_changes(settings):
    made = []

    @read_once
    def limit() -> int:
        made.append(settings.MCP_MAX_BODY_BYTES)
        return settings.MCP_MAX_BODY_BYTES

    settings.MCP_MAX_BODY_BYTES = 100
    assert (limit(), limit()) == (100, 100)
    assert made == [100]
    settings.MCP_MAX_BODY_BYTES = 200  # pytest-django's fixture sends setting_changed
    assert limit() == 200
    with override_settings(MCP_MAX_BODY_BYTES=300):
        assert limit() == 300
    assert limit() == 200
    assert made == [100, 200, 300, 200]


def test_the_host_rule_follows_allowed_hosts(settings):
    from mcp_endpoint.transports.admission import _host_allowed

    settings.ALLOWED_HOSTS = ["one.example"]
    assert _host_allowed("one.example")
    assert not _host_allowed("two.example")
    settings.ALLOWED_HOSTS = ["two.example"]
    assert _host_allowed("two.example")
    assert not _host_allowed("one.example")
