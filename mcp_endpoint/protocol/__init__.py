"""The MCP protocol core, the same for every transport: a request parsed and executed for its
protocol era (`core`), what each method does (`dispatch`), its errors and JSON, the 2025
sessions, list-change notices, and the calls that ask the client for input midway."""
