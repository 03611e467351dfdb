"""``deermem mcp``: the MCP server (needs the ``mcp`` extra)."""

from __future__ import annotations

from pathlib import Path

import typer

from deermem.cli._context import CliContext
from deermem.cli._output import err_console

__all__ = ["mcp"]


def mcp(
    ctx: typer.Context,
    transport: str = typer.Option(
        "stdio", "--transport", help="`stdio` (the client starts the server) or `http`."
    ),
    host: str | None = typer.Option(
        None, "--host", help="Address to listen on (http) [default: 127.0.0.1]."
    ),
    port: int | None = typer.Option(
        None, "--port", min=1, max=65535, help="Port to listen on (http) [default: 8766]."
    ),
    state_dir: Path | None = typer.Option(
        None,
        "--state-dir",
        file_okay=False,
        envvar="DEERMEM_STATE_DIR",
        help="Where the tokens file is (http) [default: ROOT/.server; required with a "
        "database store unless --tokens-file is given].",
    ),
    tokens_file: Path | None = typer.Option(
        None,
        "--tokens-file",
        dir_okay=False,
        envvar="DEERMEM_TOKENS_FILE",
        help="The tokens file (http) [default: STATE_DIR/tokens.json].",
    ),
    max_body_bytes: int = typer.Option(
        2 * 1024 * 1024, "--max-body-bytes", min=1024, help="Largest request body (http)."
    ),
    max_sessions_per_token: int = typer.Option(
        32,
        "--max-sessions-per-token",
        min=1,
        help="Open MCP sessions one token may hold (http; 429 beyond).",
    ),
    allowed_host: list[str] = typer.Option(
        [],
        "--allowed-host",
        envvar="DEERMEM_ALLOWED_HOSTS",
        metavar="NAME[:PORT]",
        help="A host name requests may use besides localhost, 127.0.0.1 and [::1] (http; "
        "repeatable); other names get 421.",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning, error."),
) -> None:
    """Serve the memory to MCP clients (Claude Desktop, Cursor, Claude Code ...).

    Tools: `memory_search`, `memory_context`, `memory_add`, `memory_update`,
    `memory_forget`, `memory_restore`, `memory_why`. They work on the memory of
    `--user` and `--agent` (the global options); over `--transport http`, a
    token bound to one user reaches that user's memory when no `--user` is
    given. Over http every request needs `Authorization: Bearer <token>` once a
    token was added (`deermem token add`; revoking every token does not open
    the server again), and a server without tokens listens on loopback only,
    answering loopback host names and `--allowed-host` only. Logs go to stderr. Needs
    `pip install 'deermem[mcp]'`; see docs/mcp.md.

    Example: `deermem --root ~/memory --user alice --agent claude mcp`
    """
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("expected `stdio` or `http`", param_hint="--transport")
    if transport == "stdio" and (host is not None or port is not None):
        raise typer.BadParameter("applies to --transport http only", param_hint="--host/--port")
    if transport == "stdio" and allowed_host:
        raise typer.BadParameter("applies to --transport http only", param_hint="--allowed-host")
    try:
        from deermem.service.http.limits import ServerLimits
        from deermem.service.http.settings import ServerSettings
        from deermem.service.mcp.run import serve as run_server
        from deermem.service.mcp.settings import DEFAULT_PORT, McpSettings
    except ImportError as error:  # the mcp SDK missing
        err_console.print(
            f"[bold red]error:[/] `deermem mcp` needs the `mcp` extra ({error.name} is not "
            "installed): pip install 'deermem[mcp]'"
        )
        raise typer.Exit(1) from None
    state = ctx.find_root().obj
    options = state if isinstance(state, CliContext) else CliContext()
    settings = McpSettings(
        transport="http" if transport == "http" else "stdio",
        server=ServerSettings(
            host=host or "127.0.0.1",
            port=port or DEFAULT_PORT,
            root=None if options.root is None else str(options.root),
            config_file=None if options.config_file is None else str(options.config_file),
            state_dir=None if state_dir is None else str(state_dir),
            tokens_file=None if tokens_file is None else str(tokens_file),
            limits=ServerLimits(max_body_bytes=max_body_bytes),
            log_level=log_level.lower(),
            allowed_hosts=tuple(allowed_host),
        ),
        user=options.user,
        agent=options.agent,
        max_sessions_per_token=max_sessions_per_token,
    )
    run_server(settings)
