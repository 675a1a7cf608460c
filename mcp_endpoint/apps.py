from django.apps import AppConfig


class McpEndpointConfig(AppConfig):
    """The MCP protocol server, REST API, API keys and rate limits."""

    name = "mcp_endpoint"
    verbose_name = "MCP endpoint"
