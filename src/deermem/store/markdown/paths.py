"""Where a scope's files live in the Markdown store.

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
read and written by :mod:`deermem.store.markdown.listing`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from deermem.model import agent_directory, safe_user_id

__all__ = [
    "AUDIT_FILENAME",
    "JOURNAL_FILENAME",
    "LOCK_FILENAME",
    "OWNER_FILENAME",
    "REGRET_EVENTS_FILENAME",
    "SEARCH_INDEX_FILENAME",
    "SHADOW_MARKS_FILENAME",
    "USAGE_FILENAME",
    "ScopePaths",
    "UserPaths",
    "fact_shard",
    "resolve_root",
    "search_index_path",
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
