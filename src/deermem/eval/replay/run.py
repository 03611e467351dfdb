"""Replaying a workload through the real ``Memory``: the driver of ``deermem eval replay``.

For every seed, policy (``confidence``, ``hybrid-v1``) and cap of the
parameters, the seed's workload (:func:`deermem.eval.replay.generate`)
is replayed session by session, in time order, through a :class:`~deermem.Memory`
on a Markdown store of its own, with the session's time as the clock:

1. **needs** are checked first: a needed fact counts as *retained* when it is
   in its user's library as the session starts — the moment the agent would
   have put it in the prompt;
2. **searches** go through :meth:`Memory.search` (FTS5, recall counts, missed
   recalls), and a needed fact the library lacks may be restored
   (:meth:`Memory.restore`, through the gate);
3. what the user **said** — new and restated facts, confirmations,
   corrections — reaches the memory as an extraction result through the apply
   path ``Memory.learn`` uses (:func:`deermem.learning.learner.apply_response`, in a
   store transaction, through the capacity gate), with the reinforcement
   signal when the user confirmed something. The model call itself is left
   out: the prompt, the HTTP round trip and the JSON parsing are tested on
   their own and change nothing the gate sees, and going through them would
   double the replay's time (docs/regret.md has the figures).

``confidence`` runs in shadow mode, so each of its cells also says what
regret ``hybrid-v1`` would have had beside it. At the end each user's
:meth:`Memory.regret` report is read and summed.

This module sits with the command line because it needs ``Memory``, which the
evaluation's layer may not import; the workload, the parameters and the
statistics it uses are pure and live in :mod:`deermem.eval.replay`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

from deermem.config import MemoryConfig
from deermem.errors import FactNotFoundError
from deermem.eval.replay import ReplayParams, Session, Workload, generate
from deermem.eval.replay.workload import START
from deermem.learning.answer import MAX_NEW_FACTS, NormalizedResponse, normalize_response
from deermem.learning.learner import apply_response
from deermem.learning.plan import REINFORCEMENT_SIGNAL, UpdateSettings
from deermem.library.regret import PolicyRegret
from deermem.memory import Memory
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1
from deermem.store.records import REGRET_KINDS

__all__ = ["POLICIES", "CellRun", "Counts", "replay_all", "replay_cell"]

POLICIES: Final = (POLICY_CONFIDENCE, POLICY_HYBRID_V1)
_LABELS: Final = {"scope": "user", "durability": "durable", "authority": "descriptive"}
_REASON: Final = "the user said so in this session"


@dataclass(frozen=True, slots=True)
class Counts:
    """One policy's evictions and regret in one cell, summed over the users."""

    evictions: int = 0
    regretted: int = 0
    events: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(REGRET_KINDS, 0))

    @property
    def rate(self) -> float | None:
        return self.regretted / self.evictions if self.evictions else None

    def plus(self, row: PolicyRegret) -> Counts:
        return Counts(
            self.evictions + row.evictions,
            self.regretted + row.regretted,
            {kind: self.events[kind] + row.events.get(kind, 0) for kind in REGRET_KINDS},
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "evictions": self.evictions,
            "regretted": self.regretted,
            "regretRate": self.rate,
            "events": dict(self.events),
        }


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


def replay_all(
    params: ReplayParams,
    workdir: Path | None = None,
    *,
    progress: Callable[[CellRun], None] | None = None,
) -> list[CellRun]:
    """Every cell of the parameters, seed by seed (workloads are generated once per seed)."""
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
