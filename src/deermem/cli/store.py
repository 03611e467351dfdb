"""The store as a whole: ``init``, ``scopes``, ``reindex``, ``export``/``import``,
``users`` (erase and export one user), ``redact``, ``migrate`` and ``db`` (the
PostgreSQL store's schema)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

import typer
import yaml
from rich import box
from rich.table import Table

from deermem.cli.output import (
    JSON_OPTION,
    STATE_DIR_OPTION,
    TOKENS_FILE_OPTION,
    cli_context,
    command_hint,
    confirm_or_fail,
    err_console,
    escape,
    fail,
    memory_of,
    out_console,
    print_error,
    print_json,
    print_redaction,
    read_stdin_text,
    server_places,
    write_output,
)
from deermem.cli.progress import progress_bar
from deermem.config import (
    MemoryConfig,
    ResolvedConfig,
    is_database_url,
    load_config,
    read_store_settings,
    records_settings,
    redact_url,
    render_store_settings,
    resolve_config,
    settings_to_keep,
    store_settings_path,
)
from deermem.errors import (
    ConfigError,
    FactRevisionConflict,
    FactValidationError,
    StoreSettingsExistError,
)
from deermem.model import NotJsonNumber, parse_json, shown_user_id
from deermem.results import RedactionReport, ScopeSummary, to_json
from deermem.service.http.jobs import JobStore
from deermem.service.settings import ServerSettings
from deermem.service.tokens import TokenFile
from deermem.store import resolve_root
from deermem.store.markdown.files import (
    may_hold_store,
    read_regular_file,
    write_store_settings,
)
from deermem.store.migrate import (
    USER_EXPORT_FORMAT,
    MigrationReport,
    carry_settings,
    migrate,
    opened_location,
)

if TYPE_CHECKING:
    from deermem.memory import Memory
    from deermem.recall.search import ReindexReport
    from deermem.store.postgres.database import SchemaStatus

__all__ = [
    "db_app",
    "export",
    "import_",
    "init",
    "migrate_command",
    "redact_command",
    "reindex",
    "scopes",
    "users_app",
]


def init(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        exists=True,
        dir_okay=False,
        help="The settings to keep [default: the global --config, if any].",
    ),
    force: bool = typer.Option(False, "--force", help="Replace settings the store already keeps."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Create a store, or give an existing one its settings (`<root>/deermem.yaml`).

    The settings of `--config` and of `DEERMEM_*` environment variables —
    the ones they set, not the defaults — are written into the store's root,
    so every later command and `Memory.open` on it uses them: a store built
    at a cap of 10 stays at 10 for whoever opens it. A `--config` file or
    environment variable given later still wins over them (`deermem config
    show` says where each value came from). Nothing else in the directory is
    touched: on an existing store, its facts, archive and receipts stay as
    they are. Settings the store already keeps are replaced only with
    `--force` (adding settings beside them needs none). A new store records
    its capacity policy, `hybrid-v1` with `confidence` in its shadow, unless
    the settings name one (docs/policies.md); an existing store that
    recorded none keeps `confidence`. `storage_path` is not written (the file is found at the root);
    no secret is (the model's key stays an environment variable; a
    `model.base_url` holding a password or a key is refused).

    Examples: `deermem --root ./memory init --config deermem.yaml`,
    `DEERMEM_MAX_FACTS=10 deermem --root ./memory init`
    """
    state = cli_context(ctx)
    resolved = resolve_config(config or state.config_file)
    if resolved.config.store and state.root is None:
        fail(
            "the configuration names a database (store); a database records its settings "
            "through `deermem db upgrade` (when it creates the store, and again while the store "
            "holds no user) — `deermem init` is for a Markdown store directory (--root)"
        )
    if resolved.config.store and state.root is not None:
        # Every later command refuses the two together: a store made here would be unusable.
        raise ConfigError(
            [
                f"a store directory ({state.root}) and a database (store = "
                f"{redact_url(resolved.config.store)}) are both given; use one of them"
            ]
        )
    root = state.root if state.root is not None else resolve_root(resolved.config.storage_path)
    if root.exists() and not root.is_dir():
        fail(f"{root}: not a directory")
    manifest = resolved.config.manifest_filename
    if root.is_dir() and not may_hold_store(root, manifest):
        fail(
            f"{root} is neither empty nor a deermem store; choose an empty or new directory, "
            "or the root of an existing store"
        )
    text = render_store_settings(settings_to_keep(resolved.config, root), resolved.sources)
    current = read_store_settings(root)
    new: dict[str, object] = yaml.safe_load(text) or {}
    extends = current is not None and current.items() <= new.items()
    path = store_settings_path(root)
    if current is not None and not force and not extends:
        raise StoreSettingsExistError(str(path), _differences(current, new, resolved))
    if current is not None and current == new:
        # The same settings, written by hand or by another version: the file stays as it is.
        outcome = "unchanged"
    else:
        written = write_store_settings(root, text, force=force or extends)
        outcome = "added" if written == "replaced" and extends else written
    kept = read_store_settings(root) or {}  # what was written reads back
    resolve_config(root=root, environ={})  # ... and is a valid configuration
    if as_json:
        print_json({"root": str(root), "file": str(path), "outcome": outcome, "settings": kept})
        return
    what = ", ".join(sorted(kept)) if kept else "none: the defaults apply"
    done = {
        "created": "created",
        "added": "added settings to",
        "replaced": "replaced settings in",
        "unchanged": "already up to date:",
    }[outcome]
    out_console.print(f"{done} {escape(str(path))} (settings: {escape(what)})")


def _differences(
    kept: Mapping[str, object], given: Mapping[str, object], resolved: ResolvedConfig
) -> list[str]:
    """Why ``init`` refuses ``given``, for people: each setting the store ``kept`` that is
    given another value, and each key added to a section it keeps —
    ``max_facts: keeps 20, given 30 (from c.toml)``. A setting added beside the kept
    ones is no reason, and is not named."""
    kept_flat, given_flat = _flat(kept), _flat(given)
    lines = []
    for key in sorted(kept_flat.keys() | given_flat.keys()):
        before, after = kept_flat.get(key, _NOTHING), given_flat.get(key, _NOTHING)
        if before != after and key.split(".", 1)[0] in kept:
            lines.append(
                f"{key}: keeps {_setting_text(key, before)}, given {_setting_text(key, after)} "
                f"(from {resolved.source(key)})"
            )
    return lines


_NOTHING: Final = object()


def _flat(settings: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _setting_text(key: str, value: object) -> str:
    if value is _NOTHING:
        return "none"
    if isinstance(value, str) and key.endswith("url"):
        return json.dumps(redact_url(value))  # a URL may carry a password
    return json.dumps(value, ensure_ascii=False)


# --- every user and agent --------------------------------------------------------------


def scopes(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List every user and agent in the store, with their fact and archive counts.

    The user `-` is the store's single-user layout (no `--user`). Use a row's
    user and agent as `--user` and `--agent` for the other commands. Rows are
    in the same order on every store: `-` first, then by user id and agent,
    character by character by code point (`Alice`, `Zoe`, `alice`, `émile`),
    whatever a database's collation.

    A directory holding memory that no user and agent can be read from — two
    user ids' facts in one directory, a directory whose owner cannot be told
    — is named on stderr, one line each, and the exit status is 1.

    Example: `deermem --root ./memory scopes --json`
    """
    memory = memory_of(ctx, existing=True)
    found = memory.scopes()
    problems = memory.store_problems()
    _show_scopes(memory, found, as_json=as_json)
    for problem in problems:
        print_error(problem)
    if problems:
        raise typer.Exit(1)


def _show_scopes(memory: Memory, found: tuple[ScopeSummary, ...], *, as_json: bool) -> None:
    if as_json:
        print_json(to_json(found))
        return
    if not found:
        out_console.print(f"no users in {escape(str(memory.store))}")
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("user", "agent", "facts", "archived"):
        table.add_column(column, justify="right" if column in ("facts", "archived") else "left")
    for summary in found:
        user = "-" if summary.scope.user_id is None else shown_user_id(summary.scope.user_id)
        table.add_row(escape(user), summary.scope.agent, str(summary.facts), str(summary.archived))
    out_console.print(table)


def reindex(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Rebuild the search index from the facts of every user and agent, and embed them.

    Search keeps its index in step by itself — also with facts edited by
    hand — so this is for an index that was deleted, damaged or copied
    along, or to compact it; and, under search_mode hybrid, to embed every
    fact with the current model (a store written by keyword only, or with
    another model, on either store). Searches may run meanwhile. Shows progress on a
    terminal. A directory holding memory that no user and agent can be read from
    (as `deermem scopes` names them) is not indexed: it is named on stderr, and
    the exit status is 1. A database store that cannot keep the vectors made (a
    read-only connection) is an error, exit status 1.

    Example: `deermem --root ./memory reindex`
    """
    memory = memory_of(ctx, existing=True)
    progress = progress_bar("indexing users and agents", quiet=as_json)
    with progress:
        task = progress.add_task("scopes", total=None)
        report = memory.reindex(
            progress=lambda done, total: progress.update(task, completed=done, total=total)
        )
    _show_reindex(report, as_json=as_json)
    problems = memory.store_problems()
    for problem in problems:
        print_error(f"not indexed: {problem}")
    if problems:
        raise typer.Exit(1)


def _show_reindex(report: ReindexReport, *, as_json: bool) -> None:
    if as_json:
        print_json(to_json(report))
        return
    if report.location is None and not report.scopes:
        out_console.print("this store keeps its search index in memory: nothing to rebuild")
        return
    if report.location is None:
        out_console.print(
            f"embedded {report.facts} facts of {report.scopes} user/agent scope(s) "
            "(the store keeps their vectors; each process keeps its own index)"
        )
        return
    out_console.print(
        f"indexed {report.facts} facts of {report.scopes} user/agent scope(s) "
        f"into {escape(report.location)}"
    )


# --- one scope as a document -----------------------------------------------------------

_STDIO = "-"


def export(
    ctx: typer.Context,
    file: str = typer.Argument(
        _STDIO, metavar="FILE", help="Where to write the document [default: - (standard output)]."
    ),
) -> None:
    """Write one user's and agent's memory as a JSON document.

    The document holds the summaries and every fact with every field
    (`lastConfirmedAt`, `confirmationCount`, unknown keys ...), so
    `deermem import` gives the same memory back. FILE is replaced
    atomically: it holds the old document or the new one, never half.
    A FILE that is a device, a pipe or a directory, or lies inside the
    store's directory (but a new file in its root), is refused.

    Examples: `deermem --user alice export alice.json`,
    `deermem --user alice export | jq '.facts | length'`
    """
    memory = memory_of(ctx, existing=True)
    _write_document(memory, memory.export_document(), file)


def _write_document(memory: Memory, document: dict[str, object], file: str) -> None:
    """Write a document to FILE atomically (never into ``memory``'s store), or to
    standard output for ``-``."""
    try:
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # text that is no Unicode (a lone surrogate): escape it
        text = json.dumps(document, indent=2) + "\n"
        data = text.encode("ascii")
    if file == _STDIO:
        typer.echo(text, nl=False)
        return
    write_output(memory, file, data)


def import_(
    ctx: typer.Context,
    file: str = typer.Argument(
        _STDIO, metavar="FILE", help="The document to read [default: - (standard input)]."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Replace one user's and agent's memory with a document's, through the capacity gate.

    The document is what `deermem export` writes (the original DeerMem's
    export shape works too). Its facts and summaries replace the memory's:
    facts it does not hold leave with reason `replaced`, to the archive
    (restorable) unless `eviction_mode` is `delete`. When the document holds
    more facts than the cap, the capacity gate decides what stays, as for
    every other way in; what it did is printed, with receipts in
    `deermem audit`. A fact whose id is in the archive is refused (restore
    or purge it first); nothing is imported then. So is a fact whose
    `revision` is not the stored one (it changed since the export): export
    again, or remove its `revision` to replace it all the same.

    A document `deermem users export` wrote restores that user whole (every
    agent, the archive, receipts, usage ...) into a store that does not hold
    the user yet (`deermem users erase` first), whatever `--user` says.

    Examples: `deermem --user alice import alice.json`,
    `deermem --user alice export | deermem --user bob import`
    """
    document = _parse(file)
    shown = _shown(file)
    memory = memory_of(ctx)
    if document.get("format") == USER_EXPORT_FORMAT:  # a whole user (deermem users export)
        try:
            restored = memory.import_user(document)
        except FactValidationError as invalid:
            fail(f"{shown}: {invalid}")
        if as_json:
            print_json(to_json(restored))
            return
        counts = ", ".join(f"{value} {key}" for key, value in restored.counts.items())
        shown = escape(shown_user_id(restored.user_id))
        out_console.print(f"restored user {shown}: {escape(counts)}")
        print_redaction(restored.redacted)
        return
    try:
        result = memory.import_document(document)
    except FactValidationError as invalid:
        fail(f"{shown}: {invalid}")
    except FactRevisionConflict as conflict:
        if conflict.expected is None or conflict.actual is None:
            raise
        fail(
            f"{shown}: fact {conflict.fact_id!r} is at revision {conflict.actual} in the store "
            f"and {conflict.expected} in the document (it changed since the document was "
            "written); nothing was imported: export again, or remove the fact's `revision` "
            "to replace it all the same"
        )
    if as_json:
        print_json(to_json(result))
        return
    parts = [f"kept {len(result.kept)}"]
    if result.evicted:
        parts.append(f"evicted {len(result.evicted)} at capacity")
    if result.replaced:
        where = "to the archive" if memory.config.eviction_mode == "archive" else "deleted"
        parts.append(f"replaced {len(result.replaced)} not in the document ({where})")
    out_console.print(f"imported into {escape(str(memory.scope))}: {', '.join(parts)}")
    print_redaction(result.redacted)
    for fact_id in result.evicted:
        out_console.print(
            f"  evicted {fact_id} (see `{escape(command_hint(ctx, 'why', fact_id))}`)"
        )


def _shown(file: str) -> str:
    """How an error names the document: its path, or standard input."""
    return "standard input" if file == _STDIO else file


def _parse(file: str) -> dict[str, object]:
    shown = _shown(file)
    text = _read_document(file)
    try:
        document = parse_json(text, strict_numbers=True)
    except json.JSONDecodeError as error:
        fail(f"{shown} (line {error.lineno}, column {error.colno}): not JSON: {error.msg}")
    except NotJsonNumber as error:
        fail(f"{shown}: not JSON: {error}")
    if not isinstance(document, dict):
        fail(f"{shown}: expected a JSON object with a 'facts' list, as `deermem export` writes")
    return document


def _read_document(file: str) -> str:
    if file == _STDIO:
        return read_stdin_text("the document")
    path = Path(file)
    try:
        data = read_regular_file(path)
    except FileNotFoundError:
        fail(f"{file}: no such file")
    except IsADirectoryError:
        fail(f"{file}: is a directory, not a document")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        fail(f"{file}: not UTF-8 text (byte {error.start})")


# --- one user: erase and export (docs/privacy.md) ---------------------------------------

users_app = typer.Typer(
    help="One user everywhere: erase them, or export all they hold.", no_args_is_help=True
)


@users_app.command("erase")
def erase_user(
    ctx: typer.Context,
    user: str = typer.Argument(..., metavar="USER", help="The user id to erase."),
    yes: bool = typer.Option(False, "--yes", help="Erase without asking (required off a TTY)."),
    state_dir: Path | None = STATE_DIR_OPTION,
    tokens_file: Path | None = TOKENS_FILE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Erase a user for good: every agent, the summaries, the archive, receipts,
    usage, regret events, marks and the search index rows.

    Nothing can bring it back (export it first: `deermem users export`). Asks
    on a terminal; elsewhere `--yes` is required. An unknown user is erased
    of nothing (exit status 0, counts 0). Prints the counts only. The
    server's job records of the user go too, and its tokens bound only to
    the user are revoked (others no longer name the user): found as `serve`
    and `token` find them (`--state-dir`, `--tokens-file` or their variables,
    else `<root>/.server`); when there are none, a note on stderr says so.

    Example: `deermem users erase alice --yes`
    """
    confirm_or_fail(
        f"Erase user {user!r} and everything they hold, for good?",
        yes=yes,
        what=f"erasing user {user!r}",
    )
    memory = memory_of(ctx, existing=True)
    result = memory.erase_user(user)
    places = server_places(ctx, state_dir, tokens_file, serving=False)
    state, tokens = ServerSettings(**places).state_locations(memory.config)
    server: dict[str, int] = {}
    if state is not None and state.is_dir():
        server["jobs"] = JobStore(state / "jobs", retention_seconds=0).forget_user(user)
    if tokens is not None and tokens.is_file():
        server["tokensRevoked"] = TokenFile(tokens).forget_user(user)
    if server:
        result = result.model_copy(update={"counts": {**result.counts, **server}})
    else:  # stderr: the --json document stays the result alone
        where = "no --state-dir given for a database store" if state is None else str(state)
        err_console.print(f"no server state ({escape(where)}): no job records or tokens to clean")
    if as_json:
        print_json(to_json(result))
        return
    if not result.erased:
        out_console.print(f"user {escape(shown_user_id(user))}: nothing held, nothing erased")
        return
    counts = ", ".join(f"{value} {key}" for key, value in result.counts.items() if value)
    out_console.print(f"erased user {escape(shown_user_id(user))}: {escape(counts)}")


@users_app.command("export")
def export_user(
    ctx: typer.Context,
    user: str = typer.Argument(..., metavar="USER", help="The user id to export."),
    file: str = typer.Argument(
        _STDIO, metavar="[FILE]", help="Where to write the document [default: - (standard output)]."
    ),
) -> None:
    """Write everything held for a user as one JSON document (schema: docs/privacy.md).

    Every agent's facts, the summaries, the archive with its receipts, usage,
    regret events and marks. `deermem import FILE` restores it (into a store
    that does not hold the user). FILE is replaced atomically; one that is
    a device, a pipe or a directory, or lies inside the store's directory
    (but a new file in its root), is refused.

    Example: `deermem users export alice alice-export.json`
    """
    memory = memory_of(ctx, existing=True)
    _write_document(memory, memory.export_user(user), file)


def redact_command(
    ctx: typer.Context,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="List what holds a secret (kinds and ids only); change nothing."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Find secrets already stored and replace them by `[redacted: KIND]`, store-wide.

    For memory written before redaction existed or with `redact_secrets`
    off: every fact, archive entry and summary is checked; each that holds
    an API key, token, private key, password or card number is rewritten.
    Prints kinds and ids, never a value. A directory holding memory that no
    user and agent can be read from (as `deermem scopes` names them) cannot
    be checked: it is named on stderr, and the exit status is 1.

    Example: `deermem redact --dry-run`
    """
    report = memory_of(ctx, existing=True).redact_stored(dry_run=dry_run)
    if as_json:
        print_json(to_json(report))
    else:
        _show_redaction(report)
    for problem in report.problems:
        print_error(f"not checked: {problem}")
    if report.problems:
        raise typer.Exit(1)


def _show_redaction(report: RedactionReport) -> None:
    verb = "holds" if report.dry_run else "redacted"
    for item in report.items:
        user = "-" if item.user is None else item.user
        out_console.print(
            f"{escape(user)}/{escape(item.agent)} {item.where} {escape(item.id)} {verb}: "
            + ", ".join(item.kinds)
        )
    if not report.items:
        out_console.print(
            "no secret found" + (" where the store could be read" if report.problems else "")
        )


# --- moving a memory, and the database's schema -----------------------------------------


def migrate_command(
    ctx: typer.Context,
    source: str = typer.Option(
        ..., "--from", metavar="SRC", help="A Markdown store directory or a postgresql:// URL."
    ),
    destination: str = typer.Option(
        ..., "--to", metavar="DST", help="A Markdown store directory or a postgresql:// URL."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Copy every user's memory from SRC to DST and verify each copy.

    Everything is copied: facts, summaries (with their revision), recall
    counts, receipts, the archive, the conversations' marks, regret events
    and shadow marks. Each user is written in one atomic step and read back
    and compared with the source. The store's settings go with it: a
    directory's `deermem.yaml`, a database's own record (`deermem_settings`),
    with the policy the source ran under stated, so a store created before
    new stores ran `hybrid-v1` keeps `confidence` (a database that holds
    users and other settings stops the command before anything is copied).
    Secrets are replaced by `[redacted: KIND]` on the way (`redact_secrets`,
    docs/privacy.md); SRC keeps them. A user DST already holds identically
    is skipped, so an interrupted
    migration can be run again; one it holds with other data stops the
    migration before anything is copied. SRC is never changed, and must
    hold a store (a directory that is empty or holds other files is
    refused); a DST directory must be new, empty or a store. A database
    must be migrated first (`deermem db upgrade`).

    Example: `deermem migrate --from ~/.deermem --to postgresql://deermem@db/deermem`
    """
    config = config_of(ctx)
    _check_locations(source, destination)
    with (
        opened_location(source, config, must_exist=True) as (reader, shown_source),
        opened_location(destination, config, must_exist=False) as (writer, shown_destination),
    ):
        if shown_source == shown_destination:
            raise typer.BadParameter("SRC and DST are the same store", param_hint="--to")
        report = MigrationReport(shown_source, shown_destination)
        report.settings = carry_settings(reader, writer)
        progress = progress_bar("copying users", quiet=as_json)
        with progress:
            task = progress.add_task("users", total=None)
            migrate(
                reader,
                writer,
                report,
                progress=lambda done, total: progress.update(task, completed=done, total=total),
                redact_secrets=config.redact_secrets,
            )
    if as_json:
        print_json(report.to_dict())
        return
    counts = ", ".join(f"{value} {key}" for key, value in sorted(report.counts.items()))
    out_console.print(
        f"copied {report.copied} user(s) from {escape(report.source)} to "
        f"{escape(report.destination)}, each verified"
        + (f" ({escape(counts)})" if counts else "")
        + (f"; {report.skipped} already there, identical" if report.skipped else "")
        + (f"; settings kept: {escape(', '.join(report.settings))}" if report.settings else "")
        + (f"; secrets redacted: {', '.join(sorted(report.redacted))}" if report.redacted else "")
    )


# ``host=… dbname=…``: what libpq takes besides a URL, and no directory name anyone means.
_LIBPQ_KEYWORDS: Final = re.compile(r"\b(?:host|hostaddr|dbname|user|password|port)\s*=\S")


def _check_locations(source: str, destination: str) -> None:
    """Refuse, before either is opened, a pair of locations a copy would damage.

    A directory inside the other would be written into (SRC must not change,
    and a copy inside its own source copies itself); a DST that is a file
    cannot be a store; a URL that is not a database's would be taken for a
    directory named like it.

    Raises:
        typer.BadParameter: naming the option.
    """
    for value, hint in ((source, "--from"), (destination, "--to")):
        if "://" in value and not is_database_url(value):
            raise typer.BadParameter(
                f"{redact_url(value)} is neither a directory nor a postgresql:// URL",
                param_hint=hint,
            )
        if _LIBPQ_KEYWORDS.search(value):
            raise typer.BadParameter(
                f"{redact_url(value)} reads as a libpq connection string, which would be taken "
                "for a directory named like it; give the database as a postgresql:// URL",
                param_hint=hint,
            )
    if is_database_url(source) or is_database_url(destination):
        return
    src, dst = Path(source).expanduser().resolve(), Path(destination).expanduser().resolve()
    if dst.exists() and not dst.is_dir():
        raise typer.BadParameter(f"{destination} is a file, not a directory", param_hint="--to")
    if dst != src and dst.is_relative_to(src):
        raise typer.BadParameter("DST is inside SRC, which must not change", param_hint="--to")
    if dst != src and src.is_relative_to(dst):
        raise typer.BadParameter("SRC is inside DST: DST would copy into itself", param_hint="--to")


db_app = typer.Typer(
    help="The PostgreSQL store's schema: status and upgrade.", no_args_is_help=True
)

_DATABASE_OPTION = typer.Option(
    None,
    "--database",
    metavar="URL",
    help="postgresql://… [default: the configuration's store, or $DEERMEM_DATABASE_URL].",
)


def config_of(ctx: typer.Context) -> MemoryConfig:
    """The configuration the global options (``--config``, the environment) name."""
    return load_config(cli_context(ctx).config_file)


def _database(ctx: typer.Context, database: str | None) -> str:
    url = database or config_of(ctx).store
    if not url:
        raise ConfigError(
            ["no database: pass --database, or set store (or $DEERMEM_DATABASE_URL) to a URL"]
        )
    return url


def _schema(ctx: typer.Context, database: str | None, *, upgrade: bool) -> SchemaStatus:
    """The database's schema version, after applying the migrations it lacks if ``upgrade``.

    Raises:
        ConfigError: the ``postgres`` extra is not installed, or no database is named.
    """
    try:  # the driver is an optional extra, as for every command that opens a database
        from deermem.store.postgres.database import database_status, upgrade_database
    except ModuleNotFoundError as error:
        raise ConfigError(
            [f"PostgreSQL needs the postgres extra (uv sync --extra postgres); {error}"]
        ) from None
    url = _database(ctx, database)
    return upgrade_database(url, config_of(ctx)) if upgrade else database_status(url)


@db_app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    database: str | None = _DATABASE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Apply the migrations the database lacks, in one transaction.

    Run it once before the first start, and after upgrading deermem; every
    replica refuses a database that is behind. Safe to run from several
    places at once, and again: what is applied is not applied twice. A
    database whose encoding is not UTF8 is refused, naming it.

    On a database that holds no user yet, it creates the store: the
    database records a new store's settings (`hybrid-v1` with `confidence`
    in its shadow, and what `--config` and `DEERMEM_*` chose), as `deermem
    init` does in a directory. A database that already holds users records
    none, so it keeps its policy (`confidence` unless a configuration names
    one; docs/policies.md). Until the store holds a user, running it again
    with settings records them over the store's (it keeps the rest), as
    `deermem init` does in an existing directory; once it holds users, the
    settings given are not recorded, and it says so.

    Example: `deermem db upgrade --database postgresql://deermem@db/deermem`,
    `DEERMEM_MAX_FACTS=10 deermem db upgrade`
    """
    status = _schema(ctx, database, upgrade=True)
    if as_json:
        print_json(status.to_dict())
        return
    applied = ", ".join(str(version) for version in status.applied)
    done = f"applied {applied}" if applied else "nothing to apply"
    out_console.print(f"{escape(status.database)}: schema version {status.found} ({done})")
    names = ", ".join(status.settings)
    if status.created_store:
        out_console.print(f"a new store: recorded its settings ({names})")
    elif status.settings:
        out_console.print(f"a store that holds no user yet: recorded its settings ({names})")
    elif status.kept_as_before:
        out_console.print(
            "the database holds users and records no settings: it keeps running as before "
            "(fact_eviction_policy confidence unless a configuration names one; "
            "docs/policies.md)"
        )
    elif records_settings(config_of(ctx)):
        out_console.print(
            "settings not recorded: the database holds users, and its recorded settings "
            "stay as they are; the settings given apply where they are given"
        )


@db_app.command("status")
def status(
    ctx: typer.Context,
    database: str | None = _DATABASE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the database's schema version and the one this deermem needs.

    Exits with status 1 when they differ.

    Example: `deermem db status --json`
    """
    found = _schema(ctx, database, upgrade=False)
    if as_json:
        print_json(found.to_dict())
    else:
        version = "not migrated" if found.found is None else f"schema version {found.found}"
        note = "current" if found.found == found.expected else "run `deermem db upgrade`"
        if found.found is not None and found.found > found.expected:
            note = "newer than this deermem: upgrade deermem"
        out_console.print(
            f"{escape(found.database)}: {version}; this deermem needs {found.expected} ({note})"
        )
    if found.found != found.expected:
        raise typer.Exit(1)
