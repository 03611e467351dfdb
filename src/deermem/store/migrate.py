"""Moving a memory between stores: ``deermem migrate --from SRC --to DST``.

A location is a Markdown store directory or a PostgreSQL URL; either can be
the source or the destination. :func:`migrate` copies user by user — each
user whole, in one atomic write of the destination — and verifies every
copy by dumping it back from the destination and comparing it with the
source's dump (summaries with their revision, facts with every field, usage,
receipts, the archive in arrival order, thread marks, regret events and
shadow marks). Nothing about the source changes. Secrets in what is copied are
replaced on the way (``redact_secrets``, :func:`deermem.store.plan.redact_dump`):
the copy is verified against the source's dump as redacted.

Before anything is written, every source user is looked up in the
destination: a user the destination already holds with other data stops the
migration (:class:`~deermem.errors.MigrationError`); one it holds identically is
skipped, so a migration that was interrupted can simply be run again.

The store's settings go with it (:func:`carry_settings`): between two
directories, ``deermem.yaml`` is copied as it is; into or out of a database,
the source's record (a directory's ``deermem.yaml``, a database's
``deermem_settings``) becomes the destination's, with the policy the source
ran under stated (:func:`deermem.config.copied_settings`) — a store created
before new stores ran ``hybrid-v1`` keeps ``confidence`` after the move, and
one built at a cap of 10 under ``hybrid-v1`` keeps both. A database that
already holds users and records other settings is refused before anything is
copied.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from deermem.config import (
    MemoryConfig,
    copied_settings,
    is_database_url,
    is_new_root,
    read_store_settings,
    recorded_settings,
    redact_url,
    render_store_settings,
    store_settings_path,
)
from deermem.errors import (
    ConfigError,
    CorruptMemoryFile,
    DatabaseError,
    FactValidationError,
    MigrationError,
    NotAStoreError,
)
from deermem.model import (
    FLATTEN,
    Fact,
    Record,
    Scope,
    check_user_id,
    is_fact_id,
    normalise_agent,
    parse_timestamp,
)
from deermem.store.markdown.files import may_hold_store, write_store_settings
from deermem.store.markdown.store import MarkdownStore
from deermem.store.markdown.transfer import MarkdownTransfer
from deermem.store.plan import redact_dump
from deermem.store.protocol import ScopeDump, Store, Transfer, UserDump
from deermem.store.records import (
    ThreadMark,
    UsageEntry,
    decode_entry,
    decode_summaries,
    summaries_header_problem,
)

if TYPE_CHECKING:
    from deermem.store.postgres import PostgresStore
    from deermem.store.postgres.transfer import PostgresTransfer

__all__ = [
    "USER_EXPORT_FORMAT",
    "USER_EXPORT_VERSION",
    "MigrationReport",
    "carry_settings",
    "migrate",
    "opened_location",
    "read_user_export",
    "transfer_of",
    "user_export",
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
        settings: the settings the destination keeps from the source (names only).
        redacted: the kinds of secret replaced in what was copied (never the values).
    """

    source: str
    destination: str
    copied: int = 0
    skipped: int = 0
    counts: dict[str, int] = field(default_factory=dict, metadata=FLATTEN)
    settings: tuple[str, ...] = ()
    redacted: set[str] = field(default_factory=set)

    json_fields = (
        "source",
        "destination",
        "users",
        "copied",
        "skipped",
        "verified",
        "settings",
        "counts",
        "redacted",
    )

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

    A source directory must hold a store; a destination directory must hold
    one or be new or empty, as every command's root (a one-level typo — the
    store's parent — would copy nothing, or write a store among other files).

    Raises:
        NotAStoreError: a source directory that does not exist, is empty or
            holds other files than a store's; a destination directory of
            other files.
        ConfigError: a database URL without the ``postgres`` extra installed.
        DatabaseError, DatabaseSchemaError: the database cannot be used.
    """
    if is_database_url(location):
        try:
            opened = _postgres_transfer()
        except ModuleNotFoundError as error:
            raise ConfigError(
                [f"{redact_url(location)}: PostgreSQL needs the postgres extra ({error})"]
            ) from None
        transfer = opened.open(config, location)
        try:
            yield transfer, transfer.store.address
        finally:
            transfer.store.close()
        return
    root = Path(location).expanduser()
    if must_exist:
        problem = _not_a_source(root, config.manifest_filename)
        if problem is not None:
            raise NotAStoreError(location, f"no store there: {problem}; check the path")
    elif not may_hold_store(root, config.manifest_filename):
        raise NotAStoreError(
            location,
            "neither empty nor a deermem store; a store is created in a new or empty directory",
        )
    yield MarkdownTransfer(MarkdownStore.from_config(config, root)), os.fspath(root)


def _not_a_source(root: Path, manifest_filename: str) -> str | None:
    """Why ``root`` holds no store to copy from, or ``None`` if it holds one."""
    if not root.is_dir():
        return "the directory does not exist" if not root.exists() else "not a directory"
    if is_new_root(root):
        return "the directory is empty"
    if not may_hold_store(root, manifest_filename):
        return "the directory is neither empty nor a deermem store"
    return None


def carry_settings(source: Transfer, destination: Transfer) -> tuple[str, ...]:
    """Give the destination the source's settings, before anything is copied.

    ``source`` and ``destination`` are as :func:`opened_location` opens
    them. See the module docstring for the rules.

    Returns:
        The names of the settings the destination now keeps (or already
        keeps), sorted.

    Raises:
        ConfigError: a source record that cannot be read, or a database
            destination that holds users and records other settings.
        StoreSettingsExistError: a Markdown destination already keeps other settings.
    """
    if isinstance(source, MarkdownTransfer) and isinstance(destination, MarkdownTransfer):
        root = source.store.root
        kept = read_store_settings(root)
        if not kept:
            return ()
        path = store_settings_path(root)
        text = path.read_text("utf-8")  # as it is: relative paths stay so
        # A hand-written file may hold what its owner keeps from others: the copy's mode
        # is no wider than the source's.
        mode = stat.S_IMODE(path.stat().st_mode)
        write_store_settings(destination.store.root, text, mode=mode)
        return tuple(sorted(kept))
    if isinstance(source, MarkdownTransfer):
        recorded = read_store_settings(source.store.root)
    else:
        recorded = cast("PostgresTransfer", source).settings()
    copied = copied_settings(recorded)
    if isinstance(destination, MarkdownTransfer):
        write_store_settings(destination.store.root, render_store_settings(copied))
    else:
        cast("PostgresTransfer", destination).keep_settings(recorded_settings(copied))
    return tuple(sorted(recorded_settings(copied)))


def migrate(
    source: Transfer,
    destination: Transfer,
    report: MigrationReport,
    *,
    progress: Progress | None = None,
    redact_secrets: bool = True,
) -> MigrationReport:
    """Copy every user of ``source`` into ``destination`` and verify each copy.

    With ``redact_secrets``, each user's secrets are replaced before the copy
    is written (the source keeps them; ``deermem redact`` cleans a store in place).

    Raises:
        MigrationError: the destination holds a user with other data (nothing
            was copied), a user's records hold what the destination cannot keep
            (:func:`check_storable`, or the database refused the copy), or a copy
            reads back differently; each names the user, and the users before it
            are copied and verified.
    """
    users = source.users()
    held = set(destination.users())
    skipped = set()
    for user in users:
        if user not in held:
            continue
        there = destination.dump_user(user)
        if there is None:  # directories without a file (a copy killed part-way): not held
            continue
        mine = _dumped(source, user, redact_secrets, report)
        if mine is None or not same_data(there.document(), mine.document()):
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
        dump = _dumped(source, user, redact_secrets, report)  # one user in memory at a time
        if dump is not None:
            try:
                for scope in dump.scopes:
                    check_storable(scope)
                destination.load_user(dump)
            except (FactValidationError, DatabaseError) as error:
                # Which user the copy stopped at (the users before it are copied).
                raise MigrationError(user, f"not copied: {error}") from None
            copy = destination.dump_user(user)
            if copy is None or not same_data(copy.document(), dump.document()):
                raise MigrationError(user, _difference(dump, copy))
            report.copied += 1
            for key, value in dump.counts().items():
                report.counts[key] = report.counts.get(key, 0) + value
        done += 1
        if progress is not None:
            progress(done, total)
    return report


def _dumped(
    source: Transfer, user: str | None, redact_secrets: bool, report: MigrationReport
) -> UserDump | None:
    """One user of the source, as the destination is to hold it (secrets replaced)."""
    dump = source.dump_user(user)
    if dump is None or not redact_secrets:
        return dump
    dump, kinds = redact_dump(dump)
    report.redacted.update(kinds)
    return dump


def same_data(first: object, second: object) -> bool:
    """Whether two values of plain data (a dump's :meth:`~UserDump.document`) are equal,
    a NaN equal to a NaN.

    ``==`` holds no NaN equal to another: a fact whose own keys hold one (a
    hand-edited file may: YAML's ``.nan``) would read back "different" from a
    right copy, and a second run would take the copy for other data.
    """
    if isinstance(first, float) and isinstance(second, float):
        return first == second or (math.isnan(first) and math.isnan(second))
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(
            same_data(value, second[key]) for key, value in first.items()
        )
    if isinstance(first, list | tuple) and isinstance(second, list | tuple):
        return (
            type(first) is type(second)
            and len(first) == len(second)
            and all(same_data(a, b) for a, b in zip(first, second, strict=True))
        )
    return first == second


def _difference(expected: UserDump, found: UserDump | None) -> str:
    """Which parts of a copy differ from the source (names of parts, never content)."""
    if found is None:
        return "the copy cannot be read back from the destination"
    parts = []
    want, got = expected.document(), found.document()
    if not same_data(want["summaries"], got["summaries"]):
        parts.append("summaries")
    want_agents, got_agents = want["agents"], got["agents"]
    assert isinstance(want_agents, dict)
    assert isinstance(got_agents, dict)
    for agent in sorted(set(want_agents) | set(got_agents)):
        mine, theirs = want_agents.get(agent, {}), got_agents.get(agent, {})
        parts.extend(
            f"{agent}.{name}"
            for name in ("facts", "usage", "events", "archive", "marks", "regret", "shadowMarks")
            if not same_data(mine.get(name), theirs.get(name))
        )
    return "the copy differs from the source in " + (", ".join(parts) or "its shape")


# ---------------------------------------------------------------------------
# One user as a document: ``deermem users export`` and its import (docs/privacy.md)
#
# The export is the user's dump (what migrate copies) under a versioned header:
#
#   {"format": "deermem.user-export", "version": 1, "exportedAt": "...Z",
#    "userId": "...", "summaries": {...},
#    "agents": {"<agent>": {"facts": [...], "usage": {...}, "events": [...],
#               "archive": [...], "marks": [...], "regret": [...], "shadowMarks": {...}}}}
#
# Reading it back checks every part as the stores check their own files and
# gives the dump, which a store that does not hold the user loads whole.
# ---------------------------------------------------------------------------

USER_EXPORT_FORMAT = "deermem.user-export"
USER_EXPORT_VERSION = 1


def transfer_of(store: Store) -> Transfer:
    """The whole-user view (dump, load) of a store opened by :func:`deermem.store.open_store`."""
    if isinstance(store, MarkdownStore):
        return MarkdownTransfer(store)
    return _postgres_transfer()(cast("PostgresStore", store))  # open_store makes no third kind


def _postgres_transfer() -> type[PostgresTransfer]:
    """The PostgreSQL store's whole-user view: its driver is an optional extra,
    imported only when a database is named."""
    from deermem.store.postgres.transfer import PostgresTransfer

    return PostgresTransfer


def user_export(dump: UserDump, exported_at: str) -> dict[str, object]:
    """The export document of a user (see above)."""
    return {
        "format": USER_EXPORT_FORMAT,
        "version": USER_EXPORT_VERSION,
        "exportedAt": exported_at,
        **dump.document(),
    }


def read_user_export(document: object) -> UserDump:
    """The user an export document holds, every part checked.

    Raises:
        FactValidationError: the document is not an export of this version,
            or a part of it is invalid (named: ``agents.coder.archive[3]``).
    """
    if not isinstance(document, Mapping) or document.get("format") != USER_EXPORT_FORMAT:
        raise FactValidationError("format", None, f"expected {USER_EXPORT_FORMAT!r}")
    if document.get("version") != USER_EXPORT_VERSION:
        raise FactValidationError(
            "version", document.get("version"), f"expected {USER_EXPORT_VERSION}"
        )
    raw_user = document.get("userId")
    user_id = check_user_id(raw_user)
    raw_summaries = document.get("summaries")
    if not isinstance(raw_summaries, Mapping):
        raise FactValidationError("summaries", raw_summaries, "expected an object")
    # Named and described as a fact's fields are: the document is a caller's, not a file
    # of the store, and what it holds where a number belongs may be anything.
    problem = summaries_header_problem(raw_summaries)
    if problem is not None:
        name, value, expected = problem
        raise FactValidationError(f"summaries.{name}", value, expected)
    try:
        summaries = decode_summaries(json.dumps(raw_summaries).encode("utf-8"), "summaries")
    except CorruptMemoryFile as error:
        raise FactValidationError("summaries", raw_summaries, error.problem) from None
    agents = document.get("agents")
    if not isinstance(agents, Mapping):
        raise FactValidationError("agents", agents, "expected an object of agents")
    scopes = tuple(
        _scope_of(user_id, agent, part) for agent, part in sorted(agents.items(), key=str)
    )
    return UserDump(user_id, summaries, scopes)


def _scope_of(user_id: str, agent: object, part: object) -> ScopeDump:
    where = f"agents.{agent}"
    if not isinstance(agent, str) or normalise_agent(agent) != agent:
        raise FactValidationError(where, agent, "expected an agent name")
    if not isinstance(part, Mapping):
        raise FactValidationError(where, part, "expected an object")
    scope = Scope.of(user_id, agent)

    def listed(name: str) -> list[object]:
        value = part.get(name, [])
        if not isinstance(value, list):
            raise FactValidationError(f"{where}.{name}", value, "expected a list")
        return value

    def mapped(name: str) -> Mapping[str, object]:
        value = part.get(name, {})
        if not isinstance(value, Mapping):
            raise FactValidationError(f"{where}.{name}", value, "expected an object")
        return value

    facts = tuple(
        Fact.from_dict(_object(f"{where}.facts[{n}]", raw)) for n, raw in enumerate(listed("facts"))
    )
    usage: dict[str, UsageEntry] = {}
    for fact_id, raw in mapped("usage").items():
        _check_record_key(f"{where}.usage", fact_id)  # before the entry: its error names the key
        entry = UsageEntry.from_dict(raw)
        if entry is None:
            raise FactValidationError(f"{where}.usage.{fact_id}", raw, "expected a usage entry")
        usage[fact_id] = entry
    archive = []
    for n, raw in enumerate(listed("archive")):
        label = f"{where}.archive[{n}]"
        fact = _object(label, raw).get("fact")
        archived_id = fact.get("id") if isinstance(fact, Mapping) else None
        try:
            archive.append(
                decode_entry(json.dumps(raw).encode("utf-8"), label, scope, str(archived_id))
            )
        except CorruptMemoryFile as error:
            raise FactValidationError(label, None, error.problem) from None
    marks = []
    for n, raw in enumerate(listed("marks")):
        mark = _object(f"{where}.marks[{n}]", raw)
        values = (mark.get("thread_id"), mark.get("mark"), mark.get("marked_at"))
        if not all(isinstance(value, str) for value in values):
            raise FactValidationError(f"{where}.marks[{n}]", raw, "expected a thread mark")
        marks.append(ThreadMark(*(str(value) for value in values)))
    dump = ScopeDump(
        agent=agent,
        facts=facts,
        usage=usage,
        events=tuple(listed("events")),
        archive=tuple(archive),
        marks=tuple(marks),
        regret=tuple(listed("regret")),
        shadow=dict(mapped("shadowMarks")),
    )
    check_storable(dump)
    return dump


def check_storable(dump: ScopeDump) -> None:
    """Refuse keys and times of a scope's records that one store could keep and the
    other could not, naming the field (``agents.<agent>.usage…``).

    The Markdown store keeps any text in a sidecar; PostgreSQL keeps usage and
    shadow-mark keys, a recall's time and an archive entry's time in ``text``
    columns, which cannot hold U+0000. A key is a fact id and a time is a
    timestamp, which rules that out: both stores take the same records —
    an import (``users import``) and a copy (``deermem migrate``) alike.

    Raises:
        FactValidationError: the field and what it takes.
    """
    where = f"agents.{dump.agent}"
    for fact_id, entry in dump.usage.items():
        _check_record_key(f"{where}.usage", fact_id)
        if parse_timestamp(entry.last_accessed_at) is None:
            raise FactValidationError(
                f"{where}.usage.{fact_id}.lastAccessedAt",
                entry.last_accessed_at,
                "expected an ISO 8601 timestamp string",
            )
    for fact_id in dump.shadow:
        _check_record_key(f"{where}.shadowMarks", fact_id)
    for n, archived in enumerate(dump.archive):
        if parse_timestamp(archived.archived_at) is None:
            raise FactValidationError(
                f"{where}.archive[{n}].archivedAt",
                archived.archived_at,
                "expected an ISO 8601 timestamp string",
            )


def _check_record_key(field: str, key: str) -> None:
    """Refuse a usage or shadow-mark key that is no fact id, describing it by its length:
    a key that is not an id may be any text, a pasted secret say (docs/privacy.md)."""
    if not is_fact_id(key):
        raise FactValidationError(field, key, "expected fact ids as its keys")


def _object(where: str, raw: object) -> Mapping[str, object]:
    if not isinstance(raw, Mapping):
        raise FactValidationError(where, raw, "expected an object")
    return raw
