"""The Markdown store seen whole, user by user (:class:`~deermem.store.dump.Transfer`).

Reading goes through the store's own readers (the scope under its lock, the
sidecars, the archive in arrival order, the thread marks); writing lays out
every file of a user — facts, ``memory.json`` with the dumped revision, the
sidecars (the regret ones included), the archive with its index, the marks —
with the store's own encoders and writes them in one journaled commit
(:mod:`~deermem.store.journal`),
so a copy is all there or not at all, and a store deermem wrote comes back
byte for byte.

User directories are named after a safe form of the user id
(:func:`~deermem.store.scope.safe_user_id`); the raw id is read back from the
``user_id`` a fact or an archived fact of the user stores. A directory whose
id cannot be recovered that way — its name was derived, and it holds no fact
that names its user — is an error naming it, not a guess.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from deermem._exceptions import CorruptMemoryFile, UnsafeIdentifierError
from deermem.store import regret_log, sidecars
from deermem.store.archive import archive_changes, arrival_order, encode_entry, read_entry
from deermem.store.codec import encode_fact, encode_summaries
from deermem.store.dump import ScopeDump, UserDump
from deermem.store.journal import FileChange, JournalInfo, commit_files
from deermem.store.markdown_store import MarkdownStore
from deermem.store.marks import encode_mark, read_marks
from deermem.store.paths import UserPaths
from deermem.store.reading import read_manifest
from deermem.store.scope import DEFAULT_AGENT, Scope, normalise_agent, safe_user_id

__all__ = ["MarkdownTransfer"]


class MarkdownTransfer:
    """Dump and load whole users of a :class:`~deermem.store.MarkdownStore`."""

    def __init__(self, store: MarkdownStore) -> None:
        self.store = store

    def users(self) -> tuple[str | None, ...]:
        """The single-user layout (``None``) if the root holds one, then every user directory.

        Raises:
            CorruptMemoryFile: a user directory whose user id cannot be told.
        """
        root = self.store.root
        found: list[str | None] = []
        if (root / self.store.manifest_filename).is_file() or (root / "agents").is_dir():
            found.append(None)
        try:
            directories = sorted(path for path in (root / "users").iterdir() if path.is_dir())
        except FileNotFoundError:
            directories = []
        found.extend(_user_id_of(directory) for directory in directories)
        return tuple(found)

    def dump_user(self, user_id: str | None) -> UserDump | None:
        store = self.store
        user = UserPaths(store.root, user_id, store.manifest_filename)
        scopes = []
        for agent in _agents(user):
            scope = Scope.of(user_id, agent)
            paths = user.agent(agent)
            snapshot = store.load(scope)  # recovers an interrupted commit first
            dump = ScopeDump(
                agent=agent,
                facts=snapshot.facts,
                usage=dict(store.usage(scope)),
                events=tuple(sidecars.read_events(paths.audit)),
                archive=tuple(
                    entry
                    for fact_id, _ in arrival_order(paths)
                    if (entry := read_entry(paths, scope, fact_id)) is not None
                ),
                marks=tuple(read_marks(paths)),
                regret=tuple(regret_log.raw_regret_events(paths.regret_events)),
                shadow=regret_log.raw_shadow_marks(paths.shadow_marks),
            )
            if not dump.empty:
                scopes.append(dump)
        summaries = store.load(Scope.of(user_id)).summaries
        if not scopes and not user.manifest.is_file():
            return None
        return UserDump(user_id, summaries, tuple(scopes))

    def load_user(self, dump: UserDump) -> None:
        store = self.store
        user = UserPaths(store.root, dump.user_id, store.manifest_filename)
        files = [FileChange(user.manifest, encode_summaries(dump.summaries))]
        for scope_dump in dump.scopes:
            files.extend(_scope_files(user, Scope.of(dump.user_id, scope_dump.agent), scope_dump))
        with store.transaction(Scope.of(dump.user_id)):  # the user's lock
            if user.manifest.exists() or _agents(user):
                raise FileExistsError(
                    f"{user.user_dir}: the destination already holds this user; "
                    "migrate into an empty store"
                )
            info = JournalInfo(DEFAULT_AGENT, 0, dump.summaries.revision, ())
            commit_files(user, files, info)
            # The manifest was written behind the cache's back (at the same revision, maybe).
            store.reload(Scope.of(dump.user_id))
        read_manifest(user)  # what was written reads back


def _scope_files(user: UserPaths, scope: Scope, dump: ScopeDump) -> list[FileChange]:
    paths = user.agent(scope.agent)
    files = [FileChange(paths.fact(fact.id), encode_fact(fact, scope)) for fact in dump.facts]
    if dump.usage:
        files.append(FileChange(paths.usage, sidecars.encode_usage(dump.usage)))
    if dump.events:
        files.append(FileChange(paths.audit, sidecars.encode_events(dump.events)))
    files.extend(FileChange(paths.archived(e.fact_id), encode_entry(e)) for e in dump.archive)
    if dump.archive:
        index, _ = archive_changes(paths, puts=dump.archive, deletes=())
        files.extend(FileChange(path, data) for path, data in index)
    files.extend(
        FileChange(paths.thread_mark(mark.thread_id), encode_mark(*mark)) for mark in dump.marks
    )
    if dump.regret:
        files.append(FileChange(paths.regret_events, regret_log.encode_regret_events(dump.regret)))
    if dump.shadow:
        files.append(FileChange(paths.shadow_marks, regret_log.encode_shadow_marks(dump.shadow)))
    return files


def _agents(user: UserPaths) -> list[str]:
    """The agent buckets of a user directory (other directories hold nothing deermem reads)."""
    try:
        names = sorted(path.name for path in (user.user_dir / "agents").iterdir() if path.is_dir())
    except FileNotFoundError:
        return []
    buckets = []
    for name in names:
        try:
            if normalise_agent(name) == name:
                buckets.append(name)
        except UnsafeIdentifierError:
            continue
    return buckets


def _user_id_of(directory: Path) -> str:
    """The raw user id of a user directory: stored in its facts, else its own name if plain.

    Raises:
        CorruptMemoryFile: the name was derived from another id, and no fact names it.
    """
    for stored in _stored_user_ids(directory):
        if safe_user_id(stored) == directory.name:
            return stored
    try:
        if safe_user_id(directory.name) == directory.name:
            return directory.name
    except UnsafeIdentifierError:
        pass
    raise CorruptMemoryFile(
        directory,
        "cannot tell the user id of this directory: its name is derived from the id, and no "
        "fact or archived fact of it names its user",
    )


def _stored_user_ids(directory: Path) -> list[str]:
    """The user ids the first fact file and archive entry of each agent name."""
    found: list[object] = []
    for agent in sorted((directory / "agents").glob("*")):
        fact_file = next(iter(sorted(agent.glob("facts/*/*.md"))), None)
        if fact_file is not None:
            front = fact_file.read_text("utf-8").split("\n---\n", 1)[0].removeprefix("---\n")
            try:
                meta = yaml.safe_load(front)
            except yaml.YAMLError:
                meta = None
            if isinstance(meta, dict):
                found.append(meta.get("user_id"))
        entry_file = next(iter(sorted(agent.glob(".metadata/archive/*.json"))), None)
        if entry_file is not None:
            try:
                entry = json.loads(entry_file.read_bytes())
                found.append(entry["fact"]["scope"]["userId"])
            except (ValueError, KeyError, TypeError):
                pass
    return [user_id for user_id in found if isinstance(user_id, str)]
