"""``deermem serve``: the HTTP API (needs the ``server`` extra)."""

from __future__ import annotations

from pathlib import Path

import typer

from deermem.cli._context import CliContext
from deermem.cli._output import err_console

__all__ = ["serve"]


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="Worker processes."),
    state_dir: Path | None = typer.Option(
        None,
        "--state-dir",
        file_okay=False,
        envvar="DEERMEM_STATE_DIR",
        help="The server's tokens and job records, shared by its workers "
        "[default: <root>/.server; required with a database store].",
    ),
    tokens_file: Path | None = typer.Option(
        None,
        "--tokens-file",
        dir_okay=False,
        envvar="DEERMEM_TOKENS_FILE",
        help="The tokens file [default: <state-dir>/tokens.json].",
    ),
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
    allowed_host: list[str] = typer.Option(
        [],
        "--allowed-host",
        envvar="DEERMEM_ALLOWED_HOSTS",
        metavar="NAME[:PORT]",
        help="A host name requests may use besides localhost, 127.0.0.1 and [::1] "
        "(repeatable), e.g. the name a reverse proxy forwards; other names get 421.",
    ),
    header_timeout: float = typer.Option(
        10.0,
        "--header-timeout",
        min=0.1,
        help="Seconds a connection may take to send a request's headers before it is closed.",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning, error."),
) -> None:
    """Serve the memory over HTTP (FastAPI + uvicorn; `pip install 'deermem[server]'`).

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
        from deermem.service.http.limits import ServerLimits
        from deermem.service.http.run import serve as run_server
        from deermem.service.http.settings import ServerSettings
    except ImportError as error:  # fastapi or uvicorn missing
        err_console.print(
            f"[bold red]error:[/] the server needs the `server` extra ({error.name} is not "
            "installed): pip install 'deermem[server]'"
        )
        raise typer.Exit(1) from None
    state = ctx.find_root().obj
    options = state if isinstance(state, CliContext) else CliContext()
    settings = ServerSettings(
        host=host,
        port=port,
        workers=workers,
        root=None if options.root is None else str(options.root),
        config_file=None if options.config_file is None else str(options.config_file),
        state_dir=None if state_dir is None else str(state_dir),
        tokens_file=None if tokens_file is None else str(tokens_file),
        limits=ServerLimits(
            max_body_bytes=max_body_bytes,
            max_pending_jobs=max_pending_jobs,
            max_pending_jobs_per_user=max_pending_jobs_per_user,
            max_waits_per_token=max_waits_per_token,
            header_timeout_seconds=header_timeout,
        ),
        log_level=log_level.lower(),
        allowed_hosts=tuple(allowed_host),
    )
    run_server(settings)
