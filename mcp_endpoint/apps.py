from django.apps import AppConfig
from django.conf import settings


class McpEndpointConfig(AppConfig):
    """The MCP protocol server, REST API, API keys and rate limits."""

    name = "mcp_endpoint"
    verbose_name = "MCP endpoint"

    def ready(self) -> None:
        from mcp_endpoint.features import extensions
        from mcp_endpoint.jsonrpc import interaction

        interaction.configure(settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS)
        # A server that names an extension it cannot load stops here, saying which.
        extensions.installed()

    def reserved_tool_names(self) -> frozenset[str]:
        """The tool names this app serves itself, which no workflow may take (it would be
        hidden behind them): graphs asks every app for its own (graphs/authoring/services.py)."""
        from mcp_endpoint.features import extensions
        from mcp_endpoint.features.tools import TOOLS

        return frozenset({*TOOLS, *extensions.installed().tools})
