"""A server's warm-up: what its first requests would wait for, loaded once it answers.

A new server process — ``deermem mcp``, each worker of ``deermem serve`` —
would otherwise make its first requests pay for what a process loads once:
the token vocabulary for the first prompt block (≈ 0.15 s) and, under search
by meaning, the embedding models for the first search (≈ 1.5 s). Until the
models are loaded, facts created are not embedded during their commit
either, so that first search would embed them too.

:class:`WarmUp` loads them (:meth:`deermem.Memory.warm` with ``models``) in
a thread of its own, started once the server answers rather than before:
start-up is as fast as without it, and a request that arrives meanwhile
waits at most for the load it would have started itself (each load happens
once per process, under its own lock). The thread is not a daemon: a
process that ends meanwhile lets the loads finish rather than stop a model
halfway through its C code; :meth:`WarmUp.join` waits for it before the
memory is closed.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deermem.memory import Memory

__all__ = ["WarmUp"]

_log = logging.getLogger("deermem.service.warmup")


class WarmUp:
    """The warm-up of one server process: started at most once, joined before closing."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start loading in a thread, unless it was started before (thread-safe)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="deermem-warm-up")
            self._thread.start()

    def join(self) -> None:
        """Wait for the loads to finish, if they were started."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            ready = self._memory.warm(models=True)
        except Exception as error:  # best effort: each request loads what it needs itself
            _log.warning("warm-up failed (%s: %s)", type(error).__name__, error)
            return
        elapsed = (time.perf_counter() - start) * 1000
        outcome = "what the first requests need is loaded" if ready else "not all of it (see above)"
        _log.info("warmed up in %.0f ms: %s", elapsed, outcome)
