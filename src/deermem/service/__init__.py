"""deermem as a service: what the HTTP API and the MCP server share, and each of them."""
