"""``deermem token``: add, list and revoke the server's bearer tokens."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from deermem.cli._context import CliContext
from deermem.cli._output import JSON_OPTION, err_console, out_console, print_json

if TYPE_CHECKING:
    from deermem.service.http.tokens import TokenFile

__all__ = ["app"]

app = typer.Typer(
    help="Bearer tokens for `deermem serve` and `deermem mcp --transport http`: add, list, revoke.",
    no_args_is_help=True,
)

STATE_DIR_OPTION = typer.Option(
    None,
    "--state-dir",
    file_okay=False,
    envvar="DEERMEM_STATE_DIR",
    help="The server's state directory [default: <root>/.server; required with a database store].",
)
TOKENS_FILE_OPTION = typer.Option(
    None,
    "--tokens-file",
    dir_okay=False,
    envvar="DEERMEM_TOKENS_FILE",
    help="The tokens file [default: <state-dir>/tokens.json].",
)


def _tokens(ctx: typer.Context, state_dir: Path | None, tokens_file: Path | None) -> TokenFile:
    from deermem.service.http.settings import ServerSettings
    from deermem.service.http.tokens import TokenFile

    state = ctx.find_root().obj
    options = state if isinstance(state, CliContext) else CliContext()
    settings = ServerSettings(
        root=None if options.root is None else str(options.root),
        config_file=None if options.config_file is None else str(options.config_file),
        state_dir=None if state_dir is None else str(state_dir),
        tokens_file=None if tokens_file is None else str(tokens_file),
    )
    return TokenFile(settings.tokens_path(settings.load_config()))


@app.command("add")
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

    Example: `deermem token add --user alice --name laptop --expires 30d`
    """
    from deermem.model import parse_moment

    if not user and not admin:
        raise typer.BadParameter("give at least one --user, or --admin")
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
        print_json({**issued.record.public_dict(), "token": issued.token})
        return
    who = "every user" if admin else ", ".join(user)
    until = "" if issued.record.expires_at is None else f", until {issued.record.expires_at}"
    err_console.print(
        f"token {issued.record.token_id} for {escape(who)}{until} added to "
        f"{escape(str(tokens.path))}; it is shown only now:"
    )
    typer.echo(issued.token)


@app.command("list")
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
        print_json([{**record.public_dict(), "expired": record.expired(now)} for record in records])
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


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    token_id: str = typer.Argument(..., metavar="ID", help="The token's id (`token list`)."),
    state_dir: Path | None = STATE_DIR_OPTION,
    tokens_file: Path | None = TOKENS_FILE_OPTION,
) -> None:
    """Revoke a token; a running server refuses it from the next request on.

    Example: `deermem token revoke 3f2a9c01b7de`
    """
    record = _tokens(ctx, state_dir, tokens_file).revoke(token_id)
    out_console.print(f"revoked {record.token_id}")
