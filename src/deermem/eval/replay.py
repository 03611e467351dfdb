"""``deermem eval replay``: two capacity policies on months of seeded synthetic traffic.

The static evaluation asks which facts survive one decision at a cap; the
replay asks what a deployment lives with — whether the facts a user needs are
still there when they are needed, and how much regret each policy leaves
behind.

**The parameters** are a documented YAML file (``replay-params.yaml`` beside
this module by default; ``--params FILE`` reads another with the same
schema). Every key is required and every value checked — a range must be
``[low, high]`` with ``low ≤ high``, shares must sum to 1 — so a typo stops the
run with an error naming the file, the key and the value, before any traffic is
generated. The file's SHA-256 goes into the results.

**The workload.** :func:`generate` turns the parameters and a seed into what
users say and do over simulated months — and, hidden from the memory, which
facts will be needed again and when. Pure: the same parameters and seed give
the same workload on every machine (:class:`random.Random`, seeded per user;
no clock, no I/O). Per user, sessions fall at random times within ``days``. In
each session, in this order:

1. **corrections** that are due: the user corrects a fact; the replacement
   (a new fact of the same category) inherits the needs still ahead of it;
2. **needs** that are due: the fact is needed now. The user may search for
   it (``search_on_need``), confirm it (``confirm_on_need``), state it again
   (``restate_on_need``), restore it from the archive should the library
   lack it (``restore_on_miss``) — or do nothing visible at all;
3. **noise**: a search for, or a confirmation of, a fact that will never be
   needed (``false_search``, ``false_confirmation``);
4. **new facts** — a few ordinary ones, each of a category drawn by share
   with its confidence and its future needs drawn from the category, and
   sometimes a **burst** of ``context`` facts never needed again.

Facts are made of invented words, so a search for two of a fact's words
finds that fact, and no content says anything about anyone.

**The driver.** For every seed, policy and cap, the seed's workload is
replayed session by session, in time order, through a :class:`~deermem.Memory`
on a Markdown store of its own, with the session's time as the clock:
**needs** are checked first (a needed fact counts as *retained* when it is in
its user's library as the session starts — the moment the agent would have
put it in the prompt); **searches** go through :meth:`Memory.search` (FTS5,
recall counts, missed recalls), and a needed fact the library lacks may be
restored (:meth:`Memory.restore`, through the gate); what the user **said** —
new and restated facts, confirmations, corrections — reaches the memory as an
extraction result through the apply path ``Memory.learn`` uses (in a store
transaction, through the capacity gate), with the reinforcement signal when
the user confirmed something. The model call itself is left out: the prompt,
the HTTP round trip and the JSON parsing are tested on their own and change
nothing the gate sees, and going through them would double the replay's time
(docs/regret.md has the figures). ``confidence`` runs in shadow mode, so each
of its cells also says what regret ``hybrid-v1`` would have had beside it. At
the end each user's :meth:`Memory.regret` report is read and summed.

**The results.** :func:`summarize` turns the cells into one JSON document
(``deermem.replay/1``): per cap and policy the needed-fact retention at the
time of need, the evictions and regret events by kind (and, beside
``confidence``, what shadow mode said of ``hybrid-v1``); per cap the paired
difference ``hybrid-v1 − confidence`` with its bootstrap interval over seeds;
and how those intervals narrow as seeds — traffic — accumulate. Each seed is
one independent workload replayed under both policies, so the results pair up
by seed and the bootstrap resamples whole seeds (the facts of one workload
share a library and are not independent). Keys are sorted and floats written
as Python writes them, and nothing about the run itself (time, paths,
machine) goes in, so the same parameters give the same bytes everywhere.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    computed_field,
    field_validator,
    model_validator,
)

from deermem.config import MemoryConfig
from deermem.errors import FactNotFoundError
from deermem.eval import POLICY_COLOURS, figure_png, missing_chart_module
from deermem.eval.errors import ProtocolError
from deermem.eval.files import ensure_new_set, write_new_files
from deermem.eval.protocol import parse_yaml
from deermem.learning.answer import MAX_NEW_FACTS, NormalizedResponse, normalize_response
from deermem.learning.learner import apply_response
from deermem.learning.plan import REINFORCEMENT_SIGNAL, UpdateSettings
from deermem.library.regret import PolicyRegret
from deermem.memory import Memory
from deermem.policy import POLICIES, POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.store.markdown.files import read_regular_file
from deermem.store.records import REGRET_KINDS

# TYPE_CHECKING
if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "REPLAY_FILES",
    "CellRun",
    "encode_results",
    "ensure_new_results",
    "load_params",
    "render_markdown",
    "replay_all",
    "scratch_directory",
    "summarize",
    "write_results",
]


# --- the parameters -------------------------------------------------------------------------------

BUNDLED_PARAMS: Final = "replay-params.yaml"

Share = Annotated[float, Field(ge=0.0, le=1.0)]
Days = Annotated[float, Field(ge=0.0, le=3650.0)]


def _ordered(pair: tuple[float, float]) -> tuple[float, float]:
    if pair[0] > pair[1]:
        raise ValueError("a range is [low, high] with low <= high")
    return pair


class _Strict(BaseModel):
    # strict: a YAML `yes` is no count, "25" no cap, 1.0 no whole number (an int is a
    # float, as in the protocol bundle); YAML lists reach the ranges as tuples (_as_tuples).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class CategorySpec(_Strict):
    """One kind of fact (see ``replay-params.yaml`` for each key)."""

    share: Share
    confidence: tuple[Share, Share]
    need_probability: Share
    needs: tuple[Annotated[int, Field(ge=1, le=100)], Annotated[int, Field(ge=1, le=100)]]
    need_delay_days: tuple[Days, Days]

    _ranges = field_validator("confidence", "needs", "need_delay_days")(_ordered)


class Signals(_Strict):
    """What comes with a need, and the noise (chances per need or per session)."""

    search_on_need: Share
    confirm_on_need: Share
    restate_on_need: Share
    restore_on_miss: Share
    false_search: Share
    false_confirmation: Share


class Corrections(_Strict):
    """Facts the user corrects later."""

    probability: Share
    delay_days: tuple[Days, Days]

    _ranges = field_validator("delay_days")(_ordered)


class Bursts(_Strict):
    """Sessions that state many facts at once, none needed again."""

    probability: Share
    size: tuple[Annotated[int, Field(ge=1, le=1000)], Annotated[int, Field(ge=1, le=1000)]]
    confidence: tuple[Share, Share]

    _ranges = field_validator("size", "confidence")(_ordered)


class Bootstrap(_Strict):
    """The paired bootstrap over seeds."""

    iterations: Annotated[int, Field(ge=100, le=1_000_000)]
    confidence: Annotated[float, Field(gt=0.5, lt=1.0)]
    seed: int


class Quick(_Strict):
    """What ``--quick`` replaces."""

    seeds: Annotated[int, Field(ge=1, le=1000)]
    users: Annotated[int, Field(ge=1, le=100)]
    days: Annotated[int, Field(ge=1, le=3650)]


class ReplayParams(_Strict):
    """Everything the replay's workload and comparison depend on (see ``replay-params.yaml``)."""

    version: Literal[1]
    seeds: Annotated[int, Field(ge=1, le=1000)]
    users: Annotated[int, Field(ge=1, le=100)]
    days: Annotated[int, Field(ge=1, le=3650)]
    sessions_per_week: Annotated[float, Field(gt=0.0, le=100.0)]
    facts_per_session: tuple[
        Annotated[int, Field(ge=0, le=100)], Annotated[int, Field(ge=0, le=100)]
    ]
    categories: dict[str, CategorySpec] = Field(min_length=1)
    signals: Signals
    corrections: Corrections
    bursts: Bursts
    caps: tuple[Annotated[int, Field(ge=10, le=500)], ...] = Field(min_length=1)
    search_top_k: Annotated[int, Field(ge=1, le=50)]
    bootstrap: Bootstrap
    quick: Quick

    _ranges = field_validator("facts_per_session")(_ordered)

    @model_validator(mode="after")
    def _consistent(self) -> ReplayParams:
        total = sum(spec.share for spec in self.categories.values())
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"the categories' shares must sum to 1, got {total!r}")
        if len(set(self.caps)) != len(self.caps):
            raise ValueError(f"each cap once, got {list(self.caps)}")
        return self

    def quickened(self) -> ReplayParams:
        """These parameters with ``quick``'s seeds, users and days."""
        return self.model_copy(update=self.quick.model_dump())


@dataclass(frozen=True, slots=True)
class LoadedParams:
    """Parameters and where they came from.

    Attributes:
        params: the validated parameters.
        source: the file as given, or ``"bundled"``.
        sha256: the SHA-256 of the file's bytes.
    """

    params: ReplayParams
    source: str
    sha256: str


def load_params(path: Path | None = None) -> LoadedParams:
    """Read and validate a parameters file (``None``: the bundled one).

    Raises:
        ProtocolError: the file is missing, not YAML, or breaks the schema;
            the message names the file, the key and the value.
    """
    if path is None:
        data = resources.files(__package__).joinpath(BUNDLED_PARAMS).read_bytes()
        source = "bundled"
    else:
        source = str(path)
        try:
            data = read_regular_file(path)
        except OSError as error:
            raise ProtocolError(source, None, f"cannot be read: {error.strerror}") from None
    raw = parse_yaml(source, data)  # the evaluation's one YAML reader: a key given twice is refused
    if not isinstance(raw, dict):
        raise ProtocolError(source, None, "expected a mapping of parameters")
    try:
        document = _as_tuples(raw)
    except _SelfContaining:
        raise ProtocolError(
            source, None, "a list or mapping contains itself (a YAML alias inside its own anchor)"
        ) from None
    try:
        params = ReplayParams.model_validate(document)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or None
        problem = str(first["msg"]).removeprefix("Value error, ")
        if key is not None and first["type"] != "missing":
            problem += f" (got {_shown(first.get('input'))})"
        raise ProtocolError(source, key, problem) from None
    return LoadedParams(params, source, hashlib.sha256(data).hexdigest())


class _SelfContaining(ValueError):
    """A list or mapping of the document contains itself (a YAML alias inside its anchor)."""


_CONVERTING: Final = object()  # marks a node whose conversion is under way


def _as_tuples(value: object, converted: dict[int, object] | None = None) -> object:
    """The YAML document with its lists as tuples: every list of the schema is a fixed range or
    the caps, which strict validation accepts only as tuples; nothing else is converted.

    A node the document refers to again (a YAML alias) is converted once and shared, so
    nested aliases cost what their text does, not the exponential size of their expansion.

    Raises:
        _SelfContaining: a node contains itself.
    """
    if not isinstance(value, dict | list):
        return value
    converted = {} if converted is None else converted
    done = converted.get(id(value))  # the document holds every node: ids are stable
    if done is _CONVERTING:
        raise _SelfContaining
    if done is not None:
        return done
    converted[id(value)] = _CONVERTING
    result: object
    if isinstance(value, dict):
        result = {key: _as_tuples(item, converted) for key, item in value.items()}
    else:
        result = tuple(_as_tuples(item, converted) for item in value)
    converted[id(value)] = result
    return result


_SHOWN_CHARS: Final = 80


def _shown(value: object) -> str:
    """A wrong value as an error quotes it: a scalar as written, a mapping or list by its kind
    (a section in the wrong place would otherwise quote the whole section)."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, tuple):
        return "a list"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


# --- the workload ---------------------------------------------------------------------------------

START: Final = datetime(2026, 1, 1, tzinfo=UTC)
"""When every workload's traffic begins."""
BURST_CATEGORY: Final = "context"
_SYLLABLES: Final = ("ka", "lo", "mi", "ner", "sta", "qu", "ve", "dor", "pli", "tan", "gre", "zu")
_WORDS_PER_FACT: Final = 4


@dataclass(frozen=True, slots=True)
class PlannedFact:
    """A fact a user will state, with its hidden future.

    Attributes:
        key: the workload's name for it (``u0-f0012``); the memory gives it an id.
        user: whose it is.
        content: what the user states.
        category: its category.
        confidence: the confidence extraction gives it.
        words: its invented words; two of them make a search for it.
        needs: when it will be needed again (the ground truth), oldest first.
        burst: it came in a burst.
    """

    key: str
    user: int
    content: str
    category: str
    confidence: float
    words: tuple[str, ...]
    needs: tuple[datetime, ...] = ()
    burst: bool = False


@dataclass(frozen=True, slots=True)
class Search:
    """A search: what is typed, and the fact it is about (``needed``: a need, not noise)."""

    query: str
    target: str
    needed: bool


@dataclass(frozen=True, slots=True)
class Correction:
    """The user corrects ``old``; ``new`` replaces it."""

    old: str
    new: str


@dataclass(frozen=True, slots=True)
class Session:
    """What one user says and does in one session (see the module docstring for the order).

    Attributes:
        user: who.
        number: the user's session number (0 first).
        at: when.
        needed: facts needed in this session (the ground truth the
            retention is measured on), by key.
        searches: the searches made.
        confirmations: facts the user confirms.
        restores: needed facts the user restores from the archive if the
            library lacks them (whether it does is the memory's business).
        corrections: facts corrected, with their replacements.
        stated: facts stated for the first time (replacements and bursts included).
        restated: facts stated again.
    """

    user: int
    number: int
    at: datetime
    needed: tuple[str, ...] = ()
    searches: tuple[Search, ...] = ()
    confirmations: tuple[str, ...] = ()
    restores: tuple[str, ...] = ()
    corrections: tuple[Correction, ...] = ()
    stated: tuple[str, ...] = ()
    restated: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Workload:
    """One seed's traffic: every fact, and every session of every user by time."""

    seed: int
    facts: Mapping[str, PlannedFact]
    sessions: tuple[Session, ...]

    @property
    def needs(self) -> int:
        return sum(len(session.needed) for session in self.sessions)


def generate(params: ReplayParams, seed: int) -> Workload:
    """The workload of ``seed`` (see the module docstring)."""
    words = _Words(random.Random(f"words:{seed}"))
    facts: dict[str, PlannedFact] = {}
    sessions: list[Session] = []
    for user in range(params.users):
        user_rng = random.Random(f"user:{seed}:{user}")
        sessions.extend(_User(params, user, user_rng, words, facts).sessions())
    sessions.sort(key=lambda session: (session.at, session.user))
    return Workload(seed, facts, tuple(sessions))


class _Words:
    """Invented words, each used once per workload."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._used: set[str] = set()

    def take(self, count: int) -> tuple[str, ...]:
        out: list[str] = []
        while len(out) < count:
            word = "".join(self._rng.choice(_SYLLABLES) for _ in range(self._rng.randint(3, 4)))
            if word not in self._used:
                self._used.add(word)
                out.append(word)
        return tuple(out)


@dataclass
class _User:
    params: ReplayParams
    user: int
    rng: random.Random
    words: _Words
    facts: dict[str, PlannedFact]
    pending: dict[str, list[datetime]] = field(default_factory=dict)
    corrections: list[tuple[datetime, str]] = field(default_factory=list)
    never: list[str] = field(default_factory=list)
    serial: int = 0

    def sessions(self) -> list[Session]:
        params, rng = self.params, self.rng
        count = max(1, round(params.sessions_per_week * params.days / 7))
        seconds = sorted(rng.sample(range(params.days * 86400), count))
        out: list[Session] = []
        for number, second in enumerate(seconds):
            at = START + timedelta(seconds=second)
            corrections = self._corrections_due(at)
            needed = self._needs_due(at)
            searches: list[Search] = []
            confirmations: list[str] = []
            restores: list[str] = []
            restated: list[str] = []
            signals = params.signals
            for key in needed:
                if rng.random() < signals.search_on_need:
                    searches.append(self._search(key, needed=True))
                if rng.random() < signals.confirm_on_need:
                    confirmations.append(key)
                if rng.random() < signals.restate_on_need:
                    restated.append(key)
                elif rng.random() < signals.restore_on_miss:
                    restores.append(key)
            if self.never and rng.random() < signals.false_search:
                searches.append(self._search(rng.choice(self.never), needed=False))
            if self.never and rng.random() < signals.false_confirmation:
                confirmations.append(rng.choice(self.never))
            stated = [correction.new for correction in corrections]
            low, high = params.facts_per_session
            stated += [self._new_fact(at) for _ in range(rng.randint(low, high))]
            if rng.random() < params.bursts.probability:
                size = rng.randint(*params.bursts.size)
                stated += [self._burst_fact() for _ in range(size)]
            out.append(
                Session(
                    user=self.user,
                    number=number,
                    at=at,
                    needed=tuple(needed),
                    searches=tuple(searches),
                    confirmations=tuple(dict.fromkeys(confirmations)),
                    restores=tuple(restores),
                    corrections=tuple(corrections),
                    stated=tuple(stated),
                    restated=tuple(restated),
                )
            )
        return out

    def _corrections_due(self, at: datetime) -> list[Correction]:
        due = [key for when, key in self.corrections if when <= at]
        self.corrections = [(when, key) for when, key in self.corrections if when > at]
        out = []
        for old in due:
            fact = self.facts[old]
            remaining = self.pending.pop(old, [])
            if old in self.never:
                self.never.remove(old)
            new = self._add(fact.category, self._confidence(fact.category), tuple(remaining))
            if remaining:
                self.pending[new] = list(remaining)
            else:
                self.never.append(new)
            out.append(Correction(old, new))
        return out

    def _needs_due(self, at: datetime) -> list[str]:
        needed = []
        for key in sorted(self.pending):
            times = self.pending[key]
            if times and times[0] <= at:
                while times and times[0] <= at:  # needs missed between sessions fall due now
                    times.pop(0)
                needed.append(key)
            if not times:
                del self.pending[key]
        return needed

    def _new_fact(self, at: datetime) -> str:
        params, rng = self.params, self.rng
        names = sorted(params.categories)
        category = rng.choices(names, weights=[params.categories[n].share for n in names])[0]
        spec = params.categories[category]
        needs = self._needs(spec, at)
        key = self._add(category, self._confidence(category), needs)
        if needs:
            self.pending[key] = list(needs)
        else:
            self.never.append(key)
        if rng.random() < params.corrections.probability:
            delay = rng.uniform(*params.corrections.delay_days)
            self.corrections.append((at + timedelta(days=delay), key))
        return key

    def _burst_fact(self) -> str:
        low, high = self.params.bursts.confidence
        key = self._add(BURST_CATEGORY, round(self.rng.uniform(low, high), 2), (), burst=True)
        self.never.append(key)
        return key

    def _needs(self, spec: CategorySpec, at: datetime) -> tuple[datetime, ...]:
        rng = self.rng
        if rng.random() >= spec.need_probability:
            return ()
        times = []
        moment = at
        for _ in range(rng.randint(*spec.needs)):
            moment = moment + timedelta(days=rng.uniform(*spec.need_delay_days))
            times.append(moment)
        return tuple(times)

    def _confidence(self, category: str) -> float:
        low, high = self.params.categories[category].confidence
        return round(self.rng.uniform(low, high), 2)

    def _add(
        self, category: str, confidence: float, needs: tuple[datetime, ...], *, burst: bool = False
    ) -> str:
        key = f"u{self.user}-f{self.serial:04d}"
        self.serial += 1
        words = self.words.take(_WORDS_PER_FACT)
        self.facts[key] = PlannedFact(
            key=key,
            user=self.user,
            content=f"The user's {category}: {' '.join(words)}",
            category=category,
            confidence=confidence,
            words=words,
            needs=needs,
            burst=burst,
        )
        return key

    def _search(self, key: str, *, needed: bool) -> Search:
        words = self.rng.sample(self.facts[key].words, 2)
        return Search(" ".join(words), key, needed)


# --- the paired bootstrap over seeds --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean difference and its bootstrap interval (``asdict``: its form in the results)."""

    mean: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval says which policy is ahead."""
        return self.low > 0.0 or self.high < 0.0


def paired_interval(
    first: Sequence[float],
    second: Sequence[float],
    *,
    iterations: int,
    confidence: float,
    seed: int,
) -> Interval:
    """``mean(second − first)`` over the pairs, with its percentile bootstrap interval.

    Raises:
        ValueError: no pairs, or the two sequences differ in length.
    """
    if not first or len(first) != len(second):
        raise ValueError(f"paired values needed, got {len(first)} and {len(second)}")
    differences = [b - a for a, b in zip(first, second, strict=True)]
    count = len(differences)
    rng = random.Random(seed)
    means = sorted(
        math.fsum(differences[rng.randrange(count)] for _ in range(count)) / count
        for _ in range(iterations)
    )
    tail = (1.0 - confidence) / 2
    low = means[max(0, math.floor(tail * iterations))]
    high = means[min(iterations - 1, math.ceil((1.0 - tail) * iterations) - 1)]
    return Interval(math.fsum(differences) / count, low, high)


# --- the driver -----------------------------------------------------------------------------------

_LABELS: Final = {"scope": "user", "durability": "durable", "authority": "descriptive"}
_REASON: Final = "the user said so in this session"


class Counts(BaseModel):
    """One policy's evictions and regret in one cell, summed over the users.

    ``model_dump(by_alias=True)`` is its form in the results (``regretRate``).
    """

    model_config = ConfigDict(frozen=True)

    evictions: int = 0
    regretted: int = 0
    events: dict[str, int] = Field(default_factory=lambda: {str(kind): 0 for kind in REGRET_KINDS})

    @computed_field(alias="regretRate")  # type: ignore[prop-decorator]
    @property
    def rate(self) -> float | None:
        """Regretted evictions over evictions; ``None`` when nothing was evicted."""
        return self.regretted / self.evictions if self.evictions else None

    def plus(self, other: Counts | PolicyRegret) -> Counts:
        """These counts with ``other``'s added (one user's report, or another cell's counts)."""
        return Counts(
            evictions=self.evictions + other.evictions,
            regretted=self.regretted + other.regretted,
            events={kind: self.events[kind] + other.events.get(kind, 0) for kind in REGRET_KINDS},
        )


@dataclass(frozen=True, slots=True)
class CellRun:
    """One seed replayed under one policy at one cap.

    Attributes:
        seed / policy / cap: the cell.
        needs: needs in the workload (the same in every cell of a seed).
        retained: needs met by a fact in the library.
        active: the policy's own evictions and regret.
        shadow: in shadow mode (``confidence`` cells), ``hybrid-v1``'s.
    """

    seed: int
    policy: str
    cap: int
    needs: int
    retained: int
    active: Counts
    shadow: Counts | None

    @property
    def retention(self) -> float | None:
        return self.retained / self.needs if self.needs else None


MEMORY_DIRECTORIES: Final = (Path("/dev/shm"),)
"""Memory-backed (tmpfs) directories the scratch stores go to when they exist."""


def scratch_directory(workdir: Path | None) -> Path | None:
    """Where the scratch stores go: ``workdir``, else a memory-backed directory, else ``None``.

    Every commit of a store is fsynced, and a replay commits a few hundred
    thousand times: on an ordinary disk ``--quick`` took 53 s, on tmpfs 5 s.
    The scratch stores are thrown away after each cell, so their durability
    buys nothing, and the directory changes no result. ``None`` means the
    system's temporary directory.
    """
    if workdir is not None:
        return workdir
    for candidate in MEMORY_DIRECTORIES:
        if candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None


def replay_all(
    params: ReplayParams,
    workdir: Path | None = None,
    *,
    progress: Callable[[CellRun], None] | None = None,
) -> list[CellRun]:
    """Every cell of the parameters, seed by seed (workloads are generated once per seed).

    ``workdir`` holds the scratch stores (default: :func:`scratch_directory`'s choice).
    """
    workdir = scratch_directory(workdir)
    runs = []
    for seed in range(params.seeds):
        workload = generate(params, seed)
        for cap in params.caps:
            for policy in POLICIES:
                run = replay_cell(params, workload, policy, cap, workdir)
                runs.append(run)
                if progress is not None:
                    progress(run)
    return runs


def replay_cell(
    params: ReplayParams, workload: Workload, policy: str, cap: int, workdir: Path | None = None
) -> CellRun:
    """Replay one workload under one policy at one cap, on a fresh store under ``workdir``."""
    config = MemoryConfig(
        max_facts=cap,
        # By keyword: the workload's facts are invented words, which no embedding model
        # gives a meaning (searched by meaning, its noise counted as missed recalls), and
        # the results must not depend on whether the optional models are installed.
        search_mode="keyword",
        fact_eviction_policy=policy,
        fact_eviction_shadow_enabled=policy == POLICY_CONFIDENCE,
        regret_max_events=100_000,
        eviction_audit_max_entries=10_000,
        archive_max_entries=100_000,
        archive_max_age_days=0,
    )
    with _scratch(workdir) as root:
        replay = _Replay(params, workload, config, root)
        for session in workload.sessions:
            replay.session(session)
        return replay.finish(policy, cap)


@contextmanager
def _scratch(workdir: Path | None) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="deermem-replay-", dir=workdir))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


class _Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class _Ids:
    """Fact ids in order of creation, the same in every run."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return f"fact_{self.count:08x}"


class _Replay:
    def __init__(
        self, params: ReplayParams, workload: Workload, config: MemoryConfig, root: Path
    ) -> None:
        self.params = params
        self.workload = workload
        self.clock = _Clock()
        self.ids = _Ids()
        self.settings = UpdateSettings.from_config(config)
        base = Memory.open(root, config, clock=self.clock, id_factory=self.ids, user="user0")
        self.memories = [base.scoped(user=f"user{n}", agent=None) for n in range(params.users)]
        self.fact_ids: dict[str, str] = {}  # workload key -> the id the memory gave it
        self.needs = 0
        self.retained = 0

    def session(self, session: Session) -> None:
        self.clock.now = session.at
        memory = self.memories[session.user]
        library = memory.snapshot().by_id
        for key in session.needed:
            self.needs += 1
            self.retained += self.fact_ids.get(key) in library
        for search in session.searches:
            memory.search(search.query, top_k=self.params.search_top_k)
        for key in session.restores:
            fact_id = self.fact_ids.get(key)
            if fact_id is not None and fact_id not in library:
                with suppress(FactNotFoundError):  # gone for good: purged by the bounds
                    memory.restore(fact_id)
        if session.restores:
            library = memory.snapshot().by_id
        for response, confirming in self._responses(session, library):
            with memory.store.transaction(memory.scope) as transaction:
                applied = apply_response(
                    transaction,
                    response,
                    gate=memory.gate,
                    settings=self.settings,
                    signals=(REINFORCEMENT_SIGNAL,) if confirming else (),
                    now=session.at,
                    thread_id=f"session-{session.user}-{session.number}",
                    new_id=self.ids,
                )
            by_content = {fact.content: fact.id for fact in applied.plan.new_facts}
            for key in (*session.stated, *session.restated):
                fact_id = by_content.get(self.workload.facts[key].content)
                if fact_id is not None and key not in self.fact_ids:
                    self.fact_ids[key] = applied.gate.relearned.get(fact_id, fact_id)

    def _responses(
        self, session: Session, library: Mapping[str, object]
    ) -> Iterator[tuple[NormalizedResponse, bool]]:
        """What extraction makes of the session: one answer, or several for a long burst.

        Confirmations and corrections name facts by id, so they apply only to
        facts in the library — the model sees nothing else. The first answer
        carries them; a correction's replacement is among its first facts.
        """
        facts = self.workload.facts
        stated = [facts[key] for key in (*session.stated, *session.restated)]
        position = {fact.key: n for n, fact in enumerate(stated)}
        confirmed = [
            {"id": self.fact_ids[key], "scope": "user", "reason": _REASON}
            for key in session.confirmations
            if self.fact_ids.get(key) in library
        ]
        corrected = [
            {
                "id": self.fact_ids[correction.old],
                "scope": "user",
                "reason": _REASON,
                "replacementFactIndex": position[correction.new],
            }
            for correction in session.corrections
            if self.fact_ids.get(correction.old) in library
        ]
        chunks = [stated[n : n + MAX_NEW_FACTS] for n in range(0, len(stated), MAX_NEW_FACTS)]
        for number, chunk in enumerate(chunks or [[]]):
            data: dict[str, object] = {
                "user": {},
                "history": {},
                "newFacts": [
                    {
                        "content": fact.content,
                        "category": fact.category,
                        "confidence": fact.confidence,
                        **_LABELS,
                    }
                    for fact in chunk
                ],
                "factsToReinforce": confirmed if number == 0 else [],
                "factsToRemove": corrected if number == 0 else [],
            }
            response = normalize_response(data)
            assert isinstance(response, NormalizedResponse)  # the driver writes only valid answers
            if response.new_facts or response.reinforce or response.remove:
                yield response, bool(confirmed) and number == 0

    def finish(self, policy: str, cap: int) -> CellRun:
        self.clock.now = START + timedelta(days=self.params.days)
        active = Counts()
        shadow = Counts() if policy == POLICY_CONFIDENCE else None
        for memory in self.memories:
            report = memory.regret()
            own = report.policy(policy, "active")
            if own is not None:
                active = active.plus(own)
            other = report.policy(POLICY_HYBRID_V1, "shadow")
            if shadow is not None and other is not None:
                shadow = shadow.plus(other)
        for memory in self.memories:
            memory.close()
        return CellRun(
            seed=self.workload.seed,
            policy=policy,
            cap=cap,
            needs=self.needs,
            retained=self.retained,
            active=active,
            shadow=shadow,
        )


def cells_of(runs: Sequence[CellRun], policy: str, cap: int) -> list[CellRun]:
    """The runs of one policy at one cap, by seed."""
    return sorted((r for r in runs if (r.policy, r.cap) == (policy, cap)), key=lambda r: r.seed)


# --- the results ----------------------------------------------------------------------------------

RESULTS_SCHEMA: Final = "deermem.replay/1"
REPLAY_FILES: Final = ("replay.md", "replay.png", "replay.json")
"""What :func:`write_results` writes, in order: ``replay.json``, last, marks the set complete."""
_TRAFFIC_STEPS: Final = (2, 5, 10, 20, 50, 100)


def summarize(runs: Sequence[CellRun], loaded: LoadedParams) -> dict[str, Any]:
    """The results document (see the module docstring)."""
    params = loaded.params
    cells = []
    differences = []
    traffic = []
    for cap in params.caps:
        for policy in POLICIES:
            cells.append(_cell(cap, policy, cells_of(runs, policy, cap)))
        first = cells_of(runs, POLICY_CONFIDENCE, cap)
        second = cells_of(runs, POLICY_HYBRID_V1, cap)
        differences.append({"cap": cap, "seeds": len(first), **_differences(first, second, loaded)})
        steps = [n for n in _TRAFFIC_STEPS if n < len(first)] + [len(first)]
        for count in steps:
            head, tail = first[:count], second[:count]
            traffic.append(
                {
                    "cap": cap,
                    "seeds": count,
                    "needs": sum(run.needs for run in head),
                    "evictions": {
                        POLICY_CONFIDENCE: sum(run.active.evictions for run in head),
                        POLICY_HYBRID_V1: sum(run.active.evictions for run in tail),
                    },
                    "regretEvents": {
                        POLICY_CONFIDENCE: sum(sum(run.active.events.values()) for run in head),
                        POLICY_HYBRID_V1: sum(sum(run.active.events.values()) for run in tail),
                    },
                    **_differences(head, tail, loaded),
                }
            )
    return {
        "schema": RESULTS_SCHEMA,
        "params": params.model_dump(mode="json"),
        "paramsSha256": loaded.sha256,
        "cells": cells,
        "differences": differences,
        "traffic": traffic,
        "perSeed": [_per_seed(run) for run in sorted(runs, key=_order)],
    }


def ensure_new_results(directory: Path) -> None:
    """Refuse ``directory`` if it holds a complete set of results (before the replay runs).

    Raises:
        ResultsExistError: ``replay.json``, the set's last file, is there.
    """
    ensure_new_set([directory / name for name in REPLAY_FILES])


def write_results(directory: Path, results: dict[str, Any]) -> str | None:
    """Publish ``replay.md``, with matplotlib ``replay.png``, and ``replay.json``.

    As every set of results (:func:`deermem.eval.files.write_new_files`): the
    last file, ``replay.json``, marks the set complete, so a killed write
    leaves a set without it, which the next write names and replaces; a
    complete set is never overwritten.

    Returns:
        The module the chart needs but cannot import, or ``None`` when it was drawn.

    Raises:
        ResultsExistError: ``directory`` holds a complete set.
    """
    missing = missing_chart_module()
    files = [(directory / "replay.md", render_markdown(results).encode())]
    if missing is None:
        files.append((directory / "replay.png", render_chart(results)))
    files.append((directory / "replay.json", encode_results(results)))
    write_new_files(files)
    return missing


def encode_results(results: dict[str, Any]) -> bytes:
    """The results document as bytes: sorted keys, two-space indent, a final newline."""
    return (json.dumps(results, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


def render_markdown(results: dict[str, Any]) -> str:
    """The tables docs/regret.md shows."""
    lines = [
        "| cap | policy | retained at need | evicted | regret rate | relearned | restored | "
        "missed recall | confirmed | recalled | corrected |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in results["cells"]:
        lines.append(_row(cell["cap"], cell["policy"], cell, cell["retained"], cell["needs"]))
        shadow = cell["shadow"]
        if shadow is not None:
            label = f"{POLICY_HYBRID_V1} (shadow)"
            lines.append(_row(cell["cap"], label, shadow, None, None))
    lines += [
        "",
        "| cap | retention, hybrid-v1 − confidence | regret rate, hybrid-v1 − confidence |",
        "|---:|---|---|",
    ]
    for row in results["differences"]:
        lines.append(
            f"| {row['cap']} | {_interval(row['retention'])} | {_interval(row['regretRate'])} |"
        )
    lines += [
        "",
        "| cap | seeds | needs | regret events (confidence / hybrid-v1) | "
        "retention difference | regret-rate difference |",
        "|---:|---:|---:|---|---|---|",
    ]
    for row in results["traffic"]:
        events = row["regretEvents"]
        lines.append(
            f"| {row['cap']} | {row['seeds']} | {row['needs']} | "
            f"{events[POLICY_CONFIDENCE]} / {events[POLICY_HYBRID_V1]} | "
            f"{_interval(row['retention'])} | {_interval(row['regretRate'])} |"
        )
    return "\n".join(lines) + "\n"


def render_chart(results: dict[str, Any]) -> bytes:
    """Two panels by cap, one line per policy: retention at need, and regret rate.

    Raises:
        ModuleNotFoundError: matplotlib (the ``eval`` extra) is not installed.
    """
    caps = [int(cap) for cap in results["params"]["caps"]]

    def draw(figure: Figure) -> None:
        retention, regret = figure.subplots(1, 2)
        for policy in POLICIES:
            cells = [c for c in results["cells"] if c["policy"] == policy]
            colour = POLICY_COLOURS[policy]
            retention.plot(caps, [c["retention"] for c in cells], "o-", color=colour, label=policy)
            regret.plot(caps, [c["regretRate"] for c in cells], "o-", color=colour, label=policy)
            shadows = [c["shadow"]["regretRate"] for c in cells if c["shadow"] is not None]
            if len(shadows) == len(caps):
                label = f"{POLICY_HYBRID_V1} (shadow)"
                regret.plot(
                    caps, shadows, "o--", color=POLICY_COLOURS[POLICY_HYBRID_V1], label=label
                )
        retention.set_title("needed facts in the library when needed", fontsize="medium")
        retention.set_ylim(0.0, 1.0)
        regret.set_title("regretted evictions / evictions", fontsize="medium")
        regret.set_ylim(bottom=0.0)
        for axis in (retention, regret):
            axis.set_xlabel("cap (facts)")
            axis.set_xticks(caps)
            axis.legend(loc="best", fontsize="small")
        seeds = results["params"]["seeds"]
        figure.suptitle(
            f"Replay: {seeds} seeded workloads (params {results['paramsSha256'][:12]})",
            fontsize="medium",
        )

    return figure_png(8.0, 3.6, draw)


def _cell(cap: int, policy: str, runs: Sequence[CellRun]) -> dict[str, Any]:
    needs = sum(run.needs for run in runs)
    retained = sum(run.retained for run in runs)
    active = _total(run.active for run in runs)
    shadows = [run.shadow for run in runs if run.shadow is not None]
    return {
        "cap": cap,
        "policy": policy,
        "seeds": len(runs),
        "needs": needs,
        "retained": retained,
        "retention": retained / needs if needs else None,
        **active.model_dump(by_alias=True),
        "shadow": None
        if not shadows
        else {"policy": POLICY_HYBRID_V1, **_total(shadows).model_dump(by_alias=True)},
    }


def _total(counts: Iterable[Counts]) -> Counts:
    total = Counts()
    for item in counts:
        total = total.plus(item)
    return total


def _differences(
    first: Sequence[CellRun], second: Sequence[CellRun], loaded: LoadedParams
) -> dict[str, Any]:
    boot = loaded.params.bootstrap

    def interval(values: Sequence[float], others: Sequence[float]) -> dict[str, float]:
        return asdict(
            paired_interval(
                values,
                others,
                iterations=boot.iterations,
                confidence=boot.confidence,
                seed=boot.seed,
            )
        )

    return {
        "retention": interval([_retention(r) for r in first], [_retention(r) for r in second]),
        "regretRate": interval([_rate(r) for r in first], [_rate(r) for r in second]),
    }


def _retention(run: CellRun) -> float:
    return run.retention if run.retention is not None else 0.0


def _rate(run: CellRun) -> float:
    """The seed's regret rate; 0 when nothing was evicted (nothing to regret)."""
    return run.active.rate if run.active.rate is not None else 0.0


def _per_seed(run: CellRun) -> dict[str, Any]:
    return {
        "seed": run.seed,
        "cap": run.cap,
        "policy": run.policy,
        "needs": run.needs,
        "retained": run.retained,
        **run.active.model_dump(by_alias=True),
        "shadow": None if run.shadow is None else run.shadow.model_dump(by_alias=True),
    }


def _order(run: CellRun) -> tuple[int, int, int]:
    return run.cap, POLICIES.index(run.policy), run.seed


def _row(cap: int, label: str, counts: dict[str, Any], retained: Any, needs: Any) -> str:
    events = counts["events"]
    rate = counts["regretRate"]
    kept = "" if needs is None else f"{retained}/{needs} ({retained / needs:.1%})"
    return (
        f"| {cap} | {label} | {kept} | {counts['evictions']} | "
        f"{'-' if rate is None else f'{rate:.1%}'} | "
        + " | ".join(str(events[kind]) for kind in REGRET_KINDS)
        + " |"
    )


def _interval(value: dict[str, float]) -> str:
    return f"{value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]"
