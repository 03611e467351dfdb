"""Moving a memory between stores: ``deermem migrate --from SRC --to DST``.

A location is a Markdown store directory or a PostgreSQL URL; either can be
the source or the destination. :func:`migrate` copies user by user — each
user whole, in one atomic write of the destination — and verifies every
copy by dumping it back from the destination and comparing it with the
source's dump (summaries with their revision, facts with every field, usage,
receipts, the archive in arrival order, thread marks, regret events and
shadow marks). Nothing about the source changes.

Before anything is written, every source user is looked up in the
destination: a user the destination already holds with other data stops the
migration (:class:`~deermem.errors.MigrationError`); one it holds identically is
skipped, so a migration that was interrupted can simply be run again.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from deermem.config import MemoryConfig, is_database_url, redact_database_url
from deermem.errors import ConfigError, MigrationError
from deermem.model import FLATTEN, Record
from deermem.store.markdown.store import MarkdownStore
from deermem.store.markdown.transfer import MarkdownTransfer
from deermem.store.protocol import Transfer, UserDump

__all__ = [
    "MigrationReport",
    "migrate",
    "opened_location",
]

Progress = Callable[[int, int], None]
"""Called with (users done, users in all) as the migration goes."""


@dataclass
class MigrationReport(Record):
    """What a migration did (counts only: no content, no credentials).

    Attributes:
        source: the source, as shown (a database without its password).
        destination: the destination, as shown.
        copied: users copied and verified.
        skipped: users the destination already held, identical.
        counts: facts, usage entries, audit events, archive entries, marks,
            regret events, shadow marks and agents, summed over the users copied.
    """

    source: str
    destination: str
    copied: int = 0
    skipped: int = 0
    counts: dict[str, int] = field(default_factory=dict, metadata=FLATTEN)

    json_fields = ("source", "destination", "users", "copied", "skipped", "verified", "counts")

    @property
    def users(self) -> int:
        """Users the migration went through: copied or already there."""
        return self.copied + self.skipped

    @property
    def verified(self) -> bool:
        """Always true: a report is made only once every user copied was read back equal."""
        return True


@contextmanager
def opened_location(
    location: str, config: MemoryConfig, *, must_exist: bool
) -> Iterator[tuple[Transfer, str]]:
    """A store at ``location`` seen whole, and how to show the location.

    Raises:
        ConfigError: a source directory that does not exist, or a database
            URL without the ``postgres`` extra installed.
        DatabaseError, DatabaseSchemaError: the database cannot be used.
    """
    if is_database_url(location):
        try:  # the driver is an optional extra: imported only when a database is named
            from deermem.store.postgres.transfer import PostgresTransfer
        except ModuleNotFoundError as error:
            raise ConfigError(
                [f"{redact_database_url(location)}: PostgreSQL needs the postgres extra ({error})"]
            ) from None
        transfer = PostgresTransfer.open(config, location)
        try:
            yield transfer, transfer.store.address
        finally:
            transfer.store.close()
        return
    root = Path(location).expanduser()
    if must_exist and not root.is_dir():
        raise ConfigError([f"{location}: no store directory there"])
    yield MarkdownTransfer(MarkdownStore.from_config(config, root)), os.fspath(root)


def migrate(
    source: Transfer,
    destination: Transfer,
    report: MigrationReport,
    *,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy every user of ``source`` into ``destination`` and verify each copy.

    Raises:
        MigrationError: the destination holds a user with other data (nothing
            was copied), or a copy reads back differently (the users before
            it are copied and verified).
    """
    users = source.users()
    held = set(destination.users())
    skipped = set()
    for user in users:
        if user not in held:
            continue
        mine, there = source.dump_user(user), destination.dump_user(user)
        if mine is None or there is None or there.document() != mine.document():
            raise MigrationError(
                user,
                "the destination already holds this user, with other data; nothing was "
                "copied (migrate into an empty store)",
            )
        skipped.add(user)
    report.skipped = len(skipped)
    done, total = len(skipped), len(users)
    if progress is not None:
        progress(done, total)
    for user in users:
        if user in skipped:
            continue
        dump = source.dump_user(user)  # one user in memory at a time
        if dump is not None:
            destination.load_user(dump)
            copy = destination.dump_user(user)
            if copy is None or copy.document() != dump.document():
                raise MigrationError(user, _difference(dump, copy))
            report.copied += 1
            for key, value in dump.counts().items():
                report.counts[key] = report.counts.get(key, 0) + value
        done += 1
        if progress is not None:
            progress(done, total)
    return report


def _difference(expected: UserDump, found: UserDump | None) -> str:
    """Which parts of a copy differ from the source (names of parts, never content)."""
    if found is None:
        return "the copy cannot be read back from the destination"
    parts = []
    want, got = expected.document(), found.document()
    if want["summaries"] != got["summaries"]:
        parts.append("summaries")
    want_agents, got_agents = want["agents"], got["agents"]
    assert isinstance(want_agents, dict)
    assert isinstance(got_agents, dict)
    for agent in sorted(set(want_agents) | set(got_agents)):
        mine, theirs = want_agents.get(agent, {}), got_agents.get(agent, {})
        parts.extend(
            f"{agent}.{name}"
            for name in ("facts", "usage", "events", "archive", "marks", "regret", "shadowMarks")
            if mine.get(name) != theirs.get(name)
        )
    return "the copy differs from the source in " + (", ".join(parts) or "its shape")
