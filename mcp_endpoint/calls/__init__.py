"""A workflow's `tools/call`: its run followed and told as MCP messages, its result shaped for
the caller's era, and the tasks extension that answers a long call with a handle."""
