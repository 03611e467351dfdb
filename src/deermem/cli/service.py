"""deermem as a service: ``deermem serve`` (the HTTP API), ``deermem mcp`` (the MCP
server) and ``deermem token`` (the bearer tokens both accept).

The servers need extras (``server``: FastAPI and uvicorn; ``mcp``: the MCP
SDK), so their modules are imported by the command that runs them, and a
missing extra is one line naming it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich import box
from rich.table import Table

from deermem.cli.output import (
    JSON_OPTION,
    STATE_DIR_OPTION,
    TOKENS_FILE_OPTION,
    cli_context,
    err_console,
    escape,
    out_console,
    print_json,
    server_places,
    state_dir_option,
    tokens_file_option,
)
from deermem.model import check_user_id, parse_moment
from deermem.service.settings import (
    DEFAULT_MCP_PORT,
    McpSettings,
    ServerLimits,
    ServerSettings,
    allowed_hosts_from_environment,
)
from deermem.service.tokens import TokenFile, TokenRecord

__all__ = ["mcp", "serve", "token_app"]


def _allowed_host_option(help: str) -> Any:
    """``--allowed-host``: one flag for both servers (and one variable: :func:`_allowed_hosts`)."""
    return typer.Option([], "--allowed-host", metavar="NAME[:PORT]", help=help)


def _allowed_hosts(given: list[str]) -> tuple[str, ...]:
    """The names given with ``--allowed-host``, else those of ``DEERMEM_ALLOWED_HOSTS``.

    The variable is read here, not by click, which split it on spaces only and
    named ``--allowed-host`` for a bad entry of it: it is a list as every list
    variable is written (JSON or comma-separated), and its errors name it.
    """
    return tuple(given) or allowed_hosts_from_environment(os.environ)


_SERVE_ALLOWED_HOST_OPTION = _allowed_host_option(
    "A host name requests may use besides localhost, 127.0.0.1 and [::1] "
    "(repeatable), e.g. the name a reverse proxy forwards; other names get 421."
)
_MCP_ALLOWED_HOST_OPTION = _allowed_host_option(
    "A host name requests may use besides localhost, 127.0.0.1 and [::1] (http; "
    "repeatable); other names get 421."
)
_LOG_LEVELS = ("debug", "info", "warning", "error")


def _log_level(value: str) -> str:
    """``--log-level`` in lower case, or a usage error naming the levels there are."""
    level = value.lower()
    if level not in _LOG_LEVELS:
        raise typer.BadParameter(f"{value!r}: expected debug, info, warning or error")
    return level


_LOG_LEVEL_OPTION = typer.Option(
    "info", "--log-level", callback=_log_level, help="debug, info, warning, error."
)
_SERVE_STATE_DIR_OPTION = state_dir_option(
    "The server's tokens and job records, shared by its workers "
    "[default: `<root>/.server`; required with a database store]."
)
_MCP_STATE_DIR_OPTION = state_dir_option(
    "Where the tokens file is (http) [default: ROOT/.server; required with a "
    "database store unless --tokens-file is given]."
)
_MCP_TOKENS_FILE_OPTION = tokens_file_option(
    "The tokens file (http) [default: STATE_DIR/tokens.json]."
)


def _needs_extra(command: str, extra: str, error: ImportError) -> NoReturn:
    """Say in one line which extra a server command needs (and which module is missing)."""
    err_console.print(
        f"[bold red]error:[/] {command} needs the `{extra}` extra ({error.name} is not "
        f"installed): uv sync --extra {extra}"
    )
    raise typer.Exit(1) from None


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="Worker processes."),
    state_dir: Path | None = _SERVE_STATE_DIR_OPTION,
    tokens_file: Path | None = TOKENS_FILE_OPTION,
    max_body_bytes: int = typer.Option(
        2 * 1024 * 1024, "--max-body-bytes", min=1024, help="Largest request body (413 beyond)."
    ),
    max_pending_jobs: int = typer.Option(
        64, "--max-pending-jobs", min=1, help="Conversations queued per worker (429 beyond)."
    ),
    max_pending_jobs_per_user: int = typer.Option(
        8,
        "--max-pending-jobs-per-user",
        min=1,
        help="A user's share of a worker's queue (429 beyond; others still get in).",
    ),
    max_waits_per_token: int = typer.Option(
        16,
        "--max-waits-per-token",
        min=1,
        help="Requests of one token waiting with ?wait=true at once, per worker (429 beyond).",
    ),
    allowed_host: list[str] = _SERVE_ALLOWED_HOST_OPTION,
    header_timeout: float = typer.Option(
        10.0,
        "--header-timeout",
        min=0.1,
        help="Seconds a connection may take to send a request's headers before it is closed.",
    ),
    log_level: str = _LOG_LEVEL_OPTION,
) -> None:
    """Serve the memory over HTTP (FastAPI + uvicorn; `uv sync --extra server`).

    Every user and agent is addressable under `/v1/users/{user}/agents/{agent}/...`;
    the OpenAPI document is at `/v1/openapi.json`. Once a token was added
    (`deermem token add`), every request needs `Authorization: Bearer <token>`
    and may address only the token's users, also after every token is revoked;
    without any, the server listens on loopback only. On loopback it answers
    only loopback host names and `--allowed-host` (DNS rebinding). See
    docs/server.md.

    Example: `deermem --root ./memories serve --port 8765 --workers 2`
    """
    try:
        # The `server` extra (FastAPI, uvicorn) may be missing: say so in one line.
        from deermem.service.http.run import serve as run_server
    except ImportError as error:  # fastapi or uvicorn missing
        _needs_extra("the server", "server", error)
    settings = ServerSettings(
        **server_places(ctx, state_dir, tokens_file, serving=True),
        host=host,
        port=port,
        workers=workers,
        limits=ServerLimits(
            max_body_bytes=max_body_bytes,
            max_pending_jobs=max_pending_jobs,
            max_pending_jobs_per_user=max_pending_jobs_per_user,
            max_waits_per_token=max_waits_per_token,
            header_timeout_seconds=header_timeout,
        ),
        log_level=log_level.lower(),
        allowed_hosts=_allowed_hosts(allowed_host),
    )
    run_server(settings)


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
    state_dir: Path | None = _MCP_STATE_DIR_OPTION,
    tokens_file: Path | None = _MCP_TOKENS_FILE_OPTION,
    max_body_bytes: int = typer.Option(
        2 * 1024 * 1024, "--max-body-bytes", min=1024, help="Largest request body (http)."
    ),
    max_sessions_per_token: int = typer.Option(
        32,
        "--max-sessions-per-token",
        min=1,
        help="Open MCP sessions one token may hold (http; 429 beyond).",
    ),
    allowed_host: list[str] = _MCP_ALLOWED_HOST_OPTION,
    log_level: str = _LOG_LEVEL_OPTION,
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
    `uv sync --extra mcp`; see docs/mcp.md.

    Example: `deermem --root ~/memory --user alice --agent claude mcp`
    """
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("expected `stdio` or `http`", param_hint="--transport")
    if transport == "stdio" and (host is not None or port is not None):
        raise typer.BadParameter("applies to --transport http only", param_hint="--host/--port")
    if transport == "stdio" and allowed_host:
        raise typer.BadParameter("applies to --transport http only", param_hint="--allowed-host")
    try:
        # The `mcp` extra (the MCP SDK) may be missing: say so in one line.
        from deermem.service.mcp.server import serve as run_server
    except ImportError as error:  # the mcp SDK missing
        _needs_extra("`deermem mcp`", "mcp", error)
    options = cli_context(ctx)
    settings = McpSettings(
        transport="http" if transport == "http" else "stdio",
        server=ServerSettings(
            **server_places(ctx, state_dir, tokens_file, serving=True),
            host=host or "127.0.0.1",
            port=port or DEFAULT_MCP_PORT,
            limits=ServerLimits(max_body_bytes=max_body_bytes),
            log_level=log_level.lower(),
            # Under stdio there are no host names: the variable (set for http) is not read.
            allowed_hosts=_allowed_hosts(allowed_host) if transport == "http" else (),
        ),
        user=options.user,
        agent=options.agent,
        max_sessions_per_token=max_sessions_per_token,
    )
    run_server(settings)


# --- tokens ----------------------------------------------------------------------------

token_app = typer.Typer(
    help="Bearer tokens for `deermem serve` and `deermem mcp --transport http`: add, list, revoke.",
    no_args_is_help=True,
)


def _tokens(ctx: typer.Context, state_dir: Path | None, tokens_file: Path | None) -> TokenFile:
    settings = ServerSettings(**server_places(ctx, state_dir, tokens_file, serving=False))
    return TokenFile(settings.tokens_path(settings.load_config()))


@token_app.command("add")
def add(
    ctx: typer.Context,
    user: list[str] = typer.Option(
        [], "--user", "-u", help="A user id the token may address (repeatable)."
    ),
    admin: bool = typer.Option(False, "--admin", help="May address every user."),
    name: str = typer.Option("", "--name", help="A label for people, e.g. 'laptop'."),
    expires: str | None = typer.Option(
        None,
        "--expires",
        metavar="WHEN",
        help="Refuse the token from WHEN on: a span from now (12h, 30d, 4w) or an ISO date "
        "or time (2027-01-31, 2027-01-31T12:00:00Z; UTC unless it says otherwise) "
        "[default: never].",
    ),
    state_dir: Path | None = STATE_DIR_OPTION,
    tokens_file: Path | None = TOKENS_FILE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Make a token and print it — once: only its SHA-256 is stored.

    `--user` (repeatable) limits the token to those users; `--admin` lets it
    address every user, and is refused together with `--user`.

    Example: `deermem token add --user alice --name laptop --expires 30d`
    """
    if not user and not admin:
        raise typer.BadParameter("give at least one --user, or --admin")
    if user and admin:
        # An admin token addresses every user: the --user would be dropped unsaid, and
        # whoever asked for a token limited to those users would hold one that is not.
        raise typer.BadParameter(
            f"--admin and --user {', '.join(user)} conflict: an admin token may address "
            "every user; give one or the other"
        )
    for one in user:  # a token for an id no request can name would never work
        check_user_id(one)
    now = datetime.now(UTC)
    try:
        expires_at = (
            None if expires is None else parse_moment(expires, now, option="--expires", ahead=True)
        )
        if expires_at is not None and expires_at <= now:
            raise ValueError(f"--expires {expires!r}: the time is not in the future")
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--expires") from None
    tokens = _tokens(ctx, state_dir, tokens_file)
    issued = tokens.add(users=user, admin=admin, name=name, now=now, expires_at=expires_at)
    if as_json:
        print_json({**issued.record.public(), "token": issued.token})
        return
    who = "every user" if admin else ", ".join(user)
    until = "" if issued.record.expires_at is None else f", until {issued.record.expires_at}"
    err_console.print(
        f"token {issued.record.token_id} for {escape(who)}{until} added to "
        f"{escape(str(tokens.path))}; it is shown only now:"
    )
    typer.echo(issued.token)


@token_app.command("list")
def list_tokens(
    ctx: typer.Context,
    state_dir: Path | None = STATE_DIR_OPTION,
    tokens_file: Path | None = TOKENS_FILE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """List the tokens: id, name, users, created, expires (never a token or its digest).

    An expired token stays listed (and refused) until it is revoked.

    Example: `deermem token list --json`
    """
    tokens = _tokens(ctx, state_dir, tokens_file)
    records = tokens.records()
    now = datetime.now(UTC)
    if as_json:
        print_json([_listed(record, now) for record in records])
        return
    if not records:
        out_console.print(f"no tokens in {escape(str(tokens.path))}")
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("id", "name", "users", "created", "expires"):
        table.add_column(column)
    for record in records:
        users = "(every user: admin)" if record.admin else ", ".join(record.users)
        expiry = "never" if record.expires_at is None else record.expires_at[:19]
        if record.expired(now):
            expiry += " (expired)"
        table.add_row(
            record.token_id, escape(record.name), escape(users), record.created_at[:19], expiry
        )
    out_console.print(table)


@token_app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: str = typer.Argument(..., metavar="ID", help="The token's id (`token list`)."),
    state_dir: Path | None = STATE_DIR_OPTION,
    tokens_file: Path | None = TOKENS_FILE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Revoke a token; a running server refuses it from the next request on.

    `--json` prints the revoked token's record as `token list --json` shows it.

    Example: `deermem token revoke 3f2a9c01b7de`
    """
    record = _tokens(ctx, state_dir, tokens_file).revoke(token_id)
    if as_json:
        print_json(_listed(record, datetime.now(UTC)))
        return
    out_console.print(f"revoked {record.token_id}")


def _listed(record: TokenRecord, now: datetime) -> dict[str, object]:
    """A token's record as ``token list --json`` and ``token revoke --json`` print it.

    Never the token or its digest; ``expired`` says whether it was refused already.
    """
    return {**record.public(), "expired": record.expired(now)}
