"""Providers: external MCP servers registered here, whose tools become TOOL node specs; their
encrypted secrets and which ones a builder may use."""
