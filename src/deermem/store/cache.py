"""The read cache: loaded scopes, valid while the user's ``memory.json`` is unchanged.

Every commit rewrites the user's ``memory.json`` with a new revision, through
a rename, so the file's signature — modification time, size, inode and the
revision inside — changes with every commit by any process. A cached scope is
served only while that signature is the one it was loaded at; checking costs
one small read, against a scan of every fact file for a cold load.

Edits to fact files made behind the store's back do not change the signature;
:meth:`deermem.store.MarkdownStore.reload` drops the cached scope.

The cache holds immutable snapshots, so handing them out needs no copy, and
keeps the most recently used scopes only (a server sees many users).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final, NamedTuple

from deermem.model import Scope
from deermem.store.protocol import ScopeSnapshot

__all__ = ["ABSENT", "ManifestToken", "ScopeCache"]


class ManifestToken(NamedTuple):
    """The signature of a user's ``memory.json`` (all zero when it does not exist)."""

    mtime_ns: int
    size: int
    inode: int
    revision: int

    def version(self) -> str:
        return f"{self.revision}:{self.mtime_ns}:{self.size}:{self.inode}"


ABSENT: Final = ManifestToken(0, 0, 0, 0)


class ScopeCache:
    """Thread-safe LRU of scope snapshots keyed by ``(user_id, agent)``."""

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str | None, str], tuple[object, ScopeSnapshot]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, scope: Scope, token: object) -> ScopeSnapshot | None:
        """The cached snapshot if it was loaded at ``token`` (any value that compares equal)."""
        key = (scope.user_id, scope.agent)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != token:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, scope: Scope, token: object, snapshot: ScopeSnapshot) -> None:
        key = (scope.user_id, scope.agent)
        with self._lock:
            self._entries[key] = (token, snapshot)
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def drop(self, scope: Scope) -> None:
        with self._lock:
            self._entries.pop((scope.user_id, scope.agent), None)

    def drop_user(self, user_id: str | None) -> None:
        with self._lock:
            for key in [key for key in self._entries if key[0] == user_id]:
                del self._entries[key]
