"""The client for downstream MCP servers: connections, the pool of live sessions, transports,
message limits, the egress policy, call lineage, and what to say when a server fails."""
