"""`tcalc mcp`: an MCP server on the Python API (server.py; the `[mcp]` extra). Imported only by
`tcalc mcp` (the plain CLI never loads the SDK)."""
