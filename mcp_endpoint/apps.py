import importlib

from django.apps import AppConfig
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class McpEndpointConfig(AppConfig):
    """The MCP protocol server, REST API, API keys and rate limits."""

    name = "mcp_endpoint"
    verbose_name = "MCP endpoint"

    def ready(self) -> None:
        from graphs.authoring.services import RESERVED_TOOL_NAMES
        from mcp_endpoint.features.tools import TOOLS
        from mcp_endpoint.protocol import interaction
        from mcp_endpoint.protocol.dispatch import EXTRA_TOOLS

        interaction.configure(settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS)
        for path in settings.MCP_EXTENSION_MODULES:
            install_extension(path)
        # A workflow named like one of these would be hidden behind it.
        RESERVED_TOOL_NAMES.update(TOOLS, EXTRA_TOOLS)


def install_extension(path: str) -> None:
    """Import the module at dotted `path` and call its `install()`, which adds tools,
    resources or prompts to the endpoint's registries (the conformance fixtures are one)."""
    try:
        module = importlib.import_module(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"MCP_EXTENSION_MODULES names {path!r}, which cannot be imported ({exc}): give "
            "dotted module paths importable from the server's working directory."
        ) from exc
    install = getattr(module, "install", None)
    if not callable(install):
        raise ImproperlyConfigured(
            f"MCP_EXTENSION_MODULES names {path!r}, which has no install() function: an "
            "extension module adds its tools, resources and prompts in install()."
        )
    install()
