"""deermem as an MCP server (``deermem mcp``): memory tools for any MCP client.

Built on the official MCP SDK (``mcp`` 2.x, the ``mcp`` extra:
``uv sync --extra mcp``). The server offers seven tools —
``memory_search``, ``memory_context``, ``memory_add``, ``memory_update``,
``memory_forget``, ``memory_restore``, ``memory_why`` — each a thin shell
over one :class:`~deermem.memory.Memory` method, with typed (structured)
results and truthful annotations (:mod:`deermem.service.mcp.server`). It
runs over stdio (the client starts it) or streamable HTTP behind the HTTP
API's bearer tokens (:mod:`deermem.service.mcp.auth`); :func:`~deermem.service.mcp.server.serve`
starts it. The user and agent come from the server's configuration or the
token, never from a tool argument. See docs/mcp.md.
"""

from deermem.service.mcp.auth import Caller, caller_for
from deermem.service.mcp.server import TOOL_NAMES, create_mcp_server

__all__ = ["TOOL_NAMES", "Caller", "caller_for", "create_mcp_server"]
