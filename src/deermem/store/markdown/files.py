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

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

import yaml

from deermem.config import NOT_STORE_DATA, store_settings_path
from deermem.errors import (
    CorruptMemoryFile,
    FactValidationError,
    OwnerConflictError,
    StoreSettingsExistError,
    UnsafeIdentifierError,
)
from deermem.model import (
    MAX_NESTING,
    TIMESTAMP_FIELDS,
    Fact,
    Scope,
    agent_directory,
    is_bucket,
    is_derived_agent_directory,
    normalise_agent,
    safe_user_id,
    was_kept_user_id,
)

__all__ = [
    "FILE_MODE",
    "JOURNAL_FILENAME",
    "Owner",
    "Problem",
    "ScopePaths",
    "UserPaths",
    "atomic_write",
    "check_agent_owner",
    "check_owner_fields",
    "check_user_owner",
    "decode_fact",
    "encode_fact",
    "encode_owner",
    "fact_shard",
    "fsync_path",
    "holds_store",
    "is_temporary",
    "list_agents",
    "list_users",
    "make_directories",
    "owner_fields",
    "read_owner",
    "remove_durably",
    "replace_files",
    "resolve_root",
    "search_index_path",
    "stored_user_ids",
    "write_store_settings",
    "write_temporary",
]

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
            self.user_dir = root / "users" / (directory or safe_user_id(user_id))
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
        self.agent_dir = user.user_dir / "agents" / agent_directory(agent)
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
# Temporary files are hidden from every listing the store makes. fsyncs run
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
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            if flush:
                stream.flush()
                os.fsync(stream.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def _temporary_name(name: str) -> str:
    """``.<name>.<random>.tmp``, with ``name`` shortened to keep within 255 bytes."""
    room = _MAX_NAME_BYTES - len(f"..{'0' * _RANDOM_HEX}{_TMP_SUFFIX}")
    stem = name.encode("utf-8", "surrogateescape")[:room].decode("utf-8", "surrogateescape")
    return f".{stem}.{os.urandom(_RANDOM_HEX // 2).hex()}{_TMP_SUFFIX}"


def fsync_path(path: Path) -> None:
    """fsync a file's content, or a directory's entries (creations, renames, removals)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(directory: Path) -> list[Path]:
    """Create ``directory`` and missing parents; return the parents whose entries changed.

    The returned directories need an fsync for the new entries to be durable.
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
            if not item.is_dir():
                raise
    return [item.parent for item in missing]


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
    for item in [*written, *sorted(directories)]:
        fsync_path(item)


def write_store_settings(
    root: str | os.PathLike[str], text: str, *, force: bool = False, private: bool = True
) -> Literal["created", "unchanged", "replaced"]:
    """Write a store's settings file (:func:`deermem.config.render_store_settings`'s
    text), never silently replacing other settings.

    The file is replaced atomically and durably (:func:`atomic_write`), so a
    reader sees the old settings or the new ones; nothing else in the root is
    touched. The root directory is created if needed. The file is its
    owner's alone (mode 0600), as it always was — unless ``private`` is
    false: the policy a new store records at its first write holds nothing
    private, and is created as the umask says, like the store's other files,
    so a store shared with a group stays readable to it.

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
    atomic_write(path, text.encode("utf-8"), mode=0o600 if private else FILE_MODE)
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
# The front matter is written with PyYAML's pure-Python safe dumper — the one
# ``yaml.safe_dump`` is — because libyaml's escapes emoji and breaks long lines
# elsewhere; it is read with libyaml's safe loader when PyYAML has it. The one
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


# libyaml's safe loader when PyYAML has it; the pure-Python safe dumper,
# whose output is the original's byte for byte.
_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_DUMPER: Final[Any] = yaml.SafeDumper


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
    text: str = yaml.dump(dict(front), Dumper=_DUMPER, allow_unicode=True, sort_keys=False)
    if "\x85" in text:
        text = yaml.dump(dict(front), Dumper=_DUMPER, allow_unicode=False, sort_keys=False)
    return text


def decode_fact(data: bytes, path: str | Path, scope: Scope, expected_id: str) -> Fact:
    """Read a fact file; ``expected_id`` is the file's stem.

    Raises:
        CorruptMemoryFile: malformed front matter, an id that is not the file
            name, a scope that is not the directory's, or an invalid field.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CorruptMemoryFile(path, f"not UTF-8 text ({error.reason})") from None
    if not text.startswith(_OPEN):
        raise CorruptMemoryFile(path, "does not start with YAML front matter ('---')")
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
            path, f"the id {fact_id!r} in the front matter does not match the file name"
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


def _front_matter(text: str, path: str | Path) -> dict[str, object]:
    try:
        meta = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as error:
        problem = " ".join(str(error).split())
        raise CorruptMemoryFile(path, f"the front matter is not valid YAML: {problem}") from None
    if not isinstance(meta, dict):
        raise CorruptMemoryFile(
            path, f"the front matter must be a mapping, found {type(meta).__name__}"
        )
    if set(map(type, meta)) - {str}:
        key = next(k for k in meta if not isinstance(k, str))
        raise CorruptMemoryFile(path, f"front-matter key {key!r} is not a string")
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
            path, f"scope mismatch: the fact belongs to agent {agent!r}, not {scope.agent!r}"
        )
    if not isinstance(agent, str):
        raise CorruptMemoryFile(path, f"scope mismatch: agent_name {agent!r} is not a string")
    if user != scope.user_id:
        raise CorruptMemoryFile(
            path, "scope mismatch: the fact belongs to another user than this directory's"
        )


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


_USERS: Final = "users"

_AGENTS: Final = "agents"


class Owner(NamedTuple):
    """What an owner record says: the user id (``None``: the single-user layout) and,
    in an agent directory, the agent."""

    user_id: str | None
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class Problem:
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
        _USERS,
        _AGENTS,
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
        return any(
            entry.name.startswith(pending) and entry.name.endswith(_TMP_SUFFIX) for entry in entries
        )


def encode_owner(owner: Owner) -> bytes:
    """An owner record: ``{"userId": ...}``, with ``"agentName"`` in an agent directory."""
    value: dict[str, object] = {"userId": owner.user_id}
    if owner.agent is not None:
        value["agentName"] = owner.agent
    return (json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8")


def read_owner(path: Path) -> Owner | None:
    """The owner record at ``path``, or ``None`` if there is none.

    Raises:
        CorruptMemoryFile: the file is not an owner record.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptMemoryFile(path, f"the owner record is not valid JSON: {error}") from None
    if not isinstance(raw, dict) or "userId" not in raw:
        raise CorruptMemoryFile(path, "an owner record must be an object with 'userId'")
    user_id, agent = raw["userId"], raw.get("agentName")
    if not (user_id is None or isinstance(user_id, str)) or not (
        agent is None or isinstance(agent, str)
    ):
        raise CorruptMemoryFile(path, "an owner record holds text (or null) only")
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
    for agent_dir in _subdirectories(user_dir / _AGENTS):
        for path in sorted(agent_dir.glob("facts/*/*.md")):
            found.add(_fact_user_id(path))
        for path in sorted(agent_dir.glob(".metadata/archive/*.json")):
            found.add(_archived_user_id(path))
    return frozenset(user_id for user_id in found if isinstance(user_id, str))


def _fact_user_id(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
        front = text.removeprefix("---\n").split("\n---\n", 1)[0]
        meta = yaml.load(front, Loader=_LOADER)  # a safe loader (C or Python)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    user_id = meta.get("user_id") if isinstance(meta, dict) else None
    return user_id if isinstance(user_id, str) else None


def _archived_user_id(path: Path) -> str | None:
    try:
        entry = json.loads(path.read_bytes())
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
    """Every user under ``root`` — the single-user layout's (``None``) first, then by
    directory — and every user directory that holds memory but cannot be listed, with why."""
    users: list[str | None] = []
    problems: list[Problem] = []
    if (root / manifest_filename).is_file() or (root / _AGENTS).is_dir():
        users.append(None)
    found: dict[str, Path] = {}
    for directory in _subdirectories(root / _USERS):
        if not ((directory / manifest_filename).exists() or (directory / _AGENTS).exists()):
            continue  # no memory in it (a lock file at most): no user to list
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
    users.extend(found)
    return users, problems


def list_agents(user: UserPaths) -> tuple[list[str], list[Problem]]:
    """The agent buckets of a user directory, sorted, and every agent directory that
    holds data but cannot be read as one (a name that is no bucket's, a derived
    name without its record), with why.

    Directories that hold no memory (no ``facts/``, no ``.metadata/``) are
    another program's and are left alone.
    """
    agents: list[str] = []
    problems: list[Problem] = []
    for directory in _subdirectories(user.user_dir / _AGENTS):
        name = directory.name
        if is_bucket(name) and agent_directory(name) == name:
            agents.append(name)
            continue
        if not ((directory / "facts").exists() or (directory / ".metadata").exists()):
            continue
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


def _subdirectories(directory: Path) -> list[Path]:
    try:
        return sorted(path for path in directory.iterdir() if path.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
