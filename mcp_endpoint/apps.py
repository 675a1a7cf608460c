from django.apps import AppConfig
from django.conf import settings


class McpEndpointConfig(AppConfig):
    """The MCP protocol server, REST API, API keys and rate limits."""

    name = "mcp_endpoint"
    verbose_name = "MCP endpoint"

    def ready(self) -> None:
        from graphs.services import RESERVED_TOOL_NAMES
        from mcp_endpoint import interaction
        from mcp_endpoint.dispatch import EXTRA_TOOLS
        from mcp_endpoint.tools import TOOLS

        interaction.configure(settings.SECRET_KEY)
        if settings.MCP_CONFORMANCE_FIXTURES:
            from mcp_endpoint import conformance

            conformance.install()
        # A workflow named like one of these would be hidden behind it.
        RESERVED_TOOL_NAMES.update(TOOLS, EXTRA_TOOLS)
