"""What every ``deermem`` command shares: its global options, its output, its tables.

* **The global options** (``--root``, ``--config``, ``--user``, ``--agent``):
  the root command stores them in a :class:`CliContext`. Commands that need
  the memory call :func:`memory_of`, which works out the store root, reads
  the configuration — the defaults, the store's own settings file,
  ``--config``, the environment (:func:`deermem.config.resolve_config`) —
  and opens the store once, on first use, so ``deermem --help`` or
  ``deermem demo`` never touch a store. A command that only reads passes
  ``existing=True``: a root that does not exist is then an error, not an
  empty memory that hides a mistyped path.
* **Output**: one console for results and one for errors, :func:`print_json`
  (sorted keys, so scripts and diffs see a stable order), one-line errors
  (:func:`fail`); the progress display is :mod:`deermem.cli.progress`.
* **Tables and sentences** for people: facts, receipts, why a fact left.
  Everything a user or a model wrote is escaped before rich sees it.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import re
import shlex
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn, TextIO, TypedDict, cast

import typer
from rich import box
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table

from deermem.config import STORE_SETTINGS_FILENAME, ResolvedConfig, is_new_root, resolve_config
from deermem.memory import Memory
from deermem.model import Fact
from deermem.store import EvictionReceipt, MarkdownStore, ReceiptEntry, resolve_root
from deermem.store.markdown.files import (
    AGENTS_DIRNAME,
    FILE_MODE,
    USERS_DIRNAME,
    NotRegularFileError,
    atomic_write,
    broken_link,
    may_hold_store,
)

__all__ = [
    "JSON_OPTION",
    "LIMIT_OPTION",
    "CliContext",
    "cli_context",
    "command_hint",
    "components_text",
    "confirm_or_fail",
    "err_console",
    "escape",
    "eviction_sentence",
    "fact_lines",
    "fact_table",
    "fail",
    "margin_text",
    "memory_of",
    "out_console",
    "output_path",
    "print_error",
    "print_json",
    "print_redaction",
    "read_stdin_text",
    "receipt_table",
    "stand_in_for_closed_streams",
    "stdout_named",
    "write_output",
]

out_console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")
LIMIT_OPTION = typer.Option(
    0, "--limit", "-n", min=0, metavar="N", help="Show at most N entries (the first N); 0: all."
)
_PREVIEW = 70


def state_dir_option(help: str) -> Any:
    """``--state-dir``: one flag and variable for every command that finds the server's state."""
    return typer.Option(None, "--state-dir", file_okay=False, envvar="DEERMEM_STATE_DIR", help=help)


def tokens_file_option(help: str) -> Any:
    """``--tokens-file``: one flag and variable for every command that reads the tokens."""
    return typer.Option(
        None, "--tokens-file", dir_okay=False, envvar="DEERMEM_TOKENS_FILE", help=help
    )


STATE_DIR_OPTION = state_dir_option(
    "The server's state directory [default: `<root>/.server`; required with a database store]."
)
TOKENS_FILE_OPTION = tokens_file_option("The tokens file [default: `<state-dir>/tokens.json`].")


class ServerPlaces(TypedDict):
    """The fields of :class:`~deermem.service.settings.ServerSettings` that say where the
    store, its configuration and the server's state are."""

    root: str | None
    config_file: str | None
    state_dir: str | None
    tokens_file: str | None


def server_places(
    ctx: typer.Context, state_dir: Path | None, tokens_file: Path | None, *, serving: bool
) -> ServerPlaces:
    """Where a command that serves the store, or finds the server's state, reads from:
    the global store options and where the tokens and job records are — the fields of
    :class:`~deermem.service.settings.ServerSettings` that every such command shares."""
    options = cli_context(ctx)
    if serving or (state_dir is None and tokens_file is None):
        # The store is served, or its root holds the tokens: a mistyped --root is
        # an error, not a new, empty memory (nor a tokens file beside none).
        options.require_store()
    return {
        "root": None if options.root is None else str(options.root),
        "config_file": None if options.config_file is None else str(options.config_file),
        "state_dir": None if state_dir is None else str(state_dir),
        "tokens_file": None if tokens_file is None else str(tokens_file),
    }


# --- output ---------------------------------------------------------------------------------

# What a terminal would act on rather than show: C0 and C1 control characters but the
# line feed and the tab (an ESC sequence can clear the screen, retitle the window or
# hide what follows), and the bidirectional overrides and isolates (which reorder what
# is shown).
_CONTROLS: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape(text: str) -> str:
    """``text`` as rich prints it literally: markup escaped, controls shown as ``\\x1b``.

    Every text a user or a model wrote goes through this before a console
    prints it; a stored fact must not be able to drive the reader's terminal.
    """
    return escape_markup(_CONTROLS.sub(_visible, text))


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def print_json(data: object) -> None:
    """Print JSON with sorted keys, so scripts and diffs see a stable order."""
    typer.echo(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


def print_redaction(kinds: Iterable[str], *, console: Console | None = None) -> None:
    """Say that secrets were replaced before a write, and of which kinds (never the values).

    Nothing is printed when ``kinds`` is empty. ``console`` is the results' unless
    given (``--quiet`` prints only an id on standard output: the note goes to stderr).
    """
    found = sorted(set(kinds))
    if found:
        (console or out_console).print(
            escape(
                f"secrets redacted before writing: {', '.join(found)} (stored as "
                "[redacted: KIND]; docs/privacy.md)"
            )
        )


def print_error(message: str) -> None:
    """One ``error: ...`` line on stderr (the message is shown as text, never as markup)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}")


def fail(message: str) -> NoReturn:
    """Stop the command with an error line and exit status 1 (not a usage error)."""
    print_error(message)
    raise typer.Exit(1)


def confirm_or_fail(question: str, *, yes: bool, what: str) -> None:
    """Go on only if ``yes`` (``--yes``) or a person at the terminal answers yes; else exit 1.

    The question is asked on stderr, so that standard output holds the result
    alone (``--json`` stays JSON, also redirected). Where standard input is not
    a terminal nobody can be asked: ``--yes`` is required, as a script cannot
    tell a question from the output it reads.

    Args:
        question: what is asked, ``Delete ... for good?``.
        yes: the command's ``--yes``.
        what: the irreversible act, named in the refusal (``erasing user 'alice'``).
    """
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"{what} cannot be undone: confirm with --yes")
    # Not typer.confirm: with err=True it still writes the prompt's last space to stdout.
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        fail("nothing was changed")


def output_path(memory: Memory, file: str | Path) -> Path:
    """Where a command may write a file it was given (an export, a chart), or exit 1.

    The file is replaced by a rename (``atomic_write``), so what is there must be
    a regular file (or a link to one) or nothing: a rename over a device or a FIFO
    would put a regular file in its place (``export /dev/null`` run as root would
    replace the system's ``/dev/null``) and its reader would get nothing.

    Inside a Markdown store's root, only a new file directly in the root, named
    as none of the store's own: anything else could replace one of the store's
    files — another user's ``memory.json``, the store's settings — or put one
    where the store reads its users or agents (``users``, ``agents``, which a
    new store makes at its first write).

    Raises:
        typer.Exit: the directory does not exist, the path is a directory, a device,
            a pipe or a socket, or it is the store's.
    """
    path = Path(file)
    if not path.parent.is_dir():
        fail(f"{file}: its directory does not exist")
    try:
        mode: int | None = path.stat().st_mode
    except FileNotFoundError:  # nothing there (or a dangling link): a new file
        mode = None
    if mode is not None and stat.S_ISDIR(mode):  # else the error would name the temporary file
        fail(f"{file}: is a directory; give a file name")
    if mode is not None and not stat.S_ISREG(mode):
        fail(f"{file}: {NotRegularFileError(path).strerror}")
    store = memory.store
    if isinstance(store, MarkdownStore):
        target, root = path.resolve(), store.root.resolve()
        own = (STORE_SETTINGS_FILENAME, store.manifest_filename, USERS_DIRNAME, AGENTS_DIRNAME)
        loose = (
            target.parent == root
            and not target.exists()
            and not target.name.startswith(".")
            and target.name not in own
        )
        if target.is_relative_to(root) and not loose:
            fail(f"{file}: that is inside the store at {store.root}; write it outside the store")
    return path


def write_output(memory: Memory, file: str | Path, data: bytes) -> None:
    """Replace FILE with ``data`` atomically (checked by :func:`output_path`), or exit 1.

    The new file takes the permissions of the file it replaces: an export holds
    a person's whole memory, and a file its owner made private (``chmod 600``)
    must not come back readable by everyone, as a rename of a file made with
    the default mode would leave it (a shell's ``>`` keeps the mode too). The
    umask still applies, so the new file is never more open than the old one.
    """
    path = output_path(memory, file)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:  # a new file: the default mode, as open(path, "w") makes it
        mode = FILE_MODE
    atomic_write(path, data, mode=mode)


class ClosedStream(io.TextIOBase):
    """Standard input or output the program was started without (``<&-``, ``>&-``).

    Python sets ``sys.stdin``/``sys.stdout`` to ``None`` then: reading stdin
    ended in an ``AttributeError`` traceback, and printing to a ``None`` stdout
    (typer, rich) drops the text, so ``export -`` exited 0 having written
    nothing. Every read and write of this stand-in fails with an ``OSError``
    naming the stream, which ``main`` prints as one line with status 1, as
    ``cat`` does. Commands that never use the stream are unaffected.
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.stream_name = name

    def _closed(self) -> OSError:
        return OSError(errno.EBADF, "closed (the program was started without it)", self.stream_name)

    @property
    def buffer(self) -> ClosedStream:
        """Itself: a binary read (``sys.stdin.buffer.read()``) fails the same way."""
        return self

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> str:
        raise self._closed()

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        raise self._closed()

    def write(self, text: str) -> int:
        raise self._closed()


def quiet_driver_logs() -> None:
    """Keep the database driver's and its pool's own warnings off a command's stderr.

    They are steps toward an outcome the command reports itself: the pool
    logs a connection attempt it retries (``error connecting in 'deermem':
    … too many clients``), a broken connection it replaces, and psycopg an
    aborted pipeline it cleans up, and with no handler configured Python
    printed each raw, also on a command that succeeded. A command's contract
    is one clear line for an error (a :class:`~deermem.DatabaseError`, which
    names the database) and nothing for a success. Their errors still show.
    """
    logging.getLogger("psycopg").setLevel(logging.ERROR)  # psycopg.pool is its child


class NamedStream:
    """A stream whose failed writes name it: ``standard output: No space left on device``.

    A write to standard output that the system refuses (``>/dev/full``, a full
    disk, an I/O error) raises an ``OSError`` without a file name, which
    ``main`` could only print as ``error: [Errno 28] No space left on device``,
    naming nothing. Through this stand-in the error carries the stream's name,
    as :class:`ClosedStream`'s does, and keeps its type (a ``BrokenPipeError``
    is still one). Everything else is the wrapped stream's own.
    """

    def __init__(self, stream: TextIO, name: str) -> None:
        self.stream = stream
        self.stream_name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.stream, attribute)

    def _named(self, error: OSError) -> OSError:
        if error.errno is None or error.filename is not None:
            return error
        return type(error)(error.errno, error.strerror, self.stream_name)

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as error:
            raise self._named(error) from error

    def writelines(self, lines: Iterable[str]) -> None:
        try:
            self.stream.writelines(lines)
        except OSError as error:
            raise self._named(error) from error

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            raise self._named(error) from error


@contextmanager
def stdout_named() -> Iterator[None]:
    """Within it, ``sys.stdout`` is a :class:`NamedStream` of itself (as it was, after)."""
    stdout = sys.stdout
    sys.stdout = cast(TextIO, NamedStream(stdout, "standard output"))
    try:
        yield
    finally:
        sys.stdout = stdout


def stand_in_for_closed_streams() -> None:
    """Put a :class:`ClosedStream` where standard input or output is missing."""
    if sys.stdin is None:
        sys.stdin = ClosedStream("standard input")
    if sys.stdout is None:
        sys.stdout = ClosedStream("standard output")


def read_stdin_text(what: str) -> str:
    """Everything on standard input, as UTF-8 text (``-`` given for a value).

    Undecodable bytes stop the command with an error naming ``what``: guessing
    an encoding would store text the user never wrote.
    """
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        fail(f"standard input: {what} is not UTF-8 text (byte {error.start})")


# --- the global options -----------------------------------------------------------------


@dataclass
class CliContext:
    """What the root command's options say, and what they resolved to once asked."""

    root: Path | None = None
    config_file: Path | None = None
    user: str | None = None
    agent: str | None = None
    _explicit_settings: ResolvedConfig | None = field(default=None, repr=False)
    _settings: ResolvedConfig | None = field(default=None, repr=False)
    _root_dir: Path | None = field(default=None, repr=False)
    _memory: Memory | None = field(default=None, repr=False)

    def _explicit(self) -> ResolvedConfig:
        """The configuration from ``--config``, the environment and defaults: no store's file."""
        if self._explicit_settings is None:
            self._explicit_settings = resolve_config(self.config_file)
        return self._explicit_settings

    def uses_database(self) -> bool:
        """Whether the configuration names a database (``store``) and no ``--root`` is given."""
        return self.root is None and bool(self._explicit().config.store)

    def store_root(self) -> Path:
        """``--root``, else ``storage_path`` (file, environment), else ``$DEERMEM_DATA_DIR``,
        else ``~/.deermem``."""
        if self._root_dir is None:
            if self.root is not None:
                self._root_dir = self.root
            else:
                self._root_dir = resolve_root(self._explicit().config.storage_path)
        return self._root_dir

    def root_origin(self) -> str:
        """Which option or setting chose the store root, for messages."""
        if self.root is not None:
            return "--root"
        if self._explicit().config.storage_path:
            return "storage_path"
        return "$DEERMEM_DATA_DIR" if os.environ.get("DEERMEM_DATA_DIR", "").strip() else "default"

    def settings(self) -> ResolvedConfig:
        """The effective configuration and where each value came from.

        A Markdown store's own settings file counts; a database's record
        (``deermem_settings``) is laid under this when the memory opens it
        (:func:`deermem.store.with_kept_settings`), so it is not read twice.
        """
        if self._settings is None:
            if self.uses_database():
                self._settings = self._explicit()
            else:
                self._settings = resolve_config(self.config_file, root=self.store_root())
        return self._settings

    def require_store(self) -> None:
        """Stop with an error unless the store root holds a store (or a database is named).

        A command that writes, or serves the memory to others, calls this before it
        opens anything: a mistyped ``--root`` must not become a new, empty memory.
        """
        if not self.uses_database() and is_new_root(self.store_root()):
            root = self.store_root()
            self._refuse_broken_link(root)
            fail(
                f"no store at {root} (from {self.root_origin()}); check the path, or create "
                f"the store first: deermem --root {shlex.quote(str(root))} init"
            )

    def require_root(self) -> None:
        """Stop with an error if the store root does not exist (a database needs none).

        A command that only reads calls this: a mistyped ``--root`` is an error,
        not an empty memory (nor the defaults shown as a store's settings).
        """
        if self.uses_database():
            return
        root = self.store_root()
        if not root.exists():
            self._refuse_broken_link(root)
            fail(
                f"no store at {root} (from {self.root_origin()}): the directory "
                "does not exist; check the path, or create the store with `deermem init`"
            )
        if root.is_dir() and not may_hold_store(root, self.settings().config.manifest_filename):
            fail(
                f"no store at {root} (from {self.root_origin()}): the directory is neither "
                "empty nor a deermem store; check the path"
            )

    def _refuse_broken_link(self, root: Path) -> None:
        """Stop if the root is a symbolic link to nothing (an unmounted disk, a moved
        directory): `deermem init` cannot make a store there, so it is not the advice."""
        link = broken_link(root)
        if link is not None:
            fail(f"no store at {root} (from {self.root_origin()}): {link}; check the path")

    def memory(self, *, existing: bool = False) -> Memory:
        if existing:
            self.require_root()
        else:
            self.require_store()
        if self._memory is None:
            self._memory = Memory.open(
                None if self.uses_database() else self.store_root(),
                self.settings().config,
                user=self.user,
                agent=self.agent,
            )
        return self._memory

    def close(self) -> None:
        """Release the store's connections (a database's pool; a Markdown store holds none).

        Registered when the memory is first opened, to run as the invocation ends:
        a command run in-process (tests, a host embedding the CLI) leaves no pool
        behind to be torn down by whichever thread the collector happens to run on.
        """
        if self._memory is not None:
            close = getattr(self._memory.store, "close", None)
            if callable(close):
                close()


def command_hint(ctx: typer.Context, *args: str) -> str:
    """A ``deermem`` command line to suggest, with the global options this one was given.

    ``--root``, ``--config``, ``--user`` and ``--agent`` as this invocation has
    them, every word quoted for the shell: a hint copied from the output runs on
    the same memory. Shown through rich, it still needs :func:`escape`.
    """
    state = cli_context(ctx)
    words = ["deermem"]
    for option, value in (
        ("--root", state.root),
        ("--config", state.config_file),
        ("--user", state.user),
        ("--agent", state.agent),
    ):
        if value is not None:
            words += [option, str(value)]
    return " ".join(shlex.quote(word) for word in [*words, *args])


def cli_context(ctx: typer.Context) -> CliContext:
    """The global options of this invocation (defaults for a sub-app run on its own)."""
    state = ctx.find_root().obj
    if not isinstance(state, CliContext):  # a sub-app run on its own (tests)
        state = CliContext()
        ctx.find_root().obj = state
    return state


def memory_of(ctx: typer.Context, *, existing: bool = False) -> Memory:
    """The memory selected by the global options of this invocation.

    Args:
        ctx: the command's context.
        existing: the command only reads: a store root that does not exist is
            an error (exit status 1), not an empty memory.
    """
    state = cli_context(ctx)
    opening = state._memory is None
    memory = state.memory(existing=existing)
    if opening:
        ctx.find_root().call_on_close(state.close)
    return memory


# --- tables and sentences for people ----------------------------------------------------


def fact_table(facts: Iterable[Fact], *, title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("id", "category", "conf.", "created", "content"):
        table.add_column(column, no_wrap=column != "content", overflow="fold")
    for fact in facts:
        table.add_row(
            fact.id,
            escape(_category(fact)),
            f"{fact.confidence:.2f}",
            fact.createdAt[:10],
            escape(_preview(fact.content)),
        )
    return table


def fact_lines(fact: Fact) -> list[str]:
    """Every field of a fact, one ``name: value`` line each (markup-safe)."""
    lines = []
    for key, value in fact.to_dict().items():
        if key == "content":
            continue
        lines.append(f"[dim]{escape(key)}:[/] {escape(_value(value))}")
    lines.append("")
    lines.append(escape(fact.content))
    return lines


def receipt_table(receipts: Iterable[EvictionReceipt]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("when", "why", "policy", "n/cap"):
        table.add_column(column, no_wrap=True)
    table.add_column("facts (score)", min_width=13, overflow="fold")
    table.add_column("shadow", overflow="fold")
    for receipt in receipts:
        facts = "\n".join(_line_summary(line) for line in receipt.evicted)
        shadow = ""
        if receipt.shadow is not None:
            verdict = "disagrees" if receipt.shadow.disagrees else "agrees"
            shadow = f"{receipt.shadow.policy} {verdict}"
        table.add_row(
            receipt.occurred_at[:16].replace("T", " "),
            receipt.reason + (f"\n({receipt.trigger})" if receipt.trigger else ""),
            receipt.policy_version,
            f"{receipt.occupancy}/{receipt.max_facts}"
            if receipt.occupancy
            else f"cap {receipt.max_facts}",
            escape(facts),
            shadow,
        )
    return table


def eviction_sentence(receipt: EvictionReceipt | None, line: ReceiptEntry | None) -> str:
    """One sentence on why a fact left, from its receipt line (markup-safe)."""
    if line is None:
        return "no receipt records why it left"
    parts = []
    if receipt is not None:
        # Receipts written by the original DeerMem record no trigger, rank or
        # occupancy: what a receipt does not hold is left out, never shown as "?".
        when = f"on {receipt.occurred_at[:10]}"
        if receipt.trigger:
            when += f" (trigger {receipt.trigger})"
        if receipt.reason == "capacity":
            parts.append(f"evicted at capacity {when}")
            parts.append(f"by {receipt.policy_version} with a cap of {receipt.max_facts}")
        else:
            parts.append(f"{receipt.reason} {when}")
    if line.score is not None:
        of = f" of {receipt.occupancy}" if receipt is not None and receipt.occupancy else ""
        rank = f"rank {line.rank}{of}, " if line.rank is not None else ""
        parts.append(
            f"{rank}score {line.score:.4f} ({components_text(line.components)})"
            f"{margin_text(line, receipt)}"
        )
    return escape("; ".join(parts))


def components_text(components: Mapping[str, float]) -> str:
    return ", ".join(f"{name} {value:.4f}" for name, value in components.items())


def margin_text(line: ReceiptEntry, receipt: EvictionReceipt | None) -> str:
    """The line's margin in words after a comma (as its receipt tells it, when there is
    one: `EvictionReceipt.margin_words`); nothing without a margin."""
    words = line.margin_words if receipt is None else receipt.margin_words(line)
    return "" if words is None else f", {words}"


def _line_summary(line: ReceiptEntry) -> str:
    if line.score is None:
        return line.fact_id
    return f"{line.fact_id} ({line.score:.3f})"


def _category(fact: Fact) -> str:
    return f"other:{fact.categoryExtension}" if fact.categoryExtension else fact.category


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"


def _value(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "[]"
    return str(value)
