"""Turning a change set into what a commit changes, and into the exact files it writes.

:func:`plan_changes` is the part every store shares (it knows no paths):
preconditions (fact revisions, "must not exist", archive entries that must
exist) are checked under the lock before anything is written, a fact write
that changes nothing is dropped, and the user's next summary document is
laid out. The document (and with it the user's revision) changes with every
commit that changes a fact, an archive entry or a summary.

:func:`plan_commit` adds the Markdown store's files. Only what the change
set addresses is touched — read, checked and written: a commit that adds one
fact writes that fact's file and the user's ``memory.json``, whatever the
size of the library, and reads no other fact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from deermem.errors import (
    FactNotFoundError,
    FactRevisionConflict,
    ManifestRevisionConflict,
)
from deermem.model import Fact, Scope, format_timestamp
from deermem.store.archive import encode_entry
from deermem.store.markdown.codec import encode_fact, encode_summaries, stored_scope
from deermem.store.markdown.journal import FileChange
from deermem.store.markdown.paths import ScopePaths
from deermem.store.protocol import (
    DOCUMENT_VERSION,
    SUMMARY_GROUPS,
    ChangeSet,
    Section,
    SummaryDocument,
)

__all__ = ["ChangePlan", "CommitPlan", "plan_changes", "plan_commit"]

# Fields whose change alone does not make a new fact revision.
_BOOKKEEPING = ("revision", "updatedAt")


@dataclass
class ChangePlan:
    """What a commit changes, whatever the store.

    Attributes:
        summaries: the user's document after the commit (the current one
            when nothing changes).
        changed: whether the commit changes anything; only then is the
            document (and the user's revision) written.
        written: the facts as they will be stored (final revisions).
        replaced: for each written fact, the stored version it replaces (if any).
        deleted: the stored facts that go.
    """

    summaries: SummaryDocument
    changed: bool = False
    written: list[Fact] = field(default_factory=list)
    replaced: dict[str, Fact] = field(default_factory=dict)
    deleted: list[Fact] = field(default_factory=list)


@dataclass
class CommitPlan:
    """The files to write, and the facts and summaries they change.

    Attributes:
        files: the fact files and archive entries to write or remove.
        manifest: the user's new ``memory.json``, when anything above or a summary changes.
        replaced: for each written fact, the stored version it replaces (if any).
    """

    summaries: SummaryDocument
    files: list[FileChange] = field(default_factory=list)
    manifest: FileChange | None = None
    written: list[Fact] = field(default_factory=list)
    replaced: dict[str, Fact] = field(default_factory=dict)
    deleted: list[Fact] = field(default_factory=list)


def plan_changes(
    lookup: Callable[[str], Fact | None],
    current: SummaryDocument,
    changes: ChangeSet,
    scope: Scope,
    archive_exists: Callable[[str], bool],
) -> ChangePlan:
    """Check preconditions and work out what a commit changes.

    Raises:
        ManifestRevisionConflict: ``expected_revision`` is not the current one.
        FactRevisionConflict: a written or deleted fact is not at the expected revision.
        FactNotFoundError: a deleted fact or archive entry does not exist.
        ValueError: the change set addresses one fact twice, or an unknown summary section.
    """
    if changes.expected_revision is not None and changes.expected_revision != current.revision:
        raise ManifestRevisionConflict(expected=changes.expected_revision, actual=current.revision)
    _check_distinct(changes)
    stamp = format_timestamp(changes.now)
    plan = ChangePlan(summaries=current)
    for write in changes.writes:
        stored = lookup(write.fact.id)
        fact = _planned_write(stored, write.fact, write.create, stamp, scope)
        if fact is None:
            continue
        if stored is not None:
            plan.replaced[fact.id] = stored
        plan.written.append(fact)
    for delete in changes.deletes:
        stored = lookup(delete.fact_id)
        if stored is None:
            raise FactNotFoundError(delete.fact_id)
        if delete.expected_revision is not None and delete.expected_revision != stored.revision:
            raise FactRevisionConflict(
                delete.fact_id, expected=delete.expected_revision, actual=stored.revision
            )
        plan.deleted.append(stored)
    for fact_id in changes.archive_deletes:
        if not archive_exists(fact_id):
            raise FactNotFoundError(fact_id, where="archive")
    sections = _changed_sections(current, changes, stamp)
    plan.changed = bool(
        plan.written or plan.deleted or changes.archive_deletes or changes.archive_puts or sections
    )
    if plan.changed:
        plan.summaries = SummaryDocument(
            version=DOCUMENT_VERSION,
            revision=current.revision + 1,
            lastUpdated=stamp,
            user={**current.user, **sections.get("user", {})},
            history={**current.history, **sections.get("history", {})},
        )
    return plan


def plan_commit(
    lookup: Callable[[str], Fact | None],
    current: SummaryDocument,
    changes: ChangeSet,
    paths: ScopePaths,
    scope: Scope,
    archive_exists: Callable[[str], bool],
) -> CommitPlan:
    """Check preconditions and lay out the files of a commit (see :func:`plan_changes`).

    Raises:
        ManifestRevisionConflict: ``expected_revision`` is not the current one.
        FactRevisionConflict: a written or deleted fact is not at the expected revision.
        FactNotFoundError: a deleted fact or archive entry does not exist.
        ValueError: the change set addresses one fact twice, or an unknown summary section.
    """
    changed = plan_changes(lookup, current, changes, scope, archive_exists)
    plan = CommitPlan(
        summaries=changed.summaries,
        written=changed.written,
        replaced=changed.replaced,
        deleted=changed.deleted,
    )
    for fact in changed.written:
        plan.files.append(FileChange(paths.fact(fact.id), encode_fact(fact, scope)))
    for stored in changed.deleted:
        plan.files.append(FileChange(paths.fact(stored.id), None))
    for fact_id in changes.archive_deletes:
        plan.files.append(FileChange(paths.archived(fact_id), None))
    for entry in changes.archive_puts:
        plan.files.append(FileChange(paths.archived(entry.fact_id), encode_entry(entry)))
    if changed.changed:
        plan.manifest = FileChange(paths.user.manifest, encode_summaries(plan.summaries))
    return plan


def _planned_write(
    stored: Fact | None, fact: Fact, create: bool, stamp: str, scope: Scope
) -> Fact | None:
    """The fact as it will be stored, or ``None`` if nothing changes."""
    candidate = stored_scope(fact, scope)
    if create:
        if stored is not None:
            raise FactRevisionConflict(fact.id, expected=None, actual=stored.revision)
        return candidate
    if stored is None:
        raise FactRevisionConflict(fact.id, expected=fact.revision, actual=None)
    if fact.revision != stored.revision:
        raise FactRevisionConflict(fact.id, expected=fact.revision, actual=stored.revision)
    if _same_content(candidate, stored):
        return None
    return candidate.replace(revision=stored.revision + 1, updatedAt=stamp)


def _same_content(left: Fact, right: Fact) -> bool:
    a, b = left.to_dict(), right.to_dict()
    for key in _BOOKKEEPING:
        a.pop(key, None)
        b.pop(key, None)
    return a == b


def _check_distinct(changes: ChangeSet) -> None:
    seen: set[str] = set()
    for fact_id in [w.fact.id for w in changes.writes] + [d.fact_id for d in changes.deletes]:
        if fact_id in seen:
            raise ValueError(f"the change set addresses fact {fact_id!r} more than once")
        seen.add(fact_id)
    archived = [e.fact_id for e in changes.archive_puts] + list(changes.archive_deletes)
    if len(set(archived)) != len(archived):
        raise ValueError("the change set addresses one archive entry more than once")


def _changed_sections(
    current: SummaryDocument, changes: ChangeSet, stamp: str
) -> dict[str, dict[str, Section]]:
    sections: dict[str, dict[str, Section]] = {}
    for (group, name), value in changes.summaries.items():
        if group not in SUMMARY_GROUPS or name not in SUMMARY_GROUPS[group]:
            raise ValueError(f"unknown summary section {group}.{name}")
        before = current.section((group, name))
        if isinstance(value, Section):
            if value == before:
                continue
            section = value
        else:
            if before.summary == value:
                continue
            section = Section(summary=value, updatedAt=stamp)
        sections.setdefault(group, {})[name] = section
    return sections
