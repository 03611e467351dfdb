"""Benchmark: two versions of deermem's store, interleaved operation by operation.

Run with ``uv run python -m bench.compare_store --before /path/to/other/src``
(``--after`` defaults to this checkout's ``src``). Two worker processes
import deermem from the two source trees; the driver asks them for one timed
operation at a time, alternating (ABBA), so both see the same machine: this
VM's CPU switches between two speeds every few seconds and its disk is shared,
which makes separate runs incomparable. Reported per case: both medians, their
ratio (after / before) and in how many pairs ``after`` was faster. ``--also``
adds further trees to the same rounds (the order reversed every round), each
reported by its median and its ratio to ``before``.

Cases (``--cases``, each ``name:fs:pairs``, fs ``disk``, ``tmpfs`` or ``postgres`` — a
throwaway PostgreSQL server per worker, :class:`~deermem.testing.postgres.TemporaryPostgres`,
a database per case; the cases through ``deermem.Memory`` only):

* ``load`` — a cold load of a 100-fact scope (a fresh store each time);
* ``commit`` — a durable single-fact commit into a cached 100-fact scope;
  ``commit-unredacted`` — the same with secret redaction turned off (a tree
  from before issue 26 has none to turn off): what the redaction costs;
* ``update`` — the update apply path of :mod:`bench.bench_update` (fresh copy
  of its scope each time, flushed before timing);
* ``create`` / ``hybrid`` / ``shadow`` — ``Memory.create_fact`` at a cap of
  100 (an eviction, an archive entry, a receipt), under ``confidence``, under
  ``hybrid-v1`` with recall counts (their sidecar changes too), or under
  ``confidence`` in shadow mode;
* ``open`` — ``Memory.open`` and a cold ``list_facts`` of a 100-fact scope;
* ``context`` / ``search`` — ``Memory.context()`` and ``Memory.search`` of two
  words on that scope (one memory, warm);
* ``turn`` — an agent's turn after it learned a fact: a create (untimed; at the
  cap, so the archive grows), then, timed, the prompt built for a question
  (``Memory.context(query=…)``) and the search the model asks for with it;
* ``prompt`` — ``Memory.context(query=…)`` of a 20-fact scope, where every fact
  fits the budget (a new user's memory);
* ``archived`` — ``create`` in a memory that searches (so its search index
  follows each commit, the archive's rows included) and whose archive is full:
  1,000 entries, the default bound, so each create archives one and drops one;
* ``facts`` — the whole command ``deermem facts list`` on it, start-up included;
* ``learn`` — ``Memory.learn`` of a new two-message conversation on it: the
  model (a scripted OpenAI-compatible server on 127.0.0.1, in the worker)
  answers two new facts, so each learn admits them at the cap (evictions,
  receipts) in one commit;
* ``recall`` — the search an agent makes on its next turn after ``learn`` (the
  learn untimed): what the first search after an update learned from a
  conversation waits for;
* ``turn-meaning``, ``recall-meaning`` — ``turn`` and ``recall`` under search by
  meaning, the default (needs the ``embed`` extra): the seeded facts are
  embedded (``Memory.reindex``), the models loaded by a search, and 300 other
  texts embedded so that the seeded ones are only in the index, as in a
  long-running agent. Keep ``recall-meaning`` to 40 pairs: from its 41st
  round the new facts tie with one another and one is evicted as it arrives,
  a fact no version has a vector for;
* ``floor`` — no deermem at all: the commit protocol's four dependent flush
  rounds (a journal's content, its name, a file's name, the journal's removal),
  one fsync each, on the same file system: what a commit cannot go below.

Every case but ``load``, the commits and ``update`` uses only the public API
(``deermem.Memory``), so it compares any two versions; those three build their
fixtures with the store's internals, through this checkout's ``bench`` modules.

The fixtures live on ``--dir`` (disk) and ``/dev/shm`` (tmpfs) and persist
across one case, so ``create``'s audit and archive grow as it runs.

``--clock cpu`` times the CPU each operation costs instead of its wall time:
the worker process's user and system time (``time.process_time``, its flush
threads included; not a child process's, so not for ``facts``) — on tmpfs,
where a flush waits for no device, what a commit costs beyond the floor.

``--clock phases`` splits each operation's wall time at its flush rounds
(:func:`bench._fsyncs.flush_phases`): the time before the first round, each
round, the time between rounds and after the last, each tree's median per
phase — where two versions of a commit on a disk differ: in the flushes, or
in the work between them.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._fsyncs import flush_phases, time_fsyncs
from bench._timing import LineWorker

if TYPE_CHECKING:
    from deermem.testing.postgres import TemporaryPostgres

DEFAULT_CASES = (
    "load:tmpfs:300,load:disk:300,commit:disk:300,commit:tmpfs:300,update:disk:100,"
    "update:tmpfs:100,create:disk:200,create:tmpfs:200,hybrid:disk:200,hybrid:tmpfs:200"
)


class Fixtures:
    """One timed operation per call, on fixtures made on first use (worker side)."""

    def __init__(self, disk: Path) -> None:
        self._bases = {
            "disk": Path(tempfile.mkdtemp(dir=disk)),
            "tmpfs": Path(tempfile.mkdtemp(dir="/dev/shm")),
        }
        self._made: dict[tuple[str, str], Callable[[int], float]] = {}
        self._count = 0
        self._server: TemporaryPostgres | None = None

    def close(self) -> None:
        for base in self._bases.values():
            shutil.rmtree(base, ignore_errors=True)
        if self._server is not None:
            self._server.stop()

    def run(self, case: str, fs: str) -> float:
        operation = self._made.get((case, fs))
        if operation is None:
            root = self._bases["tmpfs" if fs == "postgres" else fs] / f"{case}-{fs}"
            root.mkdir()
            if fs == "postgres":
                if self._server is None:
                    from deermem.testing.postgres import TemporaryPostgres

                    self._server = TemporaryPostgres()
                url = self._server.create_database("case_" + case.replace("-", "_"), migrated=True)
                operation = _public(case, root, store=url)
                _analyse(url)
            else:
                operation = _make(case, root)
            self._made[(case, fs)] = operation
            os.sync()  # the setup's writes must not compete with the measured fsyncs
        self._count += 1
        return operation(self._count)


def _analyse(url: str) -> None:
    """Give the planner the seeded tables' statistics, as autovacuum gives a database in
    use (a table it has never analysed looks nearly empty to the planner)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ANALYZE")


def _make(case: str, root: Path) -> Callable[[int], float]:
    if case == "floor":
        return lambda _: _timed(partial(_four_rounds, root))
    if case in (
        "open",
        "context",
        "search",
        "turn",
        "prompt",
        "archived",
        "facts",
        "create",
        "hybrid",
        "shadow",
        "learn",
        "recall",
        "turn-meaning",
        "recall-meaning",
    ):
        return _public(case, root)
    from deermem.store import ChangeSet, FactWrite, MarkdownStore

    if case in ("load", "commit", "commit-unredacted"):
        scope, make_fact, now = _store_fixture(root, 100)
    if case == "load":
        return lambda _: _timed(lambda: MarkdownStore(root).load(scope))
    if case in ("commit", "commit-unredacted"):
        redacting = "redact_secrets" in inspect.signature(MarkdownStore).parameters
        if case == "commit-unredacted" and redacting:
            store = MarkdownStore(root, redact_secrets=False)
        else:
            store = MarkdownStore(root)
        store.load(scope)

        def commit(number: int) -> float:
            write = FactWrite(make_fact(number, "new"), create=True)
            changes = ChangeSet(now=now, writes=(write,))
            return _timed(lambda: store.commit(scope, changes))

        return commit
    from bench import bench_update

    if case == "update":
        bench_update.build_store(root / "template", bench_update.library())
        text = bench_update.answer()

        def update(number: int) -> float:
            work = root / f"run-{number}"
            shutil.copytree(root / "template", work)
            store = MarkdownStore(work)
            store.load(bench_update.SCOPE)
            os.sync()
            elapsed = _timed(lambda: bench_update.apply_once(store, text))
            shutil.rmtree(work)
            return elapsed

        return update
    raise SystemExit(f"unknown case {case!r}")


def _four_rounds(directory: Path) -> None:
    """Four flushes, each waiting for the one before, as a journaled commit's steps do."""

    def flush(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    journal, temporary = directory / "journal", directory / "journal.tmp"
    temporary.write_bytes(b"{}")
    flush(temporary)  # the journal's content
    temporary.replace(journal)
    flush(directory)  # its name
    (directory / "file.tmp").write_bytes(b"data")
    (directory / "file.tmp").replace(directory / "file")
    flush(directory)  # the file's name (its content is left to the page cache)
    journal.unlink()
    flush(directory)  # the journal's removal


_NOW = datetime(2026, 8, 13, tzinfo=UTC)
_CATEGORIES = ("preference", "correction", "context", "goal", "behavior", "identity")


def _store_fixture(root: Path, size: int) -> tuple[Any, Callable[[int, str], Any], Any]:
    """A scope of ``size`` facts, committed through the store contract both trees share
    (``MarkdownStore.commit`` of one change set), so ``load`` and ``commit`` compare
    the tree of issue 11 too; ``Scope`` moved to ``deermem.model`` in issue 21."""
    from deermem.store import ChangeSet, FactWrite, MarkdownStore

    try:
        from deermem.model import Scope
    except ImportError:
        from deermem.store import Scope  # type: ignore[attr-defined,no-redef,unused-ignore]
    scope = Scope.of("bench-user", "bench-agent")
    writes = tuple(FactWrite(_make_fact(n, "fact"), create=True) for n in range(size))
    MarkdownStore(root).commit(scope, ChangeSet(now=_NOW, writes=writes))
    return scope, _make_fact, _NOW


def _make_fact(number: int, prefix: str) -> Any:
    """bench_store's fact, built here because bench_store imports this tree's internals."""

    from deermem import Fact

    return Fact.from_dict(
        {
            "id": f"{prefix}_{number:08x}",
            "content": f"The user prefers option {number} when choosing between similar tools.",
            "category": _CATEGORIES[number % len(_CATEGORIES)],
            "confidence": round(0.5 + (number % 50) / 100, 2),
            "source": "thread-1",
            "topics": ["tools"],
            "createdAt": _NOW - timedelta(minutes=number),
        }
    )


_USER, _AGENT = "bench", "coder"
_TOPICS = ("python", "rust", "travel", "music", "cooking", "running", "chess", "gardening")


def _public(case: str, root: Path, store: str = "") -> Callable[[int], float]:
    """The cases every version can run: fixtures and operations through ``Memory`` only
    (on the PostgreSQL database ``store`` names, if given, else the Markdown store at ``root``).
    """

    from deermem import Memory, MemoryConfig

    meaning = case.endswith("-meaning")
    case = case.removesuffix("-meaning")
    # Search by keyword in every version but the -meaning cases: a tree from before search by
    # meaning has no other mode, and this bench compares the store's paths, not the embedding
    # models (bench_recall).
    keyword = {"search_mode": "keyword"} if "search_mode" in MemoryConfig.model_fields else {}
    if meaning:
        keyword = {}  # the default: search by meaning
    model: dict[str, object] = {}
    if case in ("learn", "recall"):
        from deermem.testing import ScriptedChatServer

        server = ScriptedChatServer().start()  # lives as long as the worker
        model = {"model": {"model": "scripted", "base_url": server.url, "api_key_env": None}}
    config = MemoryConfig(
        max_facts=100,
        fact_eviction_policy="hybrid-v1" if case == "hybrid" else "confidence",
        fact_eviction_shadow_enabled=case == "shadow",
        **keyword,
        **model,
        **({"store": store} if store else {}),
    )
    clock = lambda: datetime(2026, 1, 1, tzinfo=UTC)  # noqa: E731

    def memory() -> Memory:
        return Memory.open(None if store else root, config, user=_USER, agent=_AGENT, clock=clock)

    seeding = memory()
    for n in range(20 if case == "prompt" else 100):
        topic = _TOPICS[n % len(_TOPICS)]
        seeding.create_fact(
            f"Fact {n}: the user has an opinion about {topic} number {n}",
            category="correction" if n % 10 == 0 else "preference",
            confidence=0.5 + (n % 5) / 10,
        )
    if case == "archived":  # each evicts one: the archive fills to its bound
        for n in range(1000):
            seeding.create_fact(f"An older fact number {n}.", confidence=0.95)
    seeding.close()
    if case == "open":
        return lambda _: _timed(lambda: memory().list_facts())
    if case == "facts":
        if store:
            raise SystemExit("compare_store: the facts case runs on a Markdown store only")
        import deermem

        environment = dict(os.environ, PYTHONPATH=str(Path(deermem.__file__).parents[1]))
        command = [sys.executable, "-m", "deermem", "--root", str(root), "--user", _USER]
        command += ["--agent", _AGENT, "facts", "list"]
        run = partial(subprocess.run, command, env=environment, check=True, capture_output=True)
        return lambda _: _timed(run)
    warm = memory()
    warm.list_facts()
    if meaning:
        from deermem.recall.embedding import embedder

        warm.reindex()  # the seeded facts' vectors, as `deermem reindex` gives them
        warm.search("number")  # loads the models
        models = embedder()
        assert models is not None
        for n in range(300):  # ... and pushes the seeded texts out of their recent memory,
            models.passage(f"An unrelated text number {n}.")  # as in a long-running agent
    if case == "archived":
        warm.search("fact number")  # opens the search index, which then follows each commit
    if case in ("create", "hybrid", "shadow", "archived"):
        if case == "hybrid":
            warm.record_access([fact.id for fact in warm.list_facts()])

        def create(number: int) -> float:
            if case == "hybrid":
                warm.record_access([fact.id for fact in warm.list_facts()[-3:]])
            text = f"A new fact number {number}."
            return _timed(lambda: warm.create_fact(text, confidence=0.99))

        return create
    if case == "context":
        return lambda _: _timed(warm.context)
    if case == "turn":

        def turn(number: int) -> float:
            warm.create_fact(f"A new fact number {number} about {_TOPICS[number % 8]}.")
            query = f"{_TOPICS[number % len(_TOPICS)]} number {number}"
            return _timed(lambda: (warm.context(query=query), warm.search(query)))

        return turn
    if case == "prompt":
        return lambda n: _timed(lambda: warm.context(query=f"{_TOPICS[n % 8]} number {n % 20}"))
    if case in ("learn", "recall"):

        def learn(number: int) -> float:
            new = [
                {
                    "content": f"The user now prefers option {number}{part}.",
                    "category": "preference",
                    "confidence": 0.9,
                    # What the scope gate asks of a fact it keeps (docs/update.md).
                    "scope": "user",
                    "durability": "durable",
                    "authority": "descriptive",
                }
                for part in ("a", "b")
            ]
            server.enqueue(json.dumps({"user": {}, "history": {}, "newFacts": new}))
            said = f"I switched to option {number} for my projects."
            talk = [{"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}]
            if case == "learn":
                return _timed(lambda: warm.learn(f"thread-{number}", talk))
            warm.learn(f"thread-{number}", talk)
            return _timed(lambda: warm.search(f"option {number}"))

        if case == "recall":
            warm.search("option")  # opens the search index, as an agent's
        return learn
    return lambda n: _timed(lambda: warm.search(f"{_TOPICS[n % len(_TOPICS)]} number"))


# The clock _timed reads: wall time, or the worker's CPU time (--clock cpu).
_clock: Callable[[], float] = time.perf_counter
# The start and end, on that clock, of the operation _timed timed last.
_span = (0.0, 0.0)


def _timed(operation: Callable[[], object]) -> float:
    global _span
    started = _clock()
    operation()
    _span = (started, _clock())
    return (_span[1] - started) * 1000


def serve(disk: Path, clock: str = "wall") -> None:
    """Worker: read ``case fs`` lines, answer each with one timing in ms
    (``phases``: the wall time split at the flush rounds, by phase)."""
    global _clock
    import deermem

    _clock = time.process_time if clock == "cpu" else time.perf_counter
    spans: list[tuple[float, float]] = []
    if clock == "phases":
        time_fsyncs(spans)

    print(json.dumps(deermem.__file__), flush=True)
    fixtures = Fixtures(disk)
    try:
        for line in sys.stdin:
            case, fs = line.split()
            spans.clear()
            elapsed = fixtures.run(case, fs)
            answer = flush_phases(*_span, spans) if clock == "phases" else elapsed
            print(json.dumps(answer), flush=True)
    finally:
        fixtures.close()


class Worker(LineWorker):
    """One tree's side of the comparison (``serve`` in a process of its own)."""

    def __init__(self, source: Path, disk: Path, clock: str = "wall") -> None:
        command = [sys.executable, "-m", "bench.compare_store", "--serve", "--dir", str(disk)]
        super().__init__([*command, "--clock", clock], source=source)
        self.imported = json.loads(self.first)

    def time(self, case: str, fs: str) -> float:
        return float(self.ask(f"{case} {fs}"))

    def phases(self, case: str, fs: str) -> dict[str, float]:
        """One operation's wall time by phase (a worker of ``--clock phases``)."""
        answer: dict[str, float] = self.ask(f"{case} {fs}")
        return answer


def compare(
    before: Worker, after: Worker, case: str, fs: str, pairs: int, others: tuple[Worker, ...] = ()
) -> dict[str, object]:
    """Time ``case`` on each tree in turn, the order reversed every round (ABC, CBA)."""
    workers = (before, after, *others)
    for worker in workers:  # the fixture, and one warm-up
        worker.time(case, fs)
        worker.time(case, fs)
    samples: list[list[float]] = [[] for _ in workers]
    for number in range(pairs):
        order = list(zip(workers, samples, strict=True))
        for worker, taken in order if number % 2 == 0 else reversed(order):
            taken.append(worker.time(case, fs))
    first, second = samples[0], samples[1]
    median_before, median_after = statistics.median(first), statistics.median(second)
    row: dict[str, object] = {
        "case": case,
        "fs": fs,
        "before_ms": round(median_before, 3),
        "after_ms": round(median_after, 3),
        "ratio": round(median_after / median_before, 3),
        "after_faster_pairs": sum(b < a for a, b in zip(first, second, strict=True)),
        "pairs": pairs,
    }
    for number, taken in enumerate(samples[2:], start=1):  # each against ``before`` too
        row[f"also{number}_ms"] = round(statistics.median(taken), 3)
        row[f"also{number}_ratio"] = round(statistics.median(taken) / median_before, 3)
    return row


def compare_phases(
    workers: tuple[Worker, ...], case: str, fs: str, pairs: int
) -> dict[str, object]:
    """Time ``case`` on each tree in turn (ABC, CBA), split at the flush rounds.

    Each phase: every tree's median and the second's difference from the
    first. A phase some operations lack (a commit with fewer rounds) has its
    median over those that have it (``null``: none has it); ``rounds`` says
    how many rounds each tree made most often.
    """
    for worker in workers:  # the fixture, and one warm-up
        worker.phases(case, fs)
        worker.phases(case, fs)
    samples: list[list[dict[str, float]]] = [[] for _ in workers]
    for number in range(pairs):
        order = list(zip(workers, samples, strict=True))
        for worker, taken in order if number % 2 == 0 else reversed(order):
            taken.append(worker.phases(case, fs))
    names = list(dict.fromkeys(name for taken in samples for sample in taken for name in sample))
    phases: dict[str, list[float | None]] = {}
    for name in sorted(names, key=lambda name: name == "total"):  # total last
        values = [[s[name] for s in taken if name in s] for taken in samples]
        medians = [round(statistics.median(v), 3) if v else None for v in values]
        first, second = medians[:2]
        difference = None if first is None or second is None else round(second - first, 3)
        phases[name] = [*medians, difference]
    rounds = [
        statistics.mode(sum(name.startswith("flush") for name in s) for s in taken)
        for taken in samples
    ]
    return {"case": case, "fs": fs, "pairs": pairs, "rounds": rounds, "phases": phases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="the other tree's src directory")
    parser.add_argument("--after", type=Path, default=Path(__file__).parents[1] / "src")
    parser.add_argument(
        "--also",
        type=Path,
        action="append",
        default=[],
        help="a further tree's src directory, timed in the same rounds (repeatable)",
    )
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="file system for 'disk'")
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu", "phases"),
        default="wall",
        help="what each timing measures (phases: wall time split at the flush rounds)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.dir, args.clock)
        return
    if args.before is None:
        parser.error("--before is required")
    before = Worker(args.before, args.dir, args.clock)
    after = Worker(args.after, args.dir, args.clock)
    others = tuple(Worker(source, args.dir, args.clock) for source in args.also)
    print(f"clock: {args.clock}\nbefore: {before.imported}\nafter:  {after.imported}", flush=True)
    for number, other in enumerate(others, start=1):
        print(f"also{number}:  {other.imported}", flush=True)
    try:
        for item in args.cases.split(","):
            case, fs, pairs = item.split(":")
            if args.clock == "phases":
                row = compare_phases((before, after, *others), case, fs, int(pairs))
            else:
                row = compare(before, after, case, fs, int(pairs), others)
            print(json.dumps(row), flush=True)
    finally:
        for worker in (before, after, *others):
            worker.close()


if __name__ == "__main__":
    main()
