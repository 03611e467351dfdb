"""The Markdown store seen whole, user by user (:class:`~deermem.store.protocol.Transfer`).

Reading goes through the store's own readers (the scope under its lock, the
sidecars, the archive in arrival order, the thread marks); writing lays out
every file of a user — facts, ``memory.json`` with the dumped revision, the
sidecars (the regret ones included), the archive with its index, the marks —
with the store's own encoders and writes them in one journaled commit
(:mod:`~deermem.store.markdown.journal`),
so a copy is all there or not at all, and a store deermem wrote comes back
byte for byte.

Which directory is whose is decided by :mod:`~deermem.store.markdown.files`, as for
``deermem scopes``: a directory that cannot be told to be one user's (or one
agent's) — a collision already on disk, a derived name with nothing naming
its owner — stops the copy with an error naming it, before anything is
written: a migration never leaves a memory behind silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from deermem.errors import CorruptMemoryFile
from deermem.model import DEFAULT_AGENT, Scope
from deermem.store.markdown import sidecars
from deermem.store.markdown.files import (
    Owner,
    Problem,
    UserPaths,
    encode_fact,
    encode_owner,
    holds_a_file,
    list_agents,
    list_users,
)
from deermem.store.markdown.journal import FileChange, JournalInfo
from deermem.store.markdown.sidecars import (
    archive_changes,
    arrival_order,
    encode_mark,
    read_entry,
    read_marks,
)
from deermem.store.markdown.store import MarkdownStore, read_manifest
from deermem.store.protocol import ScopeDump, UserDump
from deermem.store.records import SummaryDocument, encode_entry, encode_summaries

__all__ = ["MarkdownTransfer"]


class MarkdownTransfer:
    """Dump and load whole users of a :class:`~deermem.store.MarkdownStore`."""

    def __init__(self, store: MarkdownStore) -> None:
        self.store = store

    def users(self) -> tuple[str | None, ...]:
        """The single-user layout (``None``) if the root holds one, then every user directory.

        Raises:
            CorruptMemoryFile: a user directory that cannot be told to be one
                user's (see :func:`~deermem.store.markdown.files.list_users`).
        """
        users, problems = list_users(self.store.root, self.store.manifest_filename)
        _refuse(problems)
        return tuple(users)

    def dump_user(self, user_id: str | None) -> UserDump | None:
        # One view of the user, as a commit leaves it: the library, the receipts and the
        # archive are read one after another, and a commit between two reads would show a
        # fact in both the library and the archive, or an entry without its receipt.
        with self.store.holding(user_id):
            return self._dump_user(user_id)

    def _dump_user(self, user_id: str | None) -> UserDump | None:
        store = self.store
        user = store.user_paths(user_id)
        agents, problems = list_agents(user)
        _refuse(problems)
        scopes = []
        for agent in agents:
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
                regret=tuple(sidecars.raw_regret_events(paths.regret_events)),
                shadow=sidecars.raw_shadow_marks(paths.shadow_marks),
            )
            if not dump.empty:
                scopes.append(dump)
        summaries = store.load(Scope.of(user_id)).summaries
        if not scopes and not user.manifest.is_file():
            return None
        return UserDump(user_id, summaries, tuple(scopes))

    def load_user(self, dump: UserDump) -> None:
        store = self.store
        with store.transaction(Scope.of(dump.user_id)) as transaction:  # lock and owner
            user = transaction.user
            agents, problems = list_agents(user)
            # A copy killed part-way is rolled back to no file, but leaves the directories
            # it made: a user of empty directories is not held, and the copy runs again.
            holds = any(holds_a_file(user.agent(agent).agent_dir) for agent in agents)
            if user.manifest.exists() or holds or problems:
                raise FileExistsError(
                    f"{user.user_dir}: the destination already holds this user; "
                    "migrate into an empty store"
                )
            files = []
            # The empty document at revision 0 is what a user without `memory.json` reads
            # as (a conversation learned from, nothing extracted: its marks alone), so it
            # writes none; a user with nothing else keeps it, or it would not be copied.
            if dump.summaries != SummaryDocument() or not dump.scopes:
                files.append(FileChange(user.manifest, encode_summaries(dump.summaries)))
            for scope_dump in dump.scopes:
                scope = Scope.of(dump.user_id, scope_dump.agent)
                files.extend(_scope_files(user, scope, scope_dump))
            info = JournalInfo(DEFAULT_AGENT, 0, dump.summaries.revision, ())
            transaction.commit_files(files, info)
            # The manifest was written behind the cache's back (at the same revision, maybe).
            store.reload(Scope.of(dump.user_id))
        read_manifest(user)  # what was written reads back


def _scope_files(user: UserPaths, scope: Scope, dump: ScopeDump) -> list[FileChange]:
    paths = user.agent(scope.agent)
    files = [FileChange(paths.fact(fact.id), encode_fact(fact, scope)) for fact in dump.facts]
    if paths.agent_dir.name != scope.agent:  # a long name: its directory names it
        files.append(FileChange(paths.owner, encode_owner(Owner(scope.user_id, scope.agent))))
    if dump.usage:
        files.append(FileChange(paths.usage, sidecars.encode_usage(dump.usage)))
    if dump.events:
        files.append(FileChange(paths.audit, sidecars.encode_events(dump.events)))
    files.extend(FileChange(paths.archived(e.fact_id), encode_entry(e)) for e in dump.archive)
    if dump.archive:
        index, _ = archive_changes(paths, puts=dump.archive, deletes=())
        files.extend(FileChange(path, data) for path, data in index)
    files.extend(
        FileChange(paths.thread_mark(mark.thread_id), encode_mark(paths, *mark))
        for mark in dump.marks
    )
    if dump.regret:
        files.append(FileChange(paths.regret_events, sidecars.encode_regret_events(dump.regret)))
    if dump.shadow:
        files.append(FileChange(paths.shadow_marks, sidecars.encode_shadow_marks(dump.shadow)))
    return files


def _refuse(problems: Sequence[Problem]) -> None:
    """Stop a copy that would leave a directory's memory behind: name the first, count the rest."""
    if problems:
        more = (
            f" (and {len(problems) - 1} more: `deermem scopes` lists them)" if problems[1:] else ""
        )
        raise CorruptMemoryFile(problems[0].path, problems[0].problem + more)
