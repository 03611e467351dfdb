"""The replay's workload: seeded synthetic traffic with a hidden ground truth.

:func:`generate` turns the parameters and a seed into what users say and do
over simulated months — and, hidden from the memory, which facts will be
needed again and when. Pure: the same parameters and seed give the same
workload on every machine (:class:`random.Random`, seeded per user; no
clock, no I/O).

Per user, sessions fall at random times within ``days``. In each session, in
this order:

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
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

from deermem.eval.replay.params import CategorySpec, ReplayParams

__all__ = [
    "BURST_CATEGORY",
    "START",
    "Correction",
    "PlannedFact",
    "Search",
    "Session",
    "Workload",
    "generate",
]

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
