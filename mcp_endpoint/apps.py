from django.apps import AppConfig
from django.conf import settings


class McpEndpointConfig(AppConfig):
    """The MCP protocol server, REST API, API keys and rate limits."""

    name = "mcp_endpoint"
    verbose_name = "MCP endpoint"

    def ready(self) -> None:
        from mcp_endpoint import interaction

        interaction.configure(settings.SECRET_KEY)
        if settings.MCP_CONFORMANCE_FIXTURES:
            from mcp_endpoint import conformance

            conformance.install()
