"""``MarkdownStore``: the embedded default store — one Markdown file per fact.

The layout and file formats are the original DeerMem's (see
:mod:`deermem.store.markdown.files`), so a directory written by it opens
unchanged. What this class adds on top of the modules it composes:

* **creation** — the first write creates the root, only where it is new
  or empty (:class:`~deermem.errors.NotAStoreError` for a directory of
  other files), and records the settings a new store runs with
  (:data:`deermem.config.NEW_STORE_SETTINGS`) in its settings file;
* **owners** — before anything in a user directory is read or written, its
  owner is checked (:mod:`~deermem.store.markdown.files`): a directory that is
  another user id's, or several ids', is refused with
  :class:`~deermem.errors.OwnerConflictError`, and a directory without an owner
  record gets one in its first commit. A directory that an earlier version
  named after an id that looks derived (:func:`~deermem.model.was_kept_user_id`)
  is read where it is and moved to the id's own name by the first write;
* **locking** — every change runs under the user's lock (thread lock +
  ``flock``); loads served from the cache take no lock;
* **recovery** — before any locked operation, and before any load that sees
  a journal, an interrupted commit is rolled back (:mod:`~deermem.store.markdown.journal`);
  before a locked write, the temporary files a writer killed before its journal
  was in place left in the user directory go too;
* **caching** — loaded scopes are kept while the user's ``memory.json``
  signature is unchanged (:class:`ManifestToken`); a commit by this
  process refreshes its own entry instead of dropping it, so writing never
  costs a rescan;
* **bookkeeping** — in the same journaled commit as the facts: receipts
  appended to the audit, usage entries of deleted facts dropped (and those of
  restored facts put back), the archive's index updated and its bounds
  applied, regret events appended and shadow marks set
  (:mod:`~deermem.store.markdown.sidecars`), so after any crash every eviction has
  its receipt and archive entry, every relearned fact its regret event, and
  a receipt returned to a caller is in the audit.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Final, NamedTuple

from deermem.config import (
    NEW_STORE_SETTINGS,
    MemoryConfig,
    config_from_mapping,
    is_new_root,
    render_store_settings,
)
from deermem.errors import (
    CorruptMemoryFile,
    FactNotFoundError,
    NotAStoreError,
    StorageError,
    StoreSettingsExistError,
)
from deermem.model import (
    DEFAULT_ACCESS_HALF_LIFE_DAYS,
    DEFAULT_AGENT,
    Fact,
    Scope,
    format_timestamp,
    is_fact_id,
    was_kept_user_id,
)
from deermem.store.markdown import sidecars
from deermem.store.markdown.files import (
    JOURNAL_FILENAME,
    USERS_DIRNAME,
    KnownFiles,
    Owner,
    Problem,
    ScopePaths,
    UserPaths,
    check_agent_owner,
    check_user_owner,
    decode_fact,
    encode_fact,
    encode_owner,
    fact_shard,
    fsync_path,
    list_agents,
    list_users,
    may_hold_store,
    read_file,
    read_file_status,
    read_if_exists,
    read_owner,
    resolve_root,
    search_index_path,
    stored_user_ids,
    write_store_settings,
)
from deermem.store.markdown.journal import (
    FileChange,
    JournalInfo,
    begin_erasure,
    commit_files,
    erasing_lock,
    erasures_pending,
    finish_erasures,
    recover,
    remove_temporaries,
)
from deermem.store.markdown.locks import user_lock
from deermem.store.markdown.sidecars import (
    ArchiveIndex,
    archive_changes,
    archive_index,
    archive_listing,
    archive_matches,
    encode_mark,
    read_archive,
    read_entry,
    read_mark,
)
from deermem.store.plan import (
    ChangePlan,
    ScopeCache,
    patched_snapshot,
    plan_changes,
    redacted_changes,
    sort_facts,
)
from deermem.store.protocol import (
    ERASED_COUNTS,
    ArchiveChange,
    ChangeSet,
    CommitResult,
    MarkedSnapshot,
    ScopeRecords,
    ScopeSnapshot,
    ShadowMarksRead,
)
from deermem.store.records import (
    ArchiveEntry,
    EvictionReceipt,
    RegretEvent,
    ShadowMark,
    SummaryDocument,
    UsageEntry,
    decode_summaries,
    encode_entry,
    encode_summaries,
)

__all__ = [
    "MarkdownStore",
    "MarkdownTransaction",
    "read_manifest",
]


_PATHS_MEMO_LIMIT = 1024


# The owner records a scope's next commit writes (what its directories lack);
# emptied once a commit has written them.
_Claims = list[FileChange]


def _counted(count: Callable[[], int], otherwise: Callable[[], int] = lambda: 0) -> int:
    """``count()``, or ``otherwise()`` when what it reads cannot be read (an erase's count)."""
    try:
        return count()
    except CorruptMemoryFile:
        return otherwise()


class MarkdownStore:
    """Facts as Markdown files under ``root``; see the module docstring.

    Args:
        root: the store's root directory (created on first write).
        manifest_filename: name of each user's summary document.
        lock_timeout: seconds to wait for another process's lock.
        audit_max_entries: receipts kept per agent; 0 writes none.
        archive_max_entries: archive entries kept per agent.
        archive_max_age_days: archive entries older than this are dropped; 0 keeps all.
        access_half_life_days: half-life of recall heat in the usage sidecar.
        regret_max_events: regret events kept per agent; 0 records none.
        creation_settings: the text of the settings file the first write
            records when the root holds no store yet (:meth:`from_config`);
            ``None`` records none.
        redact_secrets: replace secrets in what a commit writes
            (:func:`deermem.store.plan.redact_changes`).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        manifest_filename: str = "memory.json",
        lock_timeout: float = 10.0,
        audit_max_entries: int = 200,
        archive_max_entries: int = 1000,
        archive_max_age_days: int = 365,
        access_half_life_days: float = DEFAULT_ACCESS_HALF_LIFE_DAYS,
        regret_max_events: int = 1000,
        creation_settings: str | None = None,
        redact_secrets: bool = True,
    ) -> None:
        self.root = Path(root)
        self._creation_settings = creation_settings
        self._root_checked = False
        self.manifest_filename = manifest_filename
        self.lock_timeout = lock_timeout
        self.audit_max_entries = audit_max_entries
        self.archive_max_entries = archive_max_entries
        self.archive_max_age_days = archive_max_age_days
        self.access_half_life_days = access_half_life_days
        self.regret_max_events = regret_max_events
        self.redact_secrets = redact_secrets
        self._cache = ScopeCache()
        self._users: dict[str | None, UserPaths] = {}
        # The ids named by the contents of user directories without an owner
        # record, read once: until the first commit claims the directory.
        self._stored: dict[tuple[Path, int, int, int], frozenset[str]] = {}
        if erasures_pending(self.root):
            finish_erasures(self.root)

    @classmethod
    def from_config(cls, config: MemoryConfig, root: str | Path | None = None) -> MarkdownStore:
        """A store with the configuration's settings; ``root`` wins over ``storage_path``.

        Where the root holds no store yet and the configuration's policy is not
        the one a store without a record runs (``confidence``, no shadow), the
        first write records the policy in the new store's settings file, so
        the store keeps it whoever opens it later.
        """
        directory = Path(root) if root is not None else resolve_root(config.storage_path)
        return cls(
            directory,
            manifest_filename=config.manifest_filename,
            lock_timeout=config.file_lock_timeout_seconds,
            audit_max_entries=config.eviction_audit_max_entries,
            archive_max_entries=config.archive_max_entries,
            archive_max_age_days=config.archive_max_age_days,
            access_half_life_days=config.eviction_access_half_life_days,
            regret_max_events=config.regret_max_events,
            creation_settings=_creation_settings(config, directory),
            redact_secrets=config.redact_secrets,
        )

    def __repr__(self) -> str:
        return f"MarkdownStore({str(self.root)!r})"

    # --- paths, owners and locks -----------------------------------------------

    def _user(self, scope: Scope) -> UserPaths:
        """The paths of a scope's user directory (memoised: building paths is not free).

        That is the id's own directory — unless it does not exist yet and an
        earlier version kept the id as its directory name, and that directory
        is this id's: then that one, until the first write moves it.
        """
        user_id = scope.user_id
        paths = self._users.get(user_id)
        if paths is None:
            if len(self._users) >= _PATHS_MEMO_LIMIT:
                self._users.clear()
            paths = UserPaths(self.root, user_id, self.manifest_filename)
            self._users[user_id] = paths
        if user_id is not None and was_kept_user_id(user_id) and not paths.user_dir.exists():
            legacy = UserPaths(self.root, user_id, self.manifest_filename, directory=user_id)
            if legacy.user_dir.is_dir() and self._is_home(legacy):
                return legacy
        return paths

    def _is_home(self, legacy: UserPaths) -> bool:
        """Whether a directory an earlier version named after its id is that id's."""
        record = read_owner(legacy.owner)
        if record is not None:
            return record == Owner(legacy.user_id)
        return self._stored_ids(legacy) == {legacy.user_id}

    def _stored_ids(self, user: UserPaths) -> frozenset[str]:
        """The ids a directory's contents name, read once while the directory is unchanged
        (the same directory, no entry added or removed: a move or a commit changes that)."""
        status = user.user_dir.stat()
        key = (user.user_dir, status.st_dev, status.st_ino, status.st_mtime_ns)
        found = self._stored.get(key)
        if found is None:
            if len(self._stored) >= _PATHS_MEMO_LIMIT:
                self._stored.clear()
            found = self._stored[key] = stored_user_ids(user.user_dir)
        return found

    def _check(self, scope: Scope, user: UserPaths) -> _Claims:
        """Refuse a directory that is not this scope's; return the owner records to claim.

        Raises:
            OwnerConflictError: the user's or the agent's directory is another's.
            CorruptMemoryFile: an owner record cannot be read.
        """
        claims: _Claims = []
        if not check_user_owner(user, partial(self._stored_ids, user)):
            claims.append(FileChange(user.owner, encode_owner(Owner(user.user_id))))
        paths = user.agent(scope.agent)
        if not check_agent_owner(paths, scope):
            owner = Owner(scope.user_id, scope.agent)
            claims.append(FileChange(paths.owner, encode_owner(owner)))
        return claims

    def _check_root(self) -> None:
        """Before the first write: refuse a directory of other files; record a new store's settings.

        Raises:
            NotAStoreError: the root is neither new, nor empty, nor a store.
        """
        if self._root_checked:
            return
        if not may_hold_store(self.root, self.manifest_filename):
            raise NotAStoreError(
                self.root,
                "neither empty nor a deermem store; a store is created in a new or empty "
                "directory (deermem --root DIR init)",
            )
        if self._creation_settings is not None:
            with contextlib.suppress(StoreSettingsExistError):  # another writer recorded first
                write_store_settings(self.root, self._creation_settings)
        self._root_checked = True

    @contextmanager
    def _locked(self, scope: Scope, user: UserPaths, *, reading: bool = False) -> Iterator[_Claims]:
        """Hold the user's lock, after rolling back any interrupted commit and checking
        the owner; yield the owner records the next commit must write.

        ``reading`` needs no write access, unless there is a commit to roll
        back: then :class:`~deermem.errors.StoreNeedsRecovery` names what cannot be
        restored, and nothing is read.
        """
        if not reading:
            self._check_root()
        lock = user_lock(user.lock, self.lock_timeout)
        with lock.reading() if reading else lock:
            if recover(user):
                self._cache.drop_user(scope.user_id)
            if not reading:
                remove_temporaries(user)
            yield self._check(scope, user)

    def _writable(self, scope: Scope) -> UserPaths:
        """The user's paths for a write: a directory an earlier version named after the
        id (:meth:`_user`) is first moved to the id's own name, under its lock."""
        user, user_id = self._user(scope), scope.user_id
        if user_id is None or user.user_dir.name != user_id or not was_kept_user_id(user_id):
            return user
        own = UserPaths(self.root, user_id, self.manifest_filename)
        # Under the old directory's lock, so no writer is half-way through a commit in
        # it (the journal's paths are relative: an interrupted one is recovered after).
        with self._locked(scope, user):
            if not own.user_dir.exists():
                user.user_dir.rename(own.user_dir)
                fsync_path(own.user_dir.parent)
        return self._user(scope)

    # --- reading --------------------------------------------------------------

    def load(self, scope: Scope) -> ScopeSnapshot:
        return self._load(scope, self._user(scope))

    def load_with_marks(self, scope: Scope) -> MarkedSnapshot:
        user = self._user(scope)
        snapshot = self._load(scope, user)
        # _load settled the directory (rolled back an interrupted commit, checked
        # the owners): the marks are read as _settled would have left them.
        marks: ShadowMarksRead
        try:
            marks = sidecars.read_shadow_marks(user.agent(scope.agent).shadow_marks)
        except (CorruptMemoryFile, OSError) as error:
            marks = error
        return MarkedSnapshot(snapshot, marks)

    def _load(self, scope: Scope, user: UserPaths) -> ScopeSnapshot:
        """:meth:`load`, once :meth:`_user` has named the directory; settles it as
        :meth:`_settled` does."""
        if not user.user_dir.is_dir():
            return ScopeSnapshot(scope, SummaryDocument(), (), ABSENT.version())
        if not user.journal.exists():
            self._check(scope, user)
            _, token = read_manifest(user)
            cached = self._cache.get(scope, token)
            if cached is not None:
                return cached
        with self._locked(scope, user, reading=True):
            return self._snapshot(scope, user)

    def _snapshot(self, scope: Scope, user: UserPaths) -> ScopeSnapshot:
        """The scope, from the cache if still valid; the caller holds the lock."""
        document, token = read_manifest(user)
        cached = self._cache.get(scope, token)
        if cached is not None:
            return cached
        paths = user.agent(scope.agent)
        check_layout(paths)
        facts = scan_facts(paths, scope)
        snapshot = ScopeSnapshot(scope, document, sort_facts(facts.values()), token.version())
        self._cache.put(scope, token, snapshot)
        return snapshot

    def _settled(self, scope: Scope) -> UserPaths:
        """The user's paths, after recovering an interrupted commit if there is one,
        and checking the directories are the scope's.

        Readers that take no lock (sidecars, the archive) call this first, so
        they never see half of a commit, nor another user's files.
        """
        user = self._user(scope)
        if user.journal.exists():
            with self._locked(scope, user, reading=True):
                pass
        else:
            self._check(scope, user)
        return user

    @contextmanager
    def holding(self, user_id: str | None) -> Iterator[None]:
        """Hold a user's lock (to read) across several reads, so no commit lands between them.

        The store's readers called meanwhile by the same thread take the lock
        again (it is re-entrant within a thread); another thread's or
        process's commit waits until the block ends.
        """
        scope = Scope.of(user_id)
        user = self._user(scope)
        if not user.user_dir.is_dir():  # nothing to hold still: no lock file is created
            yield
            return
        with self._locked(scope, user, reading=True):
            yield

    def user_paths(self, user_id: str | None) -> UserPaths:
        """The files of a user's directory, checked as the user's (to copy a user whole).

        Raises:
            OwnerConflictError: the directory is another user's.
        """
        return self._settled(Scope.of(user_id))

    def version(self, scope: Scope) -> str:
        _, token = read_manifest(self._settled(scope))
        return token.version()

    def reload(self, scope: Scope) -> ScopeSnapshot:
        self._cache.drop(scope)
        return self.load(scope)

    def agents(self, user_id: str | None) -> tuple[str, ...]:
        """The agents of a user directory (see :func:`~deermem.store.markdown.files.list_agents`).

        Raises:
            CorruptMemoryFile: an agent directory holds memory that cannot be
                read as an agent's: left out, it would be skipped silently.
        """
        agents, problems = list_agents(self._settled(Scope.of(user_id)))
        if problems:
            raise CorruptMemoryFile(problems[0].path, problems[0].problem)
        return tuple(agents)

    def scopes(self) -> tuple[Scope, ...]:
        """Every user's agents (a user with summaries alone: ``__default__``); the
        directories that cannot be listed are in :meth:`problems`."""
        return self._listing()[0]

    def problems(self) -> tuple[str, ...]:
        """Every directory that holds memory :meth:`scopes` cannot list, and why."""
        return tuple(str(problem) for problem in self._listing()[1])

    def _listing(self) -> tuple[tuple[Scope, ...], list[Problem]]:
        self._settle_interrupted()
        users, problems = list_users(self.root, self.manifest_filename)
        scopes: list[Scope] = []
        for user_id in users:
            agents, found = list_agents(self._user(Scope(user_id, DEFAULT_AGENT)))
            problems.extend(found)
            scopes.extend(Scope(user_id, agent) for agent in agents or (DEFAULT_AGENT,))
        return tuple(scopes), problems

    def _settle_interrupted(self) -> None:
        """Roll back the interrupted commits of every user directory, as a read of the user
        would, before a listing reads the directories.

        A first commit writes the owner records of its new user or agent: until it is
        rolled back, they name a scope that holds nothing once it is. A directory whose
        commit cannot be rolled back here (a read-only store, a damaged journal, a lock
        not had in time) is listed as it is; reading it says what is wrong.
        """
        with contextlib.suppress(OSError):  # no users/ yet: nothing to settle
            for journal in (self.root / USERS_DIRNAME).glob(f"*/{JOURNAL_FILENAME}"):
                name = journal.parent.name
                # Named by the directory: recovery reads nothing but paths inside it, and
                # the owner record is what cannot be trusted yet. No snapshot is cached of
                # a rolled-back commit (its manifest token was never read).
                user = UserPaths(self.root, name, self.manifest_filename, directory=name)
                with (
                    contextlib.suppress(CorruptMemoryFile, StorageError, OSError),
                    user_lock(user.lock, self.lock_timeout).reading(),
                ):
                    recover(user)

    def _count_user(self, user_id: str) -> dict[str, int]:
        """What the user holds, counted as :meth:`UserDump.counts` counts (an erase
        reports them), without reading the archive's entries (their index lists them).

        A file that cannot be read never stops the erase it is counted for (a
        person's right to be erased does not wait for a hand edit to be
        mended): an agent directory that is no agent's counts as an agent,
        unreadable facts count as their files, and another unreadable record
        as nothing — all of it goes all the same.
        """
        user = self.user_paths(user_id)
        agents, problems = list_agents(user)
        counts = dict.fromkeys(ERASED_COUNTS, 0)
        counts["agents"] = len(problems)
        for agent in agents:
            held = self._count_agent(Scope.of(user_id, agent), user.agent(agent))
            if any(held.values()):
                counts["agents"] += 1
                for key, value in held.items():
                    counts[key] += value
        return counts

    def _count_agent(self, scope: Scope, paths: ScopePaths) -> dict[str, int]:
        """One agent's part of :meth:`_count_user`."""
        return {
            "facts": _counted(
                lambda: len(self.load(scope).facts),
                lambda: sum(1 for _ in paths.facts_dir.glob("*/*.md")),
            ),
            "usage": _counted(lambda: len(self.usage(scope))),
            "events": _counted(lambda: len(sidecars.read_events(paths.audit))),
            "archived": _counted(lambda: len(sidecars.arrival_order(paths))),
            "marks": _counted(lambda: len(sidecars.read_marks(paths))),
            "regretEvents": _counted(lambda: len(sidecars.raw_regret_events(paths.regret_events))),
            "shadowMarks": _counted(lambda: len(sidecars.raw_shadow_marks(paths.shadow_marks))),
        }

    def erase_user(self, user_id: str) -> dict[str, int]:
        """Erase everything held for a user, crash-safe (see "Erasing a user" below).

        Returns:
            What was removed, counted as :meth:`UserDump.counts` counts
            (all 0 for a user the store does not hold).
        """
        scope = Scope.of(user_id)
        counts = dict.fromkeys(ERASED_COUNTS, 0)
        with erasing_lock(self.root):
            user = self._user(scope)
            if user.user_dir.is_dir():
                with self._locked(scope, user):  # no commit of the user is half-way
                    counts = self._count_user(user_id)
                    tomb = begin_erasure(self.root, user)
                    user.user_dir.rename(tomb)  # the commit point: erased from here on
                    fsync_path(user.user_dir.parent)
                    fsync_path(tomb.parent)
                finish_erasures(self.root, recovering=False)
        self._cache.drop_user(user_id)
        self._users.pop(user_id, None)
        self._stored.clear()
        return counts

    def holds_user(self, user_id: str) -> bool:
        """Whether the user's directory exists (an erase renames it away first)."""
        return self._user(Scope.of(user_id)).user_dir.is_dir()

    @property
    def identity(self) -> str:
        """The root's real path: two objects opened on one directory, by any spelling, match."""
        return f"markdown:{os.path.realpath(self.root)}"

    def search_index_location(self) -> Path:
        """``{root}/.retrieval/memory-fts5.sqlite3`` (the original's place), directory created.

        Raises:
            OSError: the directory or an index file there cannot be written
                (a read-only store); the caller indexes in memory instead.
        """
        path = search_index_path(self.root)
        path.parent.mkdir(parents=True, exist_ok=True)
        files = [path.with_name(path.name + suffix) for suffix in ("", "-wal", "-shm")]
        for target in (path.parent, *(f for f in files if f.exists())):
            if not os.access(target, os.W_OK):
                raise PermissionError(errno.EACCES, "the search index cannot be written", target)
        return path

    def stored_vectors(self, scope: Scope, model: str, keys: Sequence[str]) -> Mapping[str, bytes]:
        """``{}``: the vectors live in the search index file (derived data, beside it)."""
        return {}

    def store_vectors(
        self, scope: Scope, model: str, vectors: Mapping[str, bytes], *, strict: bool = False
    ) -> None:
        """Nothing to do: the search index file keeps the vectors."""

    def usage(self, scope: Scope) -> Mapping[str, UsageEntry]:
        return sidecars.read_usage(self._settled(scope).agent(scope.agent).usage)

    def watermark(self, scope: Scope, thread_id: str) -> str | None:
        return read_mark(self._settled(scope).agent(scope.agent), thread_id)

    def audit(self, scope: Scope) -> tuple[EvictionReceipt, ...]:
        return sidecars.read_audit(self._settled(scope).agent(scope.agent).audit)

    def archived(self, scope: Scope, fact_id: str) -> ArchiveEntry | None:
        return read_entry(self._settled(scope).agent(scope.agent), scope, fact_id)

    def archive(self, scope: Scope, now: datetime) -> tuple[ArchiveEntry, ...]:
        paths = self._settled(scope).agent(scope.agent)
        entries = read_archive(paths, scope)
        return tuple(e for e in entries if not e.expired(now, self.archive_max_age_days))

    def archived_matches(
        self, scope: Scope, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        paths = self._settled(scope).agent(scope.agent)
        return archive_matches(paths, scope, contents, now, self.archive_max_age_days)

    def archive_listing(self, scope: Scope, now: datetime) -> Mapping[str, str]:
        paths = self._settled(scope).agent(scope.agent)
        return archive_listing(paths, now, self.archive_max_age_days)

    def records(self, scope: Scope) -> ScopeRecords:
        return sidecars.read_records(self._settled(scope).agent(scope.agent))

    def regret_events(self, scope: Scope) -> tuple[RegretEvent, ...]:
        return sidecars.read_regret_events(self._settled(scope).agent(scope.agent).regret_events)

    def shadow_marks(self, scope: Scope) -> Mapping[str, ShadowMark]:
        return sidecars.read_shadow_marks(self._settled(scope).agent(scope.agent).shadow_marks)

    # --- writing --------------------------------------------------------------

    @contextmanager
    def transaction(self, scope: Scope) -> Iterator[MarkdownTransaction]:
        user = self._writable(scope)
        with self._locked(scope, user) as claims:
            yield MarkdownTransaction(self, scope, user, claims)

    def commit(self, scope: Scope, changes: ChangeSet) -> CommitResult:
        with self.transaction(scope) as transaction:
            return transaction.commit(changes)

    def record_access(
        self,
        scope: Scope,
        fact_ids: Iterable[str],
        now: datetime,
        *,
        regret: Sequence[RegretEvent] = (),
    ) -> None:
        wanted = [fact_id for fact_id in fact_ids if is_fact_id(fact_id)]
        if not wanted and not regret:
            return
        user = self._writable(scope)
        paths = user.agent(scope.agent)
        # What a search counts is of facts it read: a scope with nothing stored was
        # erased since (or never held them), and counting would bring the user back.
        if not paths.agent_dir.is_dir():
            return
        with self._locked(scope, user) as claims:
            if not paths.agent_dir.is_dir():  # erased while this waited for the lock
                return
            files: list[FileChange] = []
            events = sidecars.regret_after_commit(
                paths.regret_events, regret, self.regret_max_events
            )
            if events is not None:
                files.append(FileChange(*events))
            if wanted:
                snapshot = self._snapshot(scope, user)
                present = [fact_id for fact_id in wanted if fact_id in snapshot]
                if present:
                    usage = sidecars.usage_after_access(
                        paths.usage, present, now, self.access_half_life_days
                    )
                    files.append(FileChange(*usage))
            if files:
                revision = read_manifest(user)[0].revision
                self._commit_files(
                    user, files, claims, JournalInfo(scope.agent, revision, revision, ())
                )

    def purge(self, scope: Scope, fact_id: str) -> None:
        user = self._writable(scope)
        paths = user.agent(scope.agent)
        with self._locked(scope, user) as claims:
            # No decoding: an entry too damaged to read can still be purged.
            if not is_fact_id(fact_id) or not paths.archived(fact_id).is_file():
                raise FactNotFoundError(fact_id, where="archive")
            index, _ = archive_changes(paths, puts=(), deletes=(fact_id,))
            files = [FileChange(paths.archived(fact_id), None)]
            files.extend(FileChange(path, data) for path, data in index)
            revision = read_manifest(user)[0].revision
            self._commit_files(
                user, files, claims, JournalInfo(scope.agent, revision, revision, ())
            )

    def _commit_files(
        self,
        user: UserPaths,
        files: list[FileChange],
        claims: _Claims,
        info: JournalInfo,
        prior: Mapping[Path, bytes] | None = None,
    ) -> None:
        """Commit ``files`` and, with them, the owner records the directories lack
        (``prior``: see :func:`~deermem.store.markdown.journal.commit_files`)."""
        commit_files(user, [*claims, *files], info, prior)
        claims.clear()  # written: the next commit of this transaction needs none

    # --- the commit, for MarkdownTransaction -------------------------------------

    def _commit_locked(
        self,
        scope: Scope,
        user: UserPaths,
        snapshot: ScopeSnapshot | None,
        changes: ChangeSet,
        claims: _Claims,
        archive: ArchiveIndex | None = None,
    ) -> tuple[CommitResult, ScopeSnapshot | None]:
        """Commit under the held lock; return the result and the scope's new snapshot.

        With a current snapshot (the transaction's, or a valid cache entry)
        facts are looked up in it and it is patched afterwards; without one
        only the facts the change set names are read — never the whole scope.
        ``archive`` is the archive's order as read under the same lock, if the
        caller has read it already.
        """
        paths = user.agent(scope.agent)
        document, token, data = _read_manifest(user)
        if snapshot is None or snapshot.version != token.version():
            snapshot = self._cache.get(scope, token)
        lookup = snapshot.get if snapshot is not None else partial(read_fact, paths, scope)
        plan = plan_commit(
            lookup,
            document,
            changes,
            paths,
            scope,
            lambda fact_id: paths.archived(fact_id).is_file(),
        )
        deleted = [fact.id for fact in plan.change.deleted]
        files, dropped = self._files_of(scope, paths, changes, plan, deleted, archive)
        previous_version = token.version()
        if files:
            info = JournalInfo(
                agent=scope.agent,
                expected_revision=document.revision,
                next_revision=plan.change.summaries.revision,
                fact_ids=tuple(f.id for f in plan.change.written) + tuple(deleted),
            )
            # memory.json as just read, under this lock: the journal need not read it again.
            prior = {} if data is None else {user.manifest: data}
            self._commit_files(user, files, claims, info, prior)
        if plan.manifest is not None:
            assert plan.manifest.data is not None
            # What the next read finds there, unless someone else commits first.
            _DOCUMENTS.put(user.manifest, plan.manifest.data, plan.change.summaries)
            token = manifest_token(user, plan.change.summaries.revision)
            if snapshot is not None:
                removed = [*plan.change.deleted, *plan.change.replaced.values()]
                snapshot = patched_snapshot(
                    snapshot, plan.change.written, removed, plan.change.summaries, token.version()
                )
                self._cache.put(scope, token, snapshot)
        result = CommitResult(
            revision=plan.change.summaries.revision,
            written=tuple(plan.change.written),
            deleted=tuple(deleted),
            changed=plan.manifest is not None,
            version=token.version(),
            archive=(
                ArchiveChange.of(
                    previous_version, changes.archive_puts, changes.archive_deletes, dropped
                )
                if files
                else ArchiveChange(previous_version, {}, frozenset(), bounded=False)
            ),
        )
        return result, snapshot

    def _files_of(
        self,
        scope: Scope,
        paths: ScopePaths,
        changes: ChangeSet,
        plan: CommitPlan,
        deleted: list[str],
        archive: ArchiveIndex | None,
    ) -> tuple[list[FileChange], set[str]]:
        """Every file of one commit: facts and archive entries, the bookkeeping, ``memory.json``;
        and the ids of the archive entries its bounds drop.

        The bookkeeping — the audit, the usage sidecar, the regret sidecars,
        the archive's index and bounds, the thread marks — is computed before
        anything is written, so a file it cannot read (a malformed audit)
        stops the commit before it starts. Each file
        appears once; ``memory.json`` comes last.
        """
        book = [
            change
            for change in (
                sidecars.usage_after_commit(
                    paths.usage, forget=deleted, restore=changes.usage_restores
                ),
                sidecars.audit_after_commit(
                    paths.audit,
                    changes.receipts,
                    self.audit_max_entries,
                    forget=deleted if changes.forget_in_audit else [],
                ),
                sidecars.regret_after_commit(
                    paths.regret_events, changes.regret_events, self.regret_max_events
                ),
                sidecars.shadow_marks_after_commit(paths.shadow_marks, changes.shadow_marks),
            )
            if change is not None
        ]
        if changes.records is not None:  # never with the appends above (plan_changes refuses)
            book.extend(sidecars.records_after_commit(paths, changes.records))
        stamp = format_timestamp(changes.now)
        for thread_id, mark in changes.watermarks.items():
            if read_mark(paths, thread_id) != mark:
                book.append(
                    (paths.thread_mark(thread_id), encode_mark(paths, thread_id, mark, stamp))
                )
        pruned: set[str] = set()
        if changes.archive_puts or changes.archive_deletes:
            index, pruned = archive_changes(
                paths,
                puts=changes.archive_puts,
                deletes=changes.archive_deletes,
                now=changes.now,
                max_entries=self.archive_max_entries,
                max_age_days=self.archive_max_age_days,
                order=archive,
            )
            book.extend(index)
        doomed = {paths.archived(fact_id) for fact_id in pruned}
        files = [change for change in plan.files if change.path not in doomed]
        files.extend(FileChange(path, data) for path, data in book)
        if plan.manifest is not None:
            files.append(plan.manifest)
        return files, pruned


class MarkdownTransaction:
    """A locked scope of a :class:`MarkdownStore` (see :class:`~deermem.store.StoreTransaction`)."""

    def __init__(
        self, store: MarkdownStore, scope: Scope, user: UserPaths, claims: _Claims
    ) -> None:
        self._store = store
        self._scope = scope
        self._user = user
        self._claims = claims
        self._paths = user.agent(scope.agent)
        self._snapshot: ScopeSnapshot | None = None
        # The archive's order, read once per commit: the lock keeps it still.
        self._archive: ArchiveIndex | None = None

    @property
    def user(self) -> UserPaths:
        """The files of the locked user directory."""
        return self._user

    def commit_files(self, files: list[FileChange], info: JournalInfo) -> None:
        """Write ``files`` in one journaled commit (with the owner records the directories
        lack): how a whole user is written at once (:mod:`~deermem.store.markdown.transfer`)."""
        self._store._commit_files(self._user, files, self._claims, info)
        self._snapshot = None

    @property
    def snapshot(self) -> ScopeSnapshot:
        if self._snapshot is None:
            self._snapshot = self._store._snapshot(self._scope, self._user)
        return self._snapshot

    def usage(self) -> Mapping[str, UsageEntry]:
        return sidecars.read_usage(self._paths.usage)

    def archived(self, fact_id: str) -> ArchiveEntry | None:
        return read_entry(self._paths, self._scope, fact_id)

    def archive(self, now: datetime) -> tuple[ArchiveEntry, ...]:
        entries = read_archive(self._paths, self._scope)
        limit = self._store.archive_max_age_days
        return tuple(e for e in entries if not e.expired(now, limit))

    def records(self) -> ScopeRecords:
        return sidecars.read_records(self._paths)

    def archived_matches(
        self, contents: Sequence[str], now: datetime
    ) -> Mapping[str, ArchiveEntry]:
        # On a damaged archive, archive_matches reads it again and says why it cannot.
        with contextlib.suppress(CorruptMemoryFile):
            if self._archive is None:
                self._archive = archive_index(self._paths)
        max_age = self._store.archive_max_age_days
        return archive_matches(self._paths, self._scope, contents, now, max_age, self._archive)

    def shadow_marks(self) -> Mapping[str, ShadowMark]:
        return sidecars.read_shadow_marks(self._paths.shadow_marks)

    def watermark(self, thread_id: str) -> str | None:
        return read_mark(self._paths, thread_id)  # the user's lock is held: no writer moves it

    def commit(self, changes: ChangeSet) -> CommitResult:
        changes, redacted = redacted_changes(changes, self._store.redact_secrets)
        archive, self._archive = self._archive, None
        result, self._snapshot = self._store._commit_locked(
            self._scope, self._user, self._snapshot, changes, self._claims, archive
        )
        return result._replace(redacted=redacted) if redacted else result


# ---------------------------------------------------------------------------
# Reading a scope from disk: the user's document and every fact file.
#
# Reads are strict (see deermem.store.markdown.files): a file that is not what it
# must be stops the load with an error naming it. Stray temporary files from an
# interrupted writer are skipped; they are never facts.
# ---------------------------------------------------------------------------


_SHARD_NAME_LENGTH = 2


def _creation_settings(config: MemoryConfig, root: Path) -> str | None:
    """The settings file a new store at ``root`` records at its first write, if any.

    Only the :data:`~deermem.config.NEW_STORE_SETTINGS` keys, at the values
    ``config`` gives them, and only when they differ from what a store without
    a record runs: then an absent record means the same thing.
    """
    if not is_new_root(root):
        return None
    values = {key: getattr(config, key) for key in NEW_STORE_SETTINGS}
    if all(MemoryConfig.model_fields[key].default == value for key, value in values.items()):
        return None
    return render_store_settings(config_from_mapping(values))


# memory.json as this process last read or wrote it (see KnownFiles): a commit
# seeds it with the document it wrote, so the next commit or load decodes nothing.
_DOCUMENTS: Final = KnownFiles[SummaryDocument](_PATHS_MEMO_LIMIT)


def read_manifest(user: UserPaths) -> tuple[SummaryDocument, ManifestToken]:
    """The user's summary document and its signature (defaults when absent).

    The file is read every time; it is decoded only when its bytes are not
    those this process last read or wrote there.
    """
    document, token, _ = _read_manifest(user)
    return document, token


def _read_manifest(user: UserPaths) -> tuple[SummaryDocument, ManifestToken, bytes | None]:
    """:func:`read_manifest`, and the file's bytes (``None``: there is no file)."""
    try:
        data, status = read_file_status(user.manifest)
    except FileNotFoundError:
        return SummaryDocument(), ABSENT, None
    document = _DOCUMENTS.get(user.manifest, data)
    if document is None:
        document = decode_summaries(data, user.manifest)
        _DOCUMENTS.put(user.manifest, data, document)
    token = ManifestToken(status.st_mtime_ns, status.st_size, status.st_ino, document.revision)
    return document, token, data


def manifest_token(user: UserPaths, revision: int) -> ManifestToken:
    """The signature of a manifest this process has just written at ``revision``."""
    status = user.manifest.stat()
    return ManifestToken(status.st_mtime_ns, status.st_size, status.st_ino, revision)


def check_layout(paths: ScopePaths) -> None:
    """Refuse layouts deermem cannot read without losing facts.

    A per-agent ``memory.json`` is the original's first layout; its facts
    would be invisible, and the next write would make the loss permanent.
    """
    if paths.legacy_manifest.is_file():
        raise CorruptMemoryFile(
            paths.legacy_manifest,
            "a per-agent memory.json from the original's version-1 layout; migrate it with "
            "the original DeerMem's migration tool first",
        )


def scan_facts(paths: ScopePaths, scope: Scope) -> dict[str, Fact]:
    """Read every fact file of a scope (a cold load)."""
    try:
        shards = sorted(paths.facts_dir.iterdir())
    except FileNotFoundError:
        return {}
    facts: dict[str, Fact] = {}
    for shard in shards:
        if shard.name.startswith("."):
            continue
        if not shard.is_dir():
            if shard.suffix == ".md":
                raise CorruptMemoryFile(shard, "a fact file outside its shard directory")
            continue
        for path in sorted(shard.iterdir()):
            if path.name.startswith(".") or path.suffix != ".md":
                continue
            fact_id = path.stem
            _check_name(fact_id, shard.name, path)
            facts[fact_id] = decode_fact(read_file(path), path, scope, fact_id)
    return facts


def read_fact(paths: ScopePaths, scope: Scope, fact_id: str) -> Fact | None:
    """One fact by id, read from its file alone (``None`` if it does not exist)."""
    if not is_fact_id(fact_id):
        return None
    path = paths.fact(fact_id)
    data = read_if_exists(path)
    return None if data is None else decode_fact(data, path, scope, fact_id)


def _check_name(fact_id: str, shard: str, path: Path) -> None:
    if not is_fact_id(fact_id):
        raise CorruptMemoryFile(path, "the file name is not a valid fact id")
    if len(shard) != _SHARD_NAME_LENGTH or fact_shard(fact_id) != shard:
        raise CorruptMemoryFile(
            path, f"the fact belongs in shard directory {fact_shard(fact_id)!r}, not {shard!r}"
        )


# ---------------------------------------------------------------------------
# The read cache's key: loaded scopes are valid while the user's ``memory.json`` is unchanged.
#
# Every commit rewrites the user's ``memory.json`` with a new revision, through
# a rename, so the file's signature — modification time, size, inode and the
# revision inside — changes with every commit by any process. A cached scope is
# served only while that signature is the one it was loaded at; checking costs
# one small read, against a scan of every fact file for a cold load. The
# document is decoded only when the bytes read are not those this process last
# read or wrote there (_DOCUMENTS): its own commits seed them, so the next
# commit or load decodes nothing.
#
# Edits to fact files made behind the store's back do not change the signature;
# MarkdownStore.reload drops the cached scope. (The cache itself is
# deermem.store.plan's ScopeCache, shared with the PostgreSQL store.)
# ---------------------------------------------------------------------------


class ManifestToken(NamedTuple):
    """The signature of a user's ``memory.json`` (all zero when it does not exist)."""

    mtime_ns: int
    size: int
    inode: int
    revision: int

    def version(self) -> str:
        return f"{self.revision}:{self.mtime_ns}:{self.size}:{self.inode}"


ABSENT: Final = ManifestToken(0, 0, 0, 0)


# ---------------------------------------------------------------------------
# The exact files a commit writes.
#
# plan_commit adds the Markdown store's files to what deermem.store.plan's
# plan_changes works out for every store. Only what the change
# set addresses is touched — read, checked and written: a commit that adds one
# fact writes that fact's file and the user's ``memory.json``, whatever the
# size of the library, and reads no other fact.
# ---------------------------------------------------------------------------


@dataclass
class CommitPlan:
    """The files to write for a planned change.

    Attributes:
        change: what the commit changes (facts, summaries), as every store plans it.
        files: the fact files and archive entries to write or remove.
        manifest: the user's new ``memory.json``, when anything above or a summary changes.
    """

    change: ChangePlan
    files: list[FileChange] = field(default_factory=list)
    manifest: FileChange | None = None


def plan_commit(
    lookup: Callable[[str], Fact | None],
    current: SummaryDocument,
    changes: ChangeSet,
    paths: ScopePaths,
    scope: Scope,
    archive_exists: Callable[[str], bool],
) -> CommitPlan:
    """Check preconditions and lay out the files of a commit.

    The checks are :func:`~deermem.store.plan.plan_changes`'s, and so are the errors
    raised when one fails.
    """
    changed = plan_changes(lookup, current, changes, scope, archive_exists)
    plan = CommitPlan(changed)
    for fact in changed.written:
        plan.files.append(FileChange(paths.fact(fact.id), encode_fact(fact, scope)))
    for stored in changed.deleted:
        plan.files.append(FileChange(paths.fact(stored.id), None))
    for fact_id in changes.archive_deletes:
        plan.files.append(FileChange(paths.archived(fact_id), None))
    for entry in changes.archive_puts:
        plan.files.append(FileChange(paths.archived(entry.fact_id), encode_entry(entry)))
    if changed.changed:
        plan.manifest = FileChange(paths.user.manifest, encode_summaries(changed.summaries))
    return plan
