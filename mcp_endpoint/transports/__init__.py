"""How MCP messages reach the core and its answers go back: Streamable HTTP (the lean ASGI app and
the Django view), the legacy HTTP+SSE transport and stdio. They parse, call the core, and write."""
