"""The Markdown store's files: where they live, how they are written, what a fact file
holds, and whose each directory is.

Paths are built only from validated parts: the safe form of the user id and
the normalised agent name (:mod:`deermem.model`) and fact ids, which
:class:`deermem.model.Fact` restricts to ``[A-Za-z0-9_-]``. Paths recorded in
files (the journal) are resolved with :meth:`UserPaths.inside`, which
refuses anything that would leave the user directory.

The layout is the original DeerMem's (reference §2), so a directory written
by it opens unchanged::

    {root}/users/{safe_user_id}/memory.json          the user's summaries
    {root}/users/{uid}/.memory.lock                  cross-process lock
    {root}/users/{uid}/.memory.journal.json          only while a commit is open
    {root}/users/{uid}/.memory.owner.json            whose directory it is (deermem)
    {root}/users/{uid}/agents/{agent}/facts/{xx}/{fact_id}.md
    {root}/users/{uid}/agents/{agent}/.memory.owner.json  (deermem; long names only)
    {root}/users/{uid}/agents/{agent}/.metadata/fact-usage.json
    {root}/users/{uid}/agents/{agent}/.metadata/eviction-audit.json
    {root}/users/{uid}/agents/{agent}/.metadata/archive/{fact_id}.json   (deermem)
    {root}/users/{uid}/agents/{agent}/.metadata/archive-index.json       (deermem)
    {root}/users/{uid}/agents/{agent}/.metadata/threads/{digest}.json    (deermem)
    {root}/users/{uid}/agents/{agent}/.metadata/regret-events.json       (deermem)
    {root}/users/{uid}/agents/{agent}/.metadata/shadow-evictions.json    (deermem)
    {root}/.retrieval/memory-fts5.sqlite3            derived search index (all users)

``xx`` is the first two hex digits of ``sha256(fact_id)``, which spreads a
large library over 256 directories; ``{agent}`` is the agent's directory name
(:func:`~deermem.model.agent_directory`: the name itself unless it is
longer than 254 characters). Without a user id the root itself plays the
user directory (the original's single-user layout). The owner records are
read and written by the last section of this module.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import Any, BinaryIO, Final, Generic, Literal, NamedTuple, TypeVar

import yaml
from yaml.emitter import Emitter
from yaml.representer import SafeRepresenter

from deermem.config import (
    NOT_STORE_DATA,
    STORE_SETTINGS_FILENAME,
    is_new_root,
    store_settings_path,
)
from deermem.errors import (
    CorruptMemoryFile,
    FactValidationError,
    NotAStoreError,
    OwnerConflictError,
    StoreSettingsExistError,
    UnsafeIdentifierError,
    preview,
)
from deermem.model import (
    MAX_NESTING,
    TIMESTAMP_FIELDS,
    YAML_LOADER,
    Fact,
    RepeatedYamlKey,
    Scope,
    YamlAliasError,
    agent_directory,
    is_bucket,
    is_derived_agent_directory,
    listing_order,
    normalise_agent,
    parse_json,
    safe_user_id,
    was_kept_user_id,
    yaml_problem,
)

__all__ = [
    "AGENTS_DIRNAME",
    "FILE_MODE",
    "JOURNAL_FILENAME",
    "USERS_DIRNAME",
    "FrontMatterWriter",
    "KnownFiles",
    "Owner",
    "Problem",
    "ScopePaths",
    "UnsupportedByWriter",
    "UserPaths",
    "atomic_write",
    "broken_link",
    "check_agent_owner",
    "check_owner_fields",
    "check_user_owner",
    "decode_fact",
    "dump_front_matter",
    "encode_fact",
    "encode_owner",
    "fact_shard",
    "forget_decoded_facts",
    "fsync_path",
    "holds_a_file",
    "holds_store",
    "is_temporary",
    "list_agents",
    "list_users",
    "make_directories",
    "may_hold_store",
    "owner_fields",
    "read_file",
    "read_file_status",
    "read_if_exists",
    "read_owner",
    "remove_durably",
    "replace_files",
    "resolve_root",
    "search_index_path",
    "stored_user_ids",
    "write_store_settings",
    "write_temporary",
]

USERS_DIRNAME: Final = "users"
"""The root's directory of named users (``users/<user>/``)."""

AGENTS_DIRNAME: Final = "agents"
"""A user directory's directory of agents; the single-user layout's is in the root itself."""

LOCK_FILENAME: Final = ".memory.lock"

JOURNAL_FILENAME: Final = ".memory.journal.json"

OWNER_FILENAME: Final = ".memory.owner.json"

RECOVERY_DIRNAME: Final = ".recovery"

USAGE_FILENAME: Final = "fact-usage.json"

AUDIT_FILENAME: Final = "eviction-audit.json"

ARCHIVE_DIRNAME: Final = "archive"

ARCHIVE_INDEX_FILENAME: Final = "archive-index.json"

THREADS_DIRNAME: Final = "threads"

REGRET_EVENTS_FILENAME: Final = "regret-events.json"

SHADOW_MARKS_FILENAME: Final = "shadow-evictions.json"

RETRIEVAL_DIRNAME: Final = ".retrieval"

SEARCH_INDEX_FILENAME: Final = "memory-fts5.sqlite3"


def resolve_root(configured: str, environ: Mapping[str, str] | None = None) -> Path:
    """The store root: the configured path, else ``$DEERMEM_DATA_DIR``, else ``~/.deermem``."""
    env = os.environ if environ is None else environ
    chosen = configured.strip() or env.get("DEERMEM_DATA_DIR", "").strip() or "~/.deermem"
    return Path(chosen).expanduser()


def search_index_path(root: Path) -> Path:
    """The derived search index of a store: one file for every user and agent under ``root``."""
    return root / RETRIEVAL_DIRNAME / SEARCH_INDEX_FILENAME


def fact_shard(fact_id: str) -> str:
    """The shard directory of a fact: the first two hex digits of sha256(id)."""
    return hashlib.sha256(fact_id.encode("ascii")).hexdigest()[:2]


class UserPaths:
    """The files of one user directory (shared by all of the user's agents).

    ``directory`` names the user directory in place of the id's own name
    (:func:`~deermem.model.safe_user_id`): the store reads a directory
    an earlier version named otherwise there, until it moves it.
    """

    __slots__ = (
        "_agents",
        "journal",
        "lock",
        "manifest",
        "owner",
        "recovery",
        "root",
        "user_dir",
        "user_id",
    )

    def __init__(
        self,
        root: Path,
        user_id: str | None,
        manifest_filename: str,
        *,
        directory: str | None = None,
    ) -> None:
        self.root = root
        self.user_id = user_id
        if user_id is None:
            self.user_dir = root
        else:
            self.user_dir = root / USERS_DIRNAME / (directory or safe_user_id(user_id))
        self.manifest = self.user_dir / manifest_filename
        self.lock = self.user_dir / LOCK_FILENAME
        self.journal = self.user_dir / JOURNAL_FILENAME
        self.owner = self.user_dir / OWNER_FILENAME
        self.recovery = self.user_dir / RECOVERY_DIRNAME
        self._agents: dict[str, ScopePaths] = {}

    def agent(self, agent: str) -> ScopePaths:
        paths = self._agents.get(agent)
        if paths is None:
            paths = self._agents[agent] = ScopePaths(self, agent)
        return paths

    def inside(self, relative: str) -> Path | None:
        """Resolve a path recorded relative to the user directory, or ``None`` if it escapes."""
        if not relative or "\x00" in relative or Path(relative).is_absolute():
            return None
        parts = Path(relative).parts
        if any(part in ("..", "") for part in parts):
            return None
        return self.user_dir.joinpath(*parts)

    def relative(self, path: Path) -> str:
        return path.relative_to(self.user_dir).as_posix()


class ScopePaths:
    """The files of one scope (one agent of one user)."""

    __slots__ = (
        "agent",
        "agent_dir",
        "archive_dir",
        "archive_index",
        "audit",
        "facts_dir",
        "legacy_manifest",
        "metadata_dir",
        "owner",
        "regret_events",
        "shadow_marks",
        "threads_dir",
        "usage",
        "user",
    )

    def __init__(self, user: UserPaths, agent: str) -> None:
        self.user = user
        self.agent = agent
        self.agent_dir = user.user_dir / AGENTS_DIRNAME / agent_directory(agent)
        # Written only where the directory's name is not the agent's (a long name).
        self.owner = self.agent_dir / OWNER_FILENAME
        self.facts_dir = self.agent_dir / "facts"
        self.metadata_dir = self.agent_dir / ".metadata"
        self.usage = self.metadata_dir / USAGE_FILENAME
        self.audit = self.metadata_dir / AUDIT_FILENAME
        self.archive_dir = self.metadata_dir / ARCHIVE_DIRNAME
        self.archive_index = self.metadata_dir / ARCHIVE_INDEX_FILENAME
        self.threads_dir = self.metadata_dir / THREADS_DIRNAME
        self.regret_events = self.metadata_dir / REGRET_EVENTS_FILENAME
        self.shadow_marks = self.metadata_dir / SHADOW_MARKS_FILENAME
        # A per-agent ``memory.json`` of the original's first layout.
        self.legacy_manifest = self.agent_dir / "memory.json"

    def fact(self, fact_id: str) -> Path:
        """The Markdown file of a fact (the id must already be validated)."""
        return self.facts_dir / fact_shard(fact_id) / f"{fact_id}.md"

    def archived(self, fact_id: str) -> Path:
        return self.archive_dir / f"{fact_id}.json"

    def thread_mark(self, thread_id: str) -> Path:
        """The mark file of a conversation: named by a digest, as a thread id may be any text."""
        digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self.threads_dir / f"{digest}.json"


# ---------------------------------------------------------------------------
# Durable file replacement: write a temporary file, fsync, rename, fsync the directory.
#
# A reader sees either the old file or the new one, never a mix, and once a
# function here returns, the change survives a power cut. Every new content
# goes through :func:`write_temporary`, the one place the store writes file
# contents: a ``.<name>.<random>.tmp`` file in the target's own directory
# (a rename is atomic only within one file system), created exclusively with
# the permissions the umask gives (usually 0644) — as the original DeerMem
# creates its files, so a directory both share stays readable to each.
# Temporary files are hidden from every listing the store makes. The fsyncs
# of one step of a journaled commit run together (flush_together); the others
# one after another, in the caller's thread.
# ---------------------------------------------------------------------------


_TMP_SUFFIX: Final = ".tmp"


# A file name's limit on common file systems, in bytes; a temporary name keeps
# to it by shortening the target's name, never the random part.
_MAX_NAME_BYTES: Final = 255

_RANDOM_HEX: Final = 16

_NAME_ATTEMPTS: Final = 100


# A new file, never an existing one (O_EXCL also refuses a symbolic link).
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC

FILE_MODE: Final = 0o666
"""The mode new files are created with, less the umask: readable and writable by
whom the umask allows, never executable — what ``open(path, "w")`` gives."""


def is_temporary(name: str) -> bool:
    """Whether a directory entry is a temporary file (ours, or the original DeerMem's)."""
    return name.startswith(".") and name.endswith(_TMP_SUFFIX)


def write_temporary(path: Path, data: bytes, *, flush: bool = True, mode: int = FILE_MODE) -> Path:
    """Write ``data`` to a new temporary file beside ``path``; return its path.

    The file is created exclusively (never an existing file or a symbolic
    link), with ``mode`` less the umask — by default as ``open(path, "wb")``
    would create ``path`` itself; a file only its owner may read passes
    ``0o600``. ``flush`` fsyncs the content before returning. On failure the
    temporary file is removed again.
    """
    for _ in range(_NAME_ATTEMPTS):
        temporary = path.parent / _temporary_name(path.name)
        try:
            fd = os.open(temporary, _CREATE_FLAGS, mode)
            break
        except FileExistsError:  # the name is taken: draw another
            continue
    else:
        raise FileExistsError(f"{path.parent}: no free temporary file name for {path.name}")
    try:
        try:
            # Straight to the descriptor: a buffered file object would add a
            # stat, an ioctl and a seek per file, and buffer nothing.
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if flush:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise _naming(error, path) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def is_temporary_of(entry: str, name: str) -> bool:
    """Whether the directory entry ``entry`` is a temporary file made for ``name``.

    What :func:`write_temporary` leaves behind if the process is killed before
    the file took its name.
    """
    prefix = _temporary_name(name)[: -(_RANDOM_HEX + len(_TMP_SUFFIX))]  # ".<name>."
    random = entry[len(prefix) : -len(_TMP_SUFFIX)]
    return (
        entry.startswith(prefix)
        and entry.endswith(_TMP_SUFFIX)
        and len(random) == _RANDOM_HEX
        and all(character in "0123456789abcdef" for character in random)
    )


def _naming(error: OSError, path: Path) -> OSError:
    """``error`` naming ``path``, if it names no file: a write or an fsync on a
    descriptor fails without a name ("[Errno 28] No space left on device")."""
    if error.filename is not None:
        return error
    return OSError(error.errno, error.strerror, str(path))  # of the errno's own subclass


def _temporary_name(name: str) -> str:
    """``.<name>.<random>.tmp``, with ``name`` shortened to keep within 255 bytes."""
    room = _MAX_NAME_BYTES - len(f"..{'0' * _RANDOM_HEX}{_TMP_SUFFIX}")
    stem = name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "surrogateescape")
    return f".{stem}.{os.urandom(_RANDOM_HEX // 2).hex()}{_TMP_SUFFIX}"


def fsync_path(path: Path) -> None:
    """fsync a file's content, or a directory's entries (creations, renames, removals)."""
    global _last_flush_seconds
    fd = os.open(path, os.O_RDONLY)
    try:
        started = time.perf_counter()
        os.fsync(fd)
        _last_flush_seconds = time.perf_counter() - started
    except OSError as error:
        raise _naming(error, path) from None
    finally:
        os.close(fd)


def make_directories(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return the parents whose entries changed.

    The returned directories need an fsync for the new entries to be durable.

    Raises:
        NotAStoreError: a directory to create is a symbolic link to nothing
            (an unmounted disk, a moved directory), which no ``mkdir`` mends.
    """
    missing: list[Path] = []
    current = directory
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for item in reversed(missing):
        try:
            item.mkdir()
        except FileExistsError:
            if item.is_dir():
                continue
            link = broken_link(item)
            if link is not None:
                raise NotAStoreError(item, f"{link}; check the path") from None
            raise
    return [item.parent for item in missing]


def broken_link(path: Path) -> str | None:
    """What ``path`` is, if it is a symbolic link to no directory ("a symbolic link
    to /mnt/disk/memory, which does not exist"); ``None`` otherwise."""
    try:
        target = path.parent / path.readlink()  # an absolute target stays as it is
    except OSError:  # not a link
        return None
    if path.is_dir():
        return None
    what = "is not a directory" if path.exists() else "does not exist"
    return f"a symbolic link to {target}, which {what}"


def atomic_write(path: Path, data: bytes, *, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``data`` atomically and durably (a new file of ``mode``
    less the umask; see :func:`write_temporary`).

    On any failure the temporary file is removed and ``path`` is untouched.
    """
    replace_files([(path, data)], mode=mode)


def remove_durably(path: Path) -> bool:
    """Remove ``path`` if it exists and make the removal durable; return whether it existed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_path(path.parent)
    return True


def replace_files(
    changes: Iterable[tuple[Path, bytes | None]], *, journaled: bool = False, mode: int = FILE_MODE
) -> None:
    """Replace (or, for ``None``, remove) each file atomically; all are durable on return.

    Each file is old or new after a crash, never a mix, but the set is not
    atomic as a whole: a commit that needs that runs this under its journal.
    Every new content is flushed before it is renamed into place — unless
    ``journaled``: then the caller's journal puts every file back after a
    crash, so the contents are renamed first and flushed with the
    directories at the end, as the commit protocol states.
    """
    written: list[Path] = []
    directories: set[Path] = set()
    for path, data in changes:
        if data is None:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            directories.add(path.parent)
            continue
        directories.update(make_directories(path.parent))
        temporary = write_temporary(path, data, flush=not journaled, mode=mode)
        try:
            temporary.replace(path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        directories.add(path.parent)
        if journaled:
            written.append(path)
    flush_together([*written, *sorted(directories)])


# At most this many fsyncs of one commit run at once (a commit at the cap flushes
# about eight files and directories in its second step).
_FLUSH_THREADS: Final = 8
# How long this process's last fsync took. One that returns in microseconds
# waited for no device (tmpfs): flushing together would only add the threads'
# hand-offs (+20 % on a commit on tmpfs), so such flushes stay in this thread.
# A commit's first step flushes the journal alone, so its second step decides
# on the same file system's latest flush.
_QUICK_FLUSH_SECONDS: Final = 50e-6
_last_flush_seconds = 1.0
_flush_pool: ThreadPoolExecutor | None = None
_flush_pool_pid = 0
_flush_pool_lock: Final = threading.Lock()


def flush_together(paths: list[Path]) -> None:
    """fsync every path, all at once; return when all are durable.

    The flushes of one commit step are independent (the journal, already
    durable, covers them), and a disk serves concurrent flushes together —
    one after another they cost one device flush each (11 ms against 0.6 ms
    for four, on this project's VM under load). The first path is flushed in
    the calling thread, the others by a small pool of this process — unless
    the last flush waited for no device (see ``_QUICK_FLUSH_SECONDS``). If any
    fails, the first error in ``paths``' order is raised, after all finished.
    """
    if len(paths) < 2 or _last_flush_seconds < _QUICK_FLUSH_SECONDS:
        for path in paths:
            fsync_path(path)
        return
    futures = [_pool().submit(fsync_path, path) for path in paths[1:]]
    errors: list[BaseException] = []
    try:
        fsync_path(paths[0])
    except BaseException as error:  # wait for the others before raising
        errors.append(error)
    for future in futures:
        failure = future.exception()
        if failure is not None:
            errors.append(failure)
    if errors:
        raise errors[0]


def _pool() -> ThreadPoolExecutor:
    """This process's flush threads (a forked child makes its own: threads do not fork).

    All of them are started at once: an executor starts a thread only when it
    counts no idle one, and it counts finished tasks, not threads, so left to
    itself it may queue a step's flushes behind each other on fewer threads.
    """
    global _flush_pool, _flush_pool_pid
    with _flush_pool_lock:
        if _flush_pool is None or _flush_pool_pid != os.getpid():
            pool = ThreadPoolExecutor(_FLUSH_THREADS, thread_name_prefix="deermem-fsync")
            started = threading.Barrier(_FLUSH_THREADS + 1)
            for _ in range(_FLUSH_THREADS):  # each waits until all are running
                pool.submit(started.wait)
            started.wait()
            _flush_pool, _flush_pool_pid = pool, os.getpid()
        return _flush_pool


def write_store_settings(
    root: str | os.PathLike[str], text: str, *, force: bool = False, mode: int = FILE_MODE
) -> Literal["created", "unchanged", "replaced"]:
    """Write a store's settings file (:func:`deermem.config.render_store_settings`'s
    text), never silently replacing other settings.

    The file is replaced atomically and durably (:func:`atomic_write`), so a
    reader sees the old settings or the new ones; nothing else in the root is
    touched. The root directory is created if needed. The file is created as
    the umask says (``mode`` less the umask), like the store's other files:
    every reader of the store reads it first, so a store shared with another
    account (DeerFlow's, a reader's) stays readable to it. What deermem
    writes there is no secret (docs/configuration.md): the API key is no
    setting and a database URL is never written. A copy passes its source's
    mode, so it is no more readable than the file it copies.

    Raises:
        StoreSettingsExistError: the root already holds different settings
            and ``force`` is false; nothing is written.
    """
    path = store_settings_path(root)
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    except (OSError, UnicodeDecodeError):
        current = ""  # unreadable: different by definition
    if current == text:
        return "unchanged"
    if current is not None and not force:
        raise StoreSettingsExistError(str(path))
    atomic_write(path, text.encode("utf-8"), mode=mode)
    return "created" if current is None else "replaced"


# ---------------------------------------------------------------------------
# A fact file: Markdown with YAML front matter (``memory.json`` is deermem.store.records').
#
# A fact file is what the original DeerMem writes for the same fact, byte for
# byte::
#
#     ---
#     <yaml.safe_dump(allow_unicode=True, sort_keys=False) of every field but
#      content and title, in the fact's key order, then user_id and agent_name>
#     ---
#
#     # <title>
#
#     <content>
#
# The front matter is what PyYAML's pure-Python safe dumper writes — the one
# ``yaml.safe_dump`` is — because libyaml's escapes emoji and breaks long lines
# elsewhere; the writer below reproduces that dumper's output for the values a
# front matter holds and hands anything else to the dumper itself (the next
# section). It is read with libyaml's safe loader when PyYAML has it. The one
# deliberate difference: front matter holding U+0085 is written with non-ASCII
# characters escaped, because the pure-Python dumper writes that character raw
# and every reader reads it back as a space.
#
# The title is the fact's explicit ``title`` if it has one, else the first line
# of its content; it is never in the front matter. Reading gives back an
# explicit title only when the heading differs from the first content line, so
# a title derived from content follows the content when it is edited.
#
# Decoding is strict: anything that is not a well-formed fact of the expected
# scope raises :class:`~deermem.CorruptMemoryFile` naming the file and the
# problem, because a memory that silently loads as empty is overwritten by the
# next write.
# ---------------------------------------------------------------------------


_OPEN: Final = "---\n"

_CLOSE: Final = "\n---\n"


# Keys a fact holds that its front matter does not: the body's, and the
# scope, which is written as the directory's user_id and agent_name.
_NOT_FRONT_MATTER: Final = frozenset({"content", "title", "scope", "user_id", "agent_name"})


# The pure-Python safe dumper, whose output is the original's byte for byte (and the
# writer's); front matter is read with YAML_LOADER, which refuses a repeated key.
_DUMPER: Final[Any] = yaml.SafeDumper


class _UnaliasedDumper(yaml.SafeDumper):
    """The safe dumper, writing a value a fact holds twice (one list under two keys)
    out twice: an anchor and an alias, which it would write, are refused when read
    (:class:`~deermem.model.YamlAliasError`). A fact's value holds no cycle (it is
    nested at most :data:`~deermem.model.MAX_NESTING` deep), so this ends."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def encode_fact(fact: Fact, scope: Scope) -> bytes:
    """The Markdown file of a fact, with the scope of the directory it goes to."""
    front = {key: value for key, value in fact.to_dict().items() if key not in _NOT_FRONT_MATTER}
    # The original writes the scope last.
    front["user_id"] = scope.user_id
    front["agent_name"] = scope.agent
    yaml_text = _dump_front_matter(front).strip()
    text = f"{_OPEN}{yaml_text}\n---\n\n# {fact.heading()}\n\n{fact.content}\n"
    return text.encode("utf-8")


def _dump_front_matter(front: Mapping[str, object]) -> str:
    """What the original writes: ``yaml.safe_dump(front, allow_unicode=True, sort_keys=False)``.

    One exception: PyYAML's dumper writes U+0085 (NEXT LINE) raw, and every
    YAML reader reads it back as a space; such front matter is written with
    non-ASCII characters escaped instead — lossless, still YAML.
    """
    text = dump_front_matter(dict(front), dumper=_UnaliasedDumper)
    if "\x85" in text:
        text = yaml.dump(dict(front), Dumper=_UnaliasedDumper, allow_unicode=False, sort_keys=False)
    return text


_Value = TypeVar("_Value")


class KnownFiles(Generic[_Value]):
    """What this process last read or wrote at each of a kind of file: its exact bytes
    and what they decode to (or were encoded from).

    A commit rewrites a few files whole — ``memory.json``, the audit, the archive
    index — though it changes little in them; a file that still holds the bytes
    this process last read or wrote there is neither decoded nor encoded again.
    The value must be a pure function of the bytes (any edit, by anyone, is
    other bytes). At most ``limit`` files are kept: when full, all are forgotten.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: dict[Path, tuple[bytes, _Value]] = {}

    def get(self, path: Path, data: bytes | None) -> _Value | None:
        """What ``data`` at ``path`` is, if this process last read or wrote those bytes there."""
        entry = self._entries.get(path)
        if entry is None or data is None or entry[0] != data:
            return None
        return entry[1]

    def latest(self, path: Path) -> _Value | None:
        """The value last kept for ``path``, whatever the file holds now (for the parts of
        a value that do not depend on the bytes)."""
        entry = self._entries.get(path)
        return None if entry is None else entry[1]

    def put(self, path: Path, data: bytes, value: _Value) -> None:
        """Remember that ``data`` at ``path`` is ``value``."""
        if len(self._entries) >= self._limit and path not in self._entries:
            self._entries.clear()
        self._entries[path] = (data, value)


# Facts already decoded in this process, by the exact bytes of their file.
#
# A cold load (a new store, a new process's first command, another replica's
# commit) reads every fact file of the scope; parsing the YAML and checking the
# fact was ~70 % of it. Decoding is a pure function of the file's bytes, the
# scope and the file's stem (the path only names the file in an error), so a
# fact whose bytes were decoded before is served from here: the key is the
# content itself, not a stat stamp, so any edit — by hand, in the same second,
# at the same size — is a different key and is decoded afresh. Facts are
# frozen, so one object may serve every load. Errors are never cached. At most
# _DECODED_LIMIT entries (the least recently used go first): a 10,000-fact
# scope fits, and the bytes kept are the files' own size.
_DECODED_LIMIT: Final = 10_000
_decoded: OrderedDict[tuple[bytes, Scope, str], Fact] = OrderedDict()
_decoded_lock: Final = threading.Lock()


def decode_fact(data: bytes, path: str | Path, scope: Scope, expected_id: str) -> Fact:
    """Read a fact file; ``expected_id`` is the file's stem.

    Bytes decoded before in this process are answered from memory (see above).

    Raises:
        CorruptMemoryFile: malformed front matter, an id that is not the file
            name, a scope that is not the directory's, or an invalid field.
    """
    key = (data, scope, expected_id)
    with _decoded_lock:
        fact = _decoded.get(key)
        if fact is not None:
            _decoded.move_to_end(key)
            return fact
    fact = _decode_fact(data, path, scope, expected_id)
    with _decoded_lock:
        _decoded[key] = fact
        if len(_decoded) > _DECODED_LIMIT:
            _decoded.popitem(last=False)
    return fact


def forget_decoded_facts() -> None:
    """Empty the decoded-fact memory, so the next load parses every file as a new
    process's first load does (for benchmarks that time that load)."""
    with _decoded_lock:
        _decoded.clear()
    _user_id_in.cache_clear()


def _decode_fact(data: bytes, path: str | Path, scope: Scope, expected_id: str) -> Fact:
    try:
        text = _fact_text(data)
    except UnicodeDecodeError as error:
        raise CorruptMemoryFile(path, f"not UTF-8 text ({error.reason})") from None
    if not text.startswith(_OPEN):
        raise CorruptMemoryFile(path, _not_front_matter(text))
    end = text.find(_CLOSE, len(_OPEN) - 1)
    if end < 0:
        raise CorruptMemoryFile(path, "the front matter is not closed by a '---' line")
    front_text = text[len(_OPEN) : end + 1]
    meta = _front_matter(front_text, path)
    heading, content = _split_body(text[end + len(_CLOSE) :])
    _check_scope(meta, path, scope)
    fact_id = meta.get("id")
    if fact_id != expected_id:
        raise CorruptMemoryFile(
            path, f"the id {preview(fact_id)} in the front matter does not match the file name"
        )
    meta = {k: v if k in TIMESTAMP_FIELDS else _as_json(v, 0) for k, v in meta.items()}
    meta["scope"] = {"userId": scope.user_id, "agentName": scope.agent}
    meta["content"] = content
    if heading is not None:
        meta["title"] = heading  # the model drops a title that is the derived heading
    try:
        return Fact.from_dict(meta)
    except FactValidationError as error:
        raise CorruptMemoryFile(path, f"invalid fact: {error}") from None


_CRLF_OPEN: Final = "---\r\n"


def _fact_text(data: bytes) -> str:
    """A fact file's text, with a file saved with Windows line ends (CRLF) read as LF.

    The original DeerMem reads fact files in Python's text mode, which turns
    ``\r\n`` and a lone ``\r`` into ``\n``, so a file a Windows editor saved
    is a fact to it; deermem reads such a file — one whose opening line ends
    in CRLF — the same way. A file that opens with ``---\n`` (every file
    deermem or the original writes) is read byte for byte as before, so a
    ``\r`` in its content stays. Nothing is rewritten on reading: the file
    keeps its CRLF until a commit changes the fact, which writes it as every
    fact is written (LF).

    Raises:
        UnicodeDecodeError: the bytes are not UTF-8.
    """
    text = data.decode("utf-8")
    if text.startswith(_CRLF_OPEN):
        return text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _not_front_matter(text: str) -> str:
    """Why a fact file's text does not open with the ``---`` line, naming the real cause."""
    if text.startswith("\ufeff"):
        # The original reads the mark as text and refuses the file too; a file that
        # one of the two refuses would stop being the other's after the next commit.
        return (
            "starts with a UTF-8 byte-order mark (BOM), which neither deermem nor the "
            "original DeerMem reads: save the file as UTF-8 without a BOM"
        )
    if text.startswith("---\r"):
        return "the opening '---' line ends in a carriage return alone: save with LF line ends"
    return "does not start with YAML front matter ('---')"


def _front_matter(text: str, path: str | Path) -> dict[str, object]:
    try:
        meta = yaml.load(text, Loader=YAML_LOADER)
    except RepeatedYamlKey as error:
        # Line numbers count from the opening '---' line, as an editor shows them.
        raise CorruptMemoryFile(
            path,
            f"front-matter key {preview(error.key)} appears twice (again on line "
            f"{error.line + 1}): which value is meant cannot be told; remove one",
        ) from None
    except YamlAliasError as error:
        raise CorruptMemoryFile(
            path,
            f"the front-matter value anchored on line {error.line + 1} is repeated by an "
            "alias (*name), which is not read: write each value out",
        ) from None
    except yaml.YAMLError as error:
        problem = yaml_problem(error)
        raise CorruptMemoryFile(path, f"the front matter is not valid YAML: {problem}") from None
    if not isinstance(meta, dict):
        raise CorruptMemoryFile(
            path, f"the front matter must be a mapping, found {type(meta).__name__}"
        )
    if set(map(type, meta)) - {str}:
        key = next(k for k in meta if not isinstance(k, str))
        raise CorruptMemoryFile(path, f"front-matter key {preview(key)} is not a string")
    for key in ("content", "title"):
        if key in meta:
            raise CorruptMemoryFile(
                path, f"the front matter must not hold {key!r}; it belongs in the body"
            )
    return meta


def _as_json(value: object, depth: int) -> object:
    """A front-matter value with YAML's own timestamps as ISO text.

    A fact also goes to archive entries and exports, which are JSON; an
    unquoted date in a hand-edited file is read as the text it shows. (The
    known timestamp fields are the model's to format.) Below the nesting a
    fact may hold, the value is left as it is: the fact's own check refuses
    it, naming the field, so this never recurses deeper than that.
    """
    if isinstance(value, date):
        return value.isoformat()
    if depth > MAX_NESTING:
        return value
    if isinstance(value, list):
        return [_as_json(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {_as_json(key, depth + 1): _as_json(item, depth + 1) for key, item in value.items()}
    return value


def _split_body(body: str) -> tuple[str | None, str]:
    """The ``# heading`` line (if any) and the content below it."""
    rest = body.lstrip("\n")
    heading: str | None = None
    if rest.startswith("# "):
        line, _, rest = rest.partition("\n")
        heading = line[2:].strip()
        if rest.startswith("\n"):
            rest = rest[1:]
    return heading, rest.rstrip()


def _check_scope(meta: dict[str, object], path: str | Path, scope: Scope) -> None:
    """The front matter's scope must be the directory's (isolation between scopes)."""
    agent = meta.pop("agent_name", scope.agent)
    user = meta.pop("user_id", scope.user_id)
    stored_scope = meta.pop("scope", None)
    if isinstance(stored_scope, Mapping):
        agent = stored_scope.get("agentName", agent)
        user = stored_scope.get("userId", user)
    if isinstance(agent, str) and agent.lower() != scope.agent:
        raise CorruptMemoryFile(
            path,
            f"scope mismatch: the fact belongs to agent {preview(agent)}, not {scope.agent!r}",
        )
    if not isinstance(agent, str):
        raise CorruptMemoryFile(
            path, f"scope mismatch: agent_name {preview(agent)} is not a string"
        )
    if user != scope.user_id:
        raise CorruptMemoryFile(
            path, "scope mismatch: the fact belongs to another user than this directory's"
        )


# ---------------------------------------------------------------------------
# Front matter as PyYAML's pure-Python safe dumper writes it, without its pipeline.
#
# :func:`dump_front_matter` returns what ``yaml.safe_dump(data,
# allow_unicode=True, sort_keys=False)`` returns, character for character, for
# every value. The values a front matter holds — text, whole numbers, floats,
# booleans, ``None``, lists and mappings of those, at any depth — are written
# here; any other value (a tuple, a date, a subclass, a container met twice,
# which YAML writes as an anchor, a key PyYAML writes as ``? key``) is handed to
# PyYAML itself.
#
# Why: the dumper's pipeline (representer, serializer, an event state machine,
# a per-character loop per scalar) was about half of a durable commit's CPU,
# and its output is the format (libyaml's differs). This writer reproduces the
# emitter's observable rules for block style and nothing more:
#
# * layout: a mapping's keys at its indent; a nested mapping two further; a
#   list under a key at the key's own indent (``- item``), a list in a list two
#   further; empty ones as ``[]`` and ``{}``; a scalar's continuation lines two
#   past the collection that holds it;
# * the scalar style: plain when the text reads back as text (PyYAML's own
#   implicit resolvers decide) and nothing in it needs quoting; else single
#   quotes; else (special characters, a space beside a line break) double
#   quotes with escapes;
# * folding: past column 80 a single space between words becomes a line break
#   (plain, single-quoted), and a double-quoted line breaks with ``\\``.
#
# The resolvers, the escape table and the scalar representers are PyYAML's,
# looked up at run time, so the rules that can change with PyYAML's version
# come from it. tests/test_store_frontmatter.py holds the proof: hypothesis over
# the full Unicode range, comparing with PyYAML.
# ---------------------------------------------------------------------------


_WIDTH: Final = 80  # the emitter's best_width
_INDENT: Final = 2  # its best_indent
_STR_TAG: Final = "tag:yaml.org,2002:str"
_INT_TAG: Final = "tag:yaml.org,2002:int"
_BOOL_TAG: Final = "tag:yaml.org,2002:bool"
_NULL_TAG: Final = "tag:yaml.org,2002:null"
_TAG_PREFIX: Final = "tag:yaml.org,2002:"
# A key is written "key: value" only while its tag (written "!!str") and
# text together are shorter than this; longer keys get "? key" lines.
_SIMPLE_KEY_LIMIT: Final = 128
# Deeper values go to PyYAML (which recurses too): a guard, not a format rule.
_MAX_WRITER_DEPTH: Final = 200

_BREAKS: Final = "\n\x85\u2028\u2029"
# What the emitter counts as white space around an indicator character.
_BLANKS: Final = "\0 \t\r\n\x85\u2028\u2029"
# Characters only double quotes can hold (with allow_unicode): not printable
# in YAML's sense — controls, DEL..U+009F but U+0085, surrogates, U+FEFF,
# U+FFFE, U+FFFF and U+10FFFF (the emitter's range stops one short). Written
# as that list rather than as the complement of the printable ranges: the same
# characters, but the complement's tens of thousands of code points cost
# milliseconds to compile at every start-up (tests/test_store_frontmatter.py
# compares both spellings on every code point).
_SPECIAL: Final = "[\x00-\x09\x0b-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufeff\ufffe\uffff\U0010ffff]"
# Double quotes: a special character, or a space next to a line break.
_NEEDS_DOUBLE: Final = re.compile(f"{_SPECIAL}|[{_BREAKS}] | [{_BREAKS}]")
# Not plain (given no special character): a leading indicator or space, a
# document marker, ": " or "#" after a blank, a trailing space, a line break.
_NOT_PLAIN: Final = re.compile(
    "^[ #,\\[\\]{}&*!|>'\"%@`]"
    f"|^[?-](?:[{_BLANKS}]|\\Z)"
    "|^(?:---|\\.\\.\\.)"
    f"|:(?:[{_BLANKS}]|\\Z)"
    f"|[{_BLANKS}]#"
    "| \\Z"
    f"|[{_BREAKS}]"
)
# Characters a double-quoted scalar escapes (astral ones too, unlike the
# others): ``"``, ``\\``, U+2028, U+2029, U+FEFF and everything outside
# U+0020..U+007E, U+00A0..U+D7FF and U+E000..U+FFFD (listed, as above).
_ESCAPED: Final = re.compile(
    '["\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe-\U0010ffff]'
)
# Single-quoted text, cut where the writer may act: quotes, space runs, break runs, words.
_SINGLE_TOKENS: Final = re.compile(f"'|[ ]+|[{_BREAKS}]+|[^' {_BREAKS}]+")
_SPACE_RUNS: Final = re.compile("( +)")
_BREAK: Final = re.compile(f"[{_BREAKS}]")

_REPRESENTER: Final = SafeRepresenter()
_SCALAR_TYPES: Final = (int, float, bool, type(None))


class UnsupportedByWriter(Exception):
    """A value the front-matter writer does not cover; PyYAML writes it."""


def dump_front_matter(data: object, *, dumper: Any = _DUMPER) -> str:
    """``yaml.safe_dump(data, allow_unicode=True, sort_keys=False)``, written directly
    for the values a front matter holds (see the section's comment); what the
    writer does not cover is written by ``dumper``.

    Raises what PyYAML raises for a value it cannot represent.
    """
    if type(data) is dict and data:
        try:
            return FrontMatterWriter().document(data)
        except UnsupportedByWriter:
            pass
    text: str = yaml.dump(data, Dumper=dumper, allow_unicode=True, sort_keys=False)
    return text


class FrontMatterWriter:
    """One document: the parts written so far, and the containers met (for anchors).

    :meth:`document` raises :class:`UnsupportedByWriter` for a value it does
    not cover; :func:`dump_front_matter` then hands the value to PyYAML.
    """

    __slots__ = ("parts", "seen")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.seen: set[int] = set()

    def document(self, mapping: dict[object, object]) -> str:
        self.seen.add(id(mapping))
        self.mapping(mapping, 0, "", 0)
        self.parts.append("\n")
        return "".join(self.parts)

    # Collections. ``indent`` is the collection's: its keys' (or dashes') column.

    def mapping(self, mapping: dict[object, object], indent: int, first: str, depth: int) -> None:
        """Each key on its own line at ``indent``; ``first`` goes before the first key."""
        parts = self.parts
        newline = "\n" + " " * indent
        for number, (key, value) in enumerate(mapping.items()):
            parts.append(newline if number else first)
            text = _str_key(key) if type(key) is str else _key(key)
            parts.append(text)
            parts.append(":")
            self.node(value, indent, indent + len(text) + 1, True, depth + 1)

    def sequence(self, items: list[object], indent: int, first: str, depth: int) -> None:
        """Each item after a dash at ``indent``; ``first``: the first dash and what precedes it."""
        parts = self.parts
        newline = "\n" + " " * indent + "-"
        for number, item in enumerate(items):
            parts.append(newline if number else first)
            self.node(item, indent, indent + 1, False, depth + 1)

    def node(self, value: object, indent: int, column: int, in_mapping: bool, depth: int) -> None:
        """A value after ``key:`` (``in_mapping``) or ``-``, which end at ``column``."""
        kind = type(value)
        if kind is str:
            assert isinstance(value, str)
            self.parts.append(" ")
            if len(value) <= _MEMO_LENGTH:
                self.parts.append(_str_value(value, column + 1, indent + _INDENT))
            else:
                self.parts.append(_value(value, _STR_TAG, column + 1, indent + _INDENT))
            return
        if kind in _SCALAR_TYPES:
            text, tag = _yaml_scalar(value)
            self.parts.append(" ")
            self.parts.append(_value(text, tag, column + 1, indent + _INDENT))
            return
        if kind is not dict and kind is not list:
            raise UnsupportedByWriter
        if id(value) in self.seen:
            raise UnsupportedByWriter  # met again: PyYAML writes an anchor and an alias
        if depth > _MAX_WRITER_DEPTH:
            raise UnsupportedByWriter
        self.seen.add(id(value))
        if isinstance(value, dict):
            if not value:
                self.parts.append(" {}")
                return
            inner = indent + _INDENT
            # Under a key, on the next line; in a list, beside the dash.
            self.mapping(value, inner, "\n" + " " * inner if in_mapping else " ", depth)
        else:
            assert isinstance(value, list)
            if not value:
                self.parts.append(" []")
                return
            if in_mapping:  # a list under a key is not indented
                self.sequence(value, indent, "\n" + " " * indent + "-", depth)
            else:
                self.sequence(value, indent + _INDENT, " -", depth)


# Scalars. What a key or a scalar value is written as depends on its text, its
# tag, its position and PyYAML's implicit resolvers alone (nothing in deermem
# changes those), and a fact's files repeat most of their keys and many of their
# values (its category, the source's type, the scope, the times of one commit):
# the texts of exact ``str`` keys and short ``str`` values are kept for the last
# few hundred, and each is worked out once, not once per file. (Other scalars
# are cheap to write, and ``0.0 == -0.0`` and ``1 == True`` would share an
# entry; a long value is rarely repeated, and would make the memo large.)
_MEMO_SIZE: Final = 512
_MEMO_LENGTH: Final = 256  # keys are shorter (_SIMPLE_KEY_LIMIT)


def _implicit(text: str, tag: str) -> bool:
    """Whether ``text`` written plain reads back with ``tag`` (PyYAML's resolver)."""
    resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = (
        yaml.SafeDumper.yaml_implicit_resolvers
    )
    for found, pattern in resolvers.get(text[0] if text else "", ()):
        if pattern.match(text):
            return found == tag
    for found, pattern in resolvers.get(None, ()):
        if pattern.match(text):
            return found == tag
    return tag == _STR_TAG


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _str_key(key: str) -> str:
    """:func:`_key` of a ``str`` key, kept for the keys written last."""
    return _key(key)


def _key(key: object) -> str:
    """A key written ``key:``, never folded; other keys are PyYAML's."""
    if type(key) is not str and type(key) not in _SCALAR_TYPES:
        raise UnsupportedByWriter
    text, tag = _yaml_scalar(key)
    tag_length = len(tag) - len(_TAG_PREFIX) + 2  # "!!str"
    if not text or tag_length + len(text) >= _SIMPLE_KEY_LIMIT or _BREAK.search(text):
        raise UnsupportedByWriter
    style = _scalar_style(text, _implicit(text, tag))
    if style == "":
        return text
    if tag != _STR_TAG:
        raise UnsupportedByWriter  # quoted, it would carry its tag
    if style == "'":
        return "'" + text.replace("'", "''") + "'"
    return _double_quoted(text, 0, 0, split=False)


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _str_value(text: str, column: int, indent: int) -> str:
    """:func:`_value` of a ``str`` value, kept for the values written last."""
    return _value(text, _STR_TAG, column, indent)


def _value(text: str, tag: str, column: int, indent: int) -> str:
    """A scalar value whose first character goes at ``column``; continuation lines
    (when it folds or holds line breaks) start at ``indent``."""
    if not text:
        if _implicit(text, tag):
            raise UnsupportedByWriter  # plain and empty: PyYAML writes no space either
        return "''"
    style = _scalar_style(text, _implicit(text, tag))
    if style == "":
        if column + len(text) <= _WIDTH:  # no word ends past the width
            return text
        return _plain(text, column, indent)
    if tag != _STR_TAG:
        raise UnsupportedByWriter
    if style == "'":
        return _single_quoted(text, column, indent)
    return _double_quoted(text, column, indent, split=True)


def _yaml_scalar(value: object) -> tuple[str, str]:
    """The text and tag PyYAML's safe representer gives a scalar (its ``represent_str``,
    ``_bool``, ``_none`` and ``_int`` are these one-liners; floats go through it)."""
    kind = type(value)
    if kind is str:  # exactly: a subclass is PyYAML's to refuse
        assert isinstance(value, str)
        return value, _STR_TAG
    if kind is bool:
        return ("true" if value else "false"), _BOOL_TAG
    if value is None:
        return "null", _NULL_TAG
    if kind is int:
        try:
            return str(value), _INT_TAG
        except ValueError:  # too many digits for str(): PyYAML raises it itself
            raise UnsupportedByWriter from None
    node = yaml.SafeDumper.yaml_representers[kind](_REPRESENTER, value)
    text: str = node.value
    return text, node.tag


def _scalar_style(text: str, implicit: bool) -> str:
    """``""`` (plain), ``"'"`` or ``'"'`` for non-empty text, as the emitter chooses."""
    if _NEEDS_DOUBLE.search(text):
        return '"'
    if implicit and not _NOT_PLAIN.search(text):
        return ""
    return "'"


def _plain(text: str, column: int, indent: int) -> str:
    """Plain text past the width: a single space after column 80 becomes a line break.

    Plain text has no line breaks and no leading or trailing space, so it is
    words separated by runs of spaces.
    """
    out: list[str] = []
    for number, piece in enumerate(_SPACE_RUNS.split(text)):
        if number % 2 and len(piece) == 1 and column > _WIDTH:
            out.append("\n" + " " * indent)
            column = indent
        else:
            out.append(piece)
            column += len(piece)
    return "".join(out)


class _Line:
    """The emitter's position while it writes a quoted scalar (its write_indent rule)."""

    __slots__ = ("column", "indent", "indention", "out", "whitespace")

    def __init__(self, column: int, indent: int) -> None:
        self.out: list[str] = []
        self.column = column
        self.indent = indent
        # After the opening quote: not at white space, not in indentation.
        self.whitespace = False
        self.indention = False

    def write(self, text: str) -> None:
        self.out.append(text)
        self.column += len(text)

    def line_break(self, text: str = "\n") -> None:
        self.out.append(text)
        self.column = 0
        self.whitespace = self.indention = True

    def to_indent(self) -> None:
        """A new line unless the position is still in indentation, then spaces to the indent."""
        if (
            not self.indention
            or self.column > self.indent
            or (self.column == self.indent and not self.whitespace)
        ):
            self.line_break()
        if self.column < self.indent:
            self.out.append(" " * (self.indent - self.column))
            self.column = self.indent
            self.whitespace = True


def _single_quoted(text: str, column: int, indent: int) -> str:
    """``'text'`` with quotes doubled; a single space past the width folds; line
    breaks are written doubled (the first one of a run of ``\\n``) and indented."""
    escaped_length = len(text) + text.count("'") + 2
    if column + escaped_length <= _WIDTH and not _BREAK.search(text):
        return "'" + text.replace("'", "''") + "'"
    line = _Line(column, indent)
    line.write("'")
    end = len(text)
    for match in _SINGLE_TOKENS.finditer(text):
        piece = match.group()
        first = piece[0]
        if first == "'":
            line.write("''")
        elif first == " ":
            start, stop = match.span()
            if len(piece) == 1 and line.column > _WIDTH and start != 0 and stop != end:
                line.to_indent()
            else:
                line.write(piece)
        elif first in _BREAKS:
            if first == "\n":
                line.line_break()
            for br in piece:
                line.line_break(br)
            line.to_indent()
        else:
            line.write(piece)
    line.write("'")
    return "".join(line.out)


def _escape(ch: str) -> str:
    short = Emitter.ESCAPE_REPLACEMENTS.get(ch)
    if short is not None:
        return "\\" + short
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def _double_quoted(text: str, column: int, indent: int, *, split: bool) -> str:
    """``"text"`` with escapes; past the width (when ``split``) a line ends in ``\\``.

    The emitter's rule, position by position: pending text is flushed at each
    character it escapes; at a space, or right after an escape, a line that
    would pass the width ends with ``\\`` (not at the first or last two
    characters), and a space that then starts the next line is written ``\\ ``.
    """
    if not split and not _ESCAPED.search(text):
        return '"' + text + '"'
    line = _Line(column, indent)
    line.write('"')
    start = 0
    size = len(text)
    for end in range(size + 1):
        ch = text[end] if end < size else None
        if ch is None or _ESCAPED.match(ch):
            if start < end:
                line.write(text[start:end])
                start = end
            if ch is not None:
                line.write(_escape(ch))
                start = end + 1
        if (
            split
            and 0 < end < size - 1
            and (ch == " " or start >= end)
            and line.column + (end - start) > _WIDTH
        ):
            line.write(text[start:end] + "\\")
            start = max(start, end)
            line.to_indent()
            line.whitespace = line.indention = False
            if text[start] == " ":
                line.write("\\")
    line.write('"')
    return "".join(line.out)


# ---------------------------------------------------------------------------
# Whose each directory of a Markdown store is, and what the store holds: its users and agents.
#
# A user directory is named after the user id (:func:`~deermem.model.safe_user_id`),
# a one-to-one mapping, but a name alone proves nothing: a file system that
# ignores case makes ``Alice`` and ``alice`` one directory, and stores written by
# the original DeerMem (or by deermem before it) may hold a directory that two
# ids shared. So every directory records its owner, and every access checks it:
#
# * **The owner record** — ``users/<dir>/.memory.owner.json``,
#   ``{"userId": ...}`` — is written in the same journaled commit as the first
#   change deermem makes in the directory, and read before anything else in
#   the directory is read or written, for any of the user's agents: the
#   summaries (``memory.json``), the facts, the sidecars, the archive, the
#   marks. A record that names another id stops the operation
#   (:class:`~deermem.errors.OwnerConflictError`, naming the directory only). The
#   original's own files (``memory.json``, ``fact-usage.json``,
#   ``eviction-audit.json``) cannot hold an owner without breaking the
#   original, so they are covered by this record, as are deermem's own
#   sidecars; facts (``user_id``), archived facts (``scope``) and thread marks
#   (``userId``, ``agentName``) carry their owner themselves as well.
# * **A directory without a record** (written by the original, or by an
#   earlier deermem) is claimed from its contents: the ``user_id`` of every
#   fact and archived fact in it. Several ids, or one whose own directory is
#   another, is a collision already on disk: it is reported — by every access
#   and by ``deermem scopes`` — and never merged. Nothing in it names an owner
#   (summaries alone): it belongs to the id its name is derived from.
# * **An agent directory** is named after the agent; a name longer than 254
#   characters gets a derived name (:func:`~deermem.model.agent_directory`)
#   and the directory holds a record ``{"userId": ..., "agentName": ...}`` that
#   names the agent, so it can be listed, and is checked like the user's.
#
# :func:`list_users` and :func:`list_agents` tell what a root holds: every
# directory holding memory either lists as a user (an agent) or is reported
# with what is wrong with it — none is left out silently.
# ---------------------------------------------------------------------------


class Owner(NamedTuple):
    """What an owner record says: the user id (``None``: the single-user layout) and,
    in an agent directory, the agent."""

    user_id: str | None
    agent: str | None = None


class Problem(NamedTuple):
    """A directory that holds data no scope can be read from, and why (names no owner)."""

    path: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def holds_store(root: Path, manifest_filename: str, *, settings_filename: str) -> bool:
    """Whether ``root`` holds anything a deermem (or DeerMem) store writes at its top
    (or deermem keeps beside a store: :data:`deermem.config.NOT_STORE_DATA`)."""
    names = (
        *NOT_STORE_DATA,
        USERS_DIRNAME,
        AGENTS_DIRNAME,
        manifest_filename,
        settings_filename,
        RETRIEVAL_DIRNAME,
        LOCK_FILENAME,
        JOURNAL_FILENAME,
    )
    if any((root / name).exists() for name in names):
        return True
    # Another process creating the store: its settings file is still a temporary one.
    pending = f".{settings_filename}."
    with os.scandir(root) as entries:
        if any(
            entry.name.startswith(pending) and entry.name.endswith(_TMP_SUFFIX) for entry in entries
        ):
            return True
    # ... or was renamed into place between the names' check and the listing: the
    # listing no longer shows the temporary, and the settings file is there now.
    return (root / settings_filename).exists()


def may_hold_store(root: Path, manifest_filename: str) -> bool:
    """Whether a store may live at ``root``: it holds none yet (it is new, or
    empty but for :data:`~deermem.config.NOT_STORE_DATA`), or it holds one.

    A directory of other files is neither: no command writes a store into it,
    nor reads it as an empty one.
    """
    return is_new_root(root) or holds_store(
        root, manifest_filename, settings_filename=STORE_SETTINGS_FILENAME
    )


def encode_owner(owner: Owner) -> bytes:
    """An owner record: ``{"userId": ...}``, with ``"agentName"`` in an agent directory."""
    value: dict[str, object] = {"userId": owner.user_id}
    if owner.agent is not None:
        value["agentName"] = owner.agent
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8")


def read_file(path: Path) -> bytes:
    """The file's bytes, read through the file descriptor alone.

    The reads on every search's and load's path come here (the owner record,
    ``memory.json``, the sidecars; every fact file on a cold load). Without
    Python's buffered file object a small file costs an open, two reads and a
    close (``Path.read_bytes`` also builds two objects and asks ``fstat``).
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _read_all(fd, path)
    finally:
        os.close(fd)


def read_file_status(path: Path) -> tuple[bytes, os.stat_result]:
    """:func:`read_file`, with the status of the open file taken before it is read.

    Before, so that a write in between makes the status newer than the bytes
    never older: a cache keyed by the status then misses rather than keeping
    old bytes under a new key.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        status = os.fstat(fd)
        return _read_all(fd, path), status
    finally:
        os.close(fd)


def _read_all(fd: int, path: Path) -> bytes:
    """Everything ``fd`` holds; an error names ``path``.

    ``os.read`` raises without a file name (``[Errno 21] Is a directory``),
    and ``os.open`` opens a directory without complaint, so a file replaced by
    a directory (a sync tool, a hand edit) would reach the user as an error
    that names nothing.

    Raises:
        CorruptMemoryFile: ``path`` is a directory.
        OSError: the read failed (with ``path`` as its file name).
    """
    chunks = []
    try:
        while chunk := os.read(fd, _READ_CHUNK):
            chunks.append(chunk)
    except IsADirectoryError:
        raise CorruptMemoryFile(path, "is a directory where a file belongs") from None
    except OSError as error:
        if error.filename is not None:
            raise
        raise type(error)(error.errno, error.strerror, str(path)) from error
    return b"".join(chunks)


_READ_CHUNK: Final = 1 << 16


class NotRegularFileError(OSError):
    """A file given to be read is a device, a pipe or a socket (``/dev/zero``, a FIFO).

    An ``OSError``, so that every reader's ``except OSError`` names the file
    with it; ``strerror`` says what is wrong.
    """

    def __init__(self, path: Path) -> None:
        what = "not a regular file (a device, a pipe or a socket)"
        super().__init__(errno.EINVAL, what, str(path))


def open_regular_file(path: Path) -> BinaryIO:
    """``path`` open for reading in binary, refused first if it is not a regular file.

    The one guard of every file a user names to be read whole (the evaluation's
    dataset, protocol files, answers and markers, a document to import, a
    conversation, a tokens file): a device such as ``/dev/zero`` never ends and a
    FIFO blocks until a writer comes. It is opened without blocking and checked
    by ``fstat`` of the open descriptor, so what is read is what was checked,
    even if the name is replaced in between (a symlink is followed).

    Raises:
        IsADirectoryError: ``path`` is a directory.
        NotRegularFileError: ``path`` is a device, a pipe or a socket.
        OSError: it cannot be opened (``FileNotFoundError`` ...).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: Path) -> bytes:
    """The bytes of ``path``, refused by :func:`open_regular_file` before a byte is read."""
    with open_regular_file(path) as stream:
        return stream.read()


def read_if_exists(path: Path) -> bytes | None:
    """The file's bytes, or ``None`` when there is no such file (a missing file is an answer,
    not an error, for every optional file of a store)."""
    try:
        return read_file(path)
    except FileNotFoundError:
        return None


def read_owner(path: Path) -> Owner | None:
    """The owner record at ``path``, or ``None`` if there is none.

    Raises:
        CorruptMemoryFile: the file is not an owner record.
    """
    data = read_if_exists(path)
    if data is None:
        return None
    try:
        return _decode_owner(data)
    except ValueError as error:
        raise CorruptMemoryFile(path, str(error)) from None


_OWNERS_KEPT: Final = 1024


@functools.lru_cache(maxsize=_OWNERS_KEPT)
def _decode_owner(data: bytes) -> Owner:
    """What an owner record's bytes say; a pure function of them, so each distinct record
    is decoded once per process (every read of a scope checks its user's record).

    Raises:
        ValueError: the bytes are not an owner record (never cached).
    """
    try:
        raw = parse_json(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the owner record is not valid JSON: {error}") from None
    if not isinstance(raw, dict) or "userId" not in raw:
        raise ValueError("an owner record must be an object with 'userId'")
    user_id, agent = raw["userId"], raw.get("agentName")
    if not (user_id is None or isinstance(user_id, str)) or not (
        agent is None or isinstance(agent, str)
    ):
        raise ValueError("an owner record holds text (or null) only")
    return Owner(user_id, agent)


def check_user_owner(user: UserPaths, stored: Callable[[], frozenset[str]]) -> bool:
    """Refuse a user directory that is not ``user.user_id``'s; return whether it has a record.

    ``stored`` gives the ids its contents name (:func:`stored_user_ids`); it
    is called only for an existing directory without a record. The
    single-user layout (no user id) has no record: no user id leads to the root.

    Raises:
        OwnerConflictError: the record names another id; or, without one, the
            contents name several ids, or another one.
        CorruptMemoryFile: the record cannot be read.
    """
    if user.user_id is None:
        return True
    record = read_owner(user.owner)
    if record is not None:
        if record != Owner(user.user_id):
            raise OwnerConflictError(
                user.user_dir, "this directory belongs to another user id (its owner record)"
            )
        return True
    found = stored() if user.user_dir.is_dir() else frozenset()
    if len(found) > 1:
        raise _shared(user.user_dir)
    if found and found != {user.user_id}:
        raise OwnerConflictError(
            user.user_dir, "this directory holds another user id's facts (it has no owner record)"
        )
    return False


def _shared(directory: Path) -> OwnerConflictError:
    return OwnerConflictError(
        directory,
        "facts of several user ids share this directory (written before deermem recorded "
        "owners); nothing was merged: move each user's facts to their own directory by hand",
    )


def owner_fields(paths: ScopePaths) -> dict[str, object]:
    """The owner deermem's own files of a scope carry: ``{"userId": ..., "agentName": ...}``."""
    return {"userId": paths.user.user_id, "agentName": paths.agent}


def check_owner_fields(raw: Mapping[str, object], paths: ScopePaths, path: Path) -> None:
    """Refuse a file of the scope whose owner fields name another scope.

    A file without them was written before files carried their owner: the
    directory's owner record covers it.

    Raises:
        OwnerConflictError: ``userId`` or ``agentName`` is another scope's.
    """
    if ("userId" in raw or "agentName" in raw) and (
        raw.get("userId") != paths.user.user_id or raw.get("agentName") != paths.agent
    ):
        raise OwnerConflictError(path, "this file belongs to another user or agent")


def check_agent_owner(paths: ScopePaths, scope: Scope) -> bool:
    """Refuse an agent directory with a derived name that is not this scope's; return
    whether it needs no record written (its name is the agent's, or it has one).

    Raises:
        OwnerConflictError: its record names another agent or user.
        CorruptMemoryFile: the record cannot be read.
    """
    if paths.agent_dir.name == paths.agent:
        return True
    record = read_owner(paths.owner)
    if record is None:
        return False
    if record != Owner(scope.user_id, scope.agent):
        raise OwnerConflictError(
            paths.agent_dir, "this agent directory belongs to another agent (its owner record)"
        )
    return True


def stored_user_ids(user_dir: Path) -> frozenset[str]:
    """Every user id the facts and archived facts of a user directory name (all agents)."""
    found = set()
    for agent_dir in _subdirectories(user_dir / AGENTS_DIRNAME):
        for path in sorted(agent_dir.glob("facts/*/*.md")):
            found.add(_fact_user_id(path))
        for path in sorted(agent_dir.glob(".metadata/archive/*.json")):
            found.add(_archived_user_id(path))
    return frozenset(user_id for user_id in found if isinstance(user_id, str))


def _fact_user_id(path: Path) -> str | None:
    try:
        data = read_file(path)
    except OSError:
        return None
    return _user_id_in(data)


@functools.lru_cache(maxsize=_DECODED_LIMIT)
def _user_id_in(data: bytes) -> str | None:
    """The ``user_id`` a fact file's bytes name; cached by the bytes, as decode_fact is
    (a directory without an owner record is checked this way at every cold load)."""
    try:
        text = _fact_text(data)
        front = text.removeprefix("---\n").split("\n---\n", 1)[0]
        meta = yaml.load(front, Loader=YAML_LOADER)  # a safe loader (C or Python)
    except (UnicodeDecodeError, yaml.YAMLError):
        return None
    user_id = meta.get("user_id") if isinstance(meta, dict) else None
    return user_id if isinstance(user_id, str) else None


def _archived_user_id(path: Path) -> str | None:
    try:
        entry = parse_json(path.read_bytes())
        user_id = entry["fact"]["scope"]["userId"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return user_id if isinstance(user_id, str) else None


def user_of_directory(directory: Path) -> str:
    """The user id a directory under ``users/`` belongs to.

    Its owner record, if it has one (it must name an id whose directory this
    is); else the one id its contents name — an id whose directory this is,
    or one an earlier version kept as its directory name (see
    :func:`~deermem.model.was_kept_user_id`: the store moves that
    directory on its first write); else, nothing naming a user, its own name
    if that is an id's own name.

    Raises:
        OwnerConflictError: the record or the contents name an id whose
            directory is another, or the contents name several.
        CorruptMemoryFile: the record cannot be read, or nothing tells the id
            of a directory whose name is derived.
    """
    record = read_owner(directory / OWNER_FILENAME)
    if record is not None:
        if record.user_id is None or _allowed(record.user_id, directory) != directory.name:
            raise OwnerConflictError(
                directory, "its owner record names a user id whose directory is another"
            )
        return record.user_id
    stored = stored_user_ids(directory)
    if len(stored) == 1:
        [user_id] = stored
        if _allowed(user_id, directory) == directory.name:
            return user_id
        if user_id == directory.name and was_kept_user_id(user_id):
            return user_id
        raise OwnerConflictError(
            directory, "it holds the facts of a user id whose directory is another"
        )
    if stored:
        raise _shared(directory)
    if _safe(directory.name) == directory.name:
        return directory.name  # a kept id is its own directory name
    raise CorruptMemoryFile(
        directory,
        "cannot tell the user id of this directory: its name is derived from the id, and "
        "nothing in it names its user",
    )


def _safe(user_id: str) -> str | None:
    try:
        return safe_user_id(user_id)
    except UnsafeIdentifierError:
        return None


def _allowed(user_id: str, directory: Path) -> str:
    """The directory name of a user id a directory records.

    Raises:
        CorruptMemoryFile: the id breaks the rule for user ids (an earlier
            version kept it): its memory cannot be opened under it.
    """
    try:
        return safe_user_id(user_id)
    except UnsafeIdentifierError as error:
        raise CorruptMemoryFile(
            directory, f"the user id it records is not allowed any more: {error.reason}"
        ) from None


def list_users(root: Path, manifest_filename: str) -> tuple[list[str | None], list[Problem]]:
    """Every user under ``root``, in :func:`~deermem.model.listing_order` (the single-user
    layout's, ``None``, first; then by user id, not by directory name), and every user
    directory that holds memory but cannot be listed, with why."""
    users: list[str | None] = []
    problems: list[Problem] = []
    if (root / manifest_filename).is_file() or (root / AGENTS_DIRNAME).is_dir():
        users.append(None)
    found: dict[str, Path] = {}
    for directory in _subdirectories(root / USERS_DIRNAME):
        manifest, agents = directory / manifest_filename, directory / AGENTS_DIRNAME
        if not (manifest.exists() or holds_a_file(agents)):
            # No memory in it: a lock file at most, and the empty directories of a first
            # commit killed part-way (its recovery removes the files, not the directories).
            continue
        try:
            user_id = user_of_directory(directory)
        except CorruptMemoryFile as error:
            problems.append(Problem(directory, error.problem))
            continue
        other = found.get(user_id)
        if other is not None:
            # Only a directory an earlier version named after the id meets the id's own:
            # the store reads the id's own, so the other is the one left behind.
            left = other if directory.name == _safe(user_id) else directory
            found[user_id] = directory if left is other else other
            problems.append(
                Problem(left, "the user's memory is in a directory of its own name too")
            )
            continue
        found[user_id] = directory
    users.extend(sorted(found, key=listing_order))
    return users, problems


def list_agents(user: UserPaths) -> tuple[list[str], list[Problem]]:
    """The agent buckets of a user directory, sorted, and every agent directory that
    holds data but cannot be read as one (a name that is no bucket's, a derived
    name without its record), with why.

    Directories that hold no memory (no file in ``facts/`` or ``.metadata/``) are
    another program's, or what a first commit killed part-way left, and are left alone.
    """
    agents: list[str] = []
    problems: list[Problem] = []
    for directory in _subdirectories(user.user_dir / AGENTS_DIRNAME):
        name = directory.name
        if is_bucket(name) and agent_directory(name) == name:
            agents.append(name)
            continue
        if not holds_a_file(directory / "facts") and not holds_a_file(directory / ".metadata"):
            continue  # no memory (at most the empty directories of a killed first commit)
        if not is_derived_agent_directory(name):
            problems.append(Problem(directory, "the name is not an agent's directory name"))
            continue
        try:
            record = read_owner(directory / OWNER_FILENAME)
        except CorruptMemoryFile as error:
            problems.append(Problem(directory, error.problem))
            continue
        agent = _agent_of(record, user.user_id, name)
        if agent is None:
            problems.append(
                Problem(directory, "a long agent name's directory without a matching owner record")
            )
            continue
        agents.append(agent)
    return sorted(agents), problems


def _agent_of(record: Owner | None, user_id: str | None, name: str) -> str | None:
    if record is None or record.agent is None or record.user_id != user_id:
        return None
    try:
        agent = normalise_agent(record.agent)
    except UnsafeIdentifierError:
        return None
    return agent if agent == record.agent and agent_directory(agent) == name else None


def holds_a_file(directory: Path) -> bool:
    """Whether anything below ``directory`` is a file: directories alone hold no memory."""
    return any(path.is_file() for path in directory.rglob("*"))


def _subdirectories(directory: Path) -> list[Path]:
    try:
        return sorted(path for path in directory.iterdir() if path.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
