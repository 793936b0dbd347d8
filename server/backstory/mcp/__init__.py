"""``backstory mcp``: the engine as a Model Context Protocol server over stdio, for coding agents.

A view, like the CLI and the language server: it turns tool arguments into the features' structured values
(``Position``, ``SearchOptions``), answers with the JSON shapes of docs/protocol.md as structured content plus a
compact text rendering, and keeps the index fresh in the background with the language server's indexing job
(one writer at a time, under the index's write lock). See docs/mcp.md.
"""
