"""``deermem demo``: the seed's two situations through a real memory, side by side.

Both situations (:func:`seed_scenarios`) are libraries one fact over a cap of
10 in which the ``confidence`` policy evicts the fact a user would most want
kept:

* **stale-vs-confirmed** — a 0.9 preference nobody has mentioned for 180
  days against a 0.7 preference the user confirmed a week ago.
* **correction-vs-preferences** — one 0.7 correction ("don't use pip, use
  uv") among ten 0.9 preferences.

For each situation and each mode — ``confidence``, ``hybrid-v1`` and shadow
mode (``confidence`` deciding, ``hybrid-v1`` recorded beside it) — the
library is imported into its own agent through the capacity gate, which
evicts one fact with a receipt into the archive (:func:`run_demo`). Then, in
the ``confidence`` agent, the policy is switched to ``hybrid-v1`` and the
fact the user cared about is restored from the archive: it comes back, and
the gate picks another fact to make room.

Timestamps are relative to an injected clock and every id is fixed, so a
run gives the same result on every run and every machine. The situations
are data the docs and the tests use too.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final

import typer
from rich import box
from rich.table import Table

from deermem.cli.learning import render_update
from deermem.cli.output import (
    JSON_OPTION,
    cli_context,
    components_text,
    escape,
    eviction_sentence,
    margin_text,
    out_console,
    print_json,
)
from deermem.config import MemoryConfig, new_store_settings, render_store_settings
from deermem.memory import Memory
from deermem.model import Fact, format_timestamp, parse_timestamp
from deermem.policy import POLICY_CONFIDENCE, POLICY_HYBRID_V1, elapsed_days
from deermem.results import Explanation, RestoreResult, to_json
from deermem.store import EvictionReceipt
from deermem.store.markdown.files import write_store_settings
from deermem.testing import ScriptedChatServer

if TYPE_CHECKING:
    from deermem.learning import UpdateResult

__all__ = ["demo", "seed_scenarios"]

# The evaluation's fixed clock; any fixed value would do.
DEMO_CLOCK: Final = datetime(2026, 8, 13, tzinfo=UTC)
DEMO_CAPACITY: Final = 10
EARLIEST_NOW: Final = datetime(2, 1, 1, tzinfo=UTC)
"""The earliest ``--now``: the seed dates facts up to 180 days back and the store
prunes its archive by age (365 days by default), and both must stay within the
dates a ``datetime`` holds, which start at year 1."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named library over its cap, and the fact the user cares about."""

    name: str
    title: str
    max_facts: int
    facts: tuple[dict[str, object], ...]
    precious_id: str
    """The fact the user would want kept; ``confidence`` evicts it."""


def seed_scenarios(now: datetime = DEMO_CLOCK) -> tuple[Scenario, Scenario]:
    """Build both situations with timestamps relative to ``now``."""

    def ago(days: float) -> str:
        return format_timestamp(now - timedelta(days=days))

    # Nine well-established facts that outrank both contenders under either policy.
    background = tuple(
        {
            "id": f"fact_bg{index:02d}",
            "content": text,
            "category": category,
            "confidence": 0.95,
            "createdAt": ago(20 + index),
        }
        for index, (category, text) in enumerate(
            [
                ("identity", "The user is a backend engineer on the payments team."),
                ("context", "The main service is written in Python 3.11."),
                ("preference", "The user reads diffs in unified format."),
                ("constraint", "Production deploys happen only on weekdays."),
                ("goal", "The user is migrating the billing jobs to a queue."),
                ("preference", "The user wants answers in English."),
                ("decision", "The team chose PostgreSQL over MySQL in 2025."),
                ("behavior", "The user runs the tests before every commit."),
                ("context", "CI runs on two-core machines."),
            ],
            start=1,
        )
    )
    stale_vs_confirmed = Scenario(
        name="stale-vs-confirmed",
        title="A 0.9 fact nobody mentioned for 180 days vs a 0.7 fact confirmed last week",
        max_facts=DEMO_CAPACITY,
        facts=(
            *background,
            {
                "id": "fact_stale90",
                "content": "The user prefers tabs over spaces.",
                "category": "preference",
                "confidence": 0.9,
                "createdAt": ago(180),
            },
            {
                "id": "fact_confirm",
                "content": "The user wants short commit messages in the imperative mood.",
                "category": "preference",
                "confidence": 0.7,
                "createdAt": ago(60),
                "lastConfirmedAt": ago(7),
                "confirmationCount": 1,
            },
        ),
        precious_id="fact_confirm",
    )
    preferences = tuple(
        {
            "id": f"fact_pref{index:02d}",
            "content": text,
            "category": "preference",
            "confidence": 0.9,
            "createdAt": ago(10 + index),
        }
        for index, text in enumerate(
            [
                "The user likes type hints everywhere.",
                "The user prefers pytest over unittest.",
                "The user prefers dark themes in screenshots.",
                "The user likes small pull requests.",
                "The user prefers ruff for linting.",
                "The user wants examples before theory.",
                "The user prefers pathlib over os.path.",
                "The user likes tables for comparisons.",
                "The user prefers f-strings.",
                "The user wants error messages that name the file.",
            ],
            start=1,
        )
    )
    correction_vs_preferences = Scenario(
        name="correction-vs-preferences",
        title="One 0.7 correction among ten 0.9 preferences",
        max_facts=DEMO_CAPACITY,
        facts=(
            {
                "id": "fact_correct",
                "content": "Don't use pip in this project; use uv.",
                "category": "correction",
                "confidence": 0.7,
                "createdAt": ago(30),
                "sourceError": "The assistant suggested 'pip install'.",
            },
            *preferences,
        ),
        precious_id="fact_correct",
    )
    return stale_vs_confirmed, correction_vs_preferences


# --- the run -----------------------------------------------------------------------------

DEMO_USER: Final = "demo"
MODE_SHADOW: Final = "shadow"
MODES: Final = (POLICY_CONFIDENCE, POLICY_HYBRID_V1, MODE_SHADOW)


@dataclass(frozen=True, slots=True)
class ModeRun:
    """One situation under one mode.

    Attributes:
        mode: ``confidence``, ``hybrid-v1`` or ``shadow``.
        agent: the agent bucket it ran in (``<situation>-<mode>``).
        kept: the library after the import, oldest first.
        evicted: ids the gate evicted.
        receipts: the receipts written.
    """

    mode: str
    agent: str
    kept: tuple[Fact, ...]
    evicted: tuple[str, ...]
    receipts: tuple[EvictionReceipt, ...]


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    """One situation under every mode, ``why`` for its lost fact, and the restore.

    Attributes:
        hybrid_scores: each fact's ``hybrid-v1`` score in the ``hybrid-v1``
            agent (kept facts from ``why``, the evicted one from its receipt).
        why: ``why`` for the precious fact in the ``confidence`` agent.
        restore: restoring it there after switching the agent to ``hybrid-v1``.
    """

    scenario: Scenario
    modes: dict[str, ModeRun]
    hybrid_scores: dict[str, float]
    why: Explanation
    restore: RestoreResult

    def precious_kept(self, mode: str) -> bool:
        return self.scenario.precious_id in {fact.id for fact in self.modes[mode].kept}


def run_demo(root: Path, now: datetime) -> list[ScenarioRun]:
    """Run both situations in ``root`` (which should be empty) at the clock ``now``."""
    return [_run_scenario(root, scenario, now) for scenario in seed_scenarios(now)]


def _config(scenario: Scenario, mode: str) -> MemoryConfig:
    return MemoryConfig(
        max_facts=scenario.max_facts,
        fact_eviction_policy=POLICY_CONFIDENCE if mode == MODE_SHADOW else mode,
        fact_eviction_shadow_enabled=mode == MODE_SHADOW,
    )


def _memory(root: Path, scenario: Scenario, mode: str, now: datetime) -> Memory:
    return Memory.open(
        root,
        _config(scenario, mode),
        user=DEMO_USER,
        agent=f"{scenario.name}-{mode}",
        clock=lambda: now,
        id_factory=_no_new_ids,
    )


def _run_scenario(root: Path, scenario: Scenario, now: datetime) -> ScenarioRun:
    modes: dict[str, ModeRun] = {}
    for mode in MODES:
        memory = _memory(root, scenario, mode, now)
        result = memory.import_document({"facts": [dict(fact) for fact in scenario.facts]})
        modes[mode] = ModeRun(
            mode=mode,
            agent=memory.scope.agent,
            kept=memory.list_facts(),
            evicted=result.evicted,
            receipts=result.receipts,
        )
    scores = _hybrid_scores(_memory(root, scenario, POLICY_HYBRID_V1, now))
    confidence = _memory(root, scenario, POLICY_CONFIDENCE, now)
    why = confidence.why(scenario.precious_id)
    # The user reads the receipt, switches the agent to hybrid-v1 and restores the fact.
    switched = _memory(root, scenario, POLICY_HYBRID_V1, now).scoped(
        user=DEMO_USER, agent=confidence.scope.agent
    )
    restore = switched.restore(scenario.precious_id)
    return ScenarioRun(scenario, modes, scores, why, restore)


def _hybrid_scores(memory: Memory) -> dict[str, float]:
    scores: dict[str, float] = {}
    for fact in memory.list_facts():
        standing = memory.why(fact.id).standing
        if standing is not None:
            scores[fact.id] = standing.score
    for receipt in memory.audit():
        for line in receipt.evicted:
            if line.score is not None:
                scores[line.fact_id] = line.score
    return scores


def _no_new_ids() -> str:
    raise AssertionError("the demo's facts all carry ids")


# --- the learning scene: a conversation through a scripted model, offline ----------------

LEARNING_AGENT: Final = "learning"
_LABELS: Final = {"scope": "user", "durability": "durable", "authority": "descriptive"}


@dataclass(frozen=True)
class LearningStep:
    """One conversation of the learning scene and what the memory did with it."""

    title: str
    said: tuple[str, ...]
    result: UpdateResult


def run_learning(root: Path, now: datetime) -> tuple[LearningStep, ...]:
    """The learning scene in ``root``: a full library, two conversations, a scripted model.

    The model is :class:`~deermem.testing.ScriptedChatServer` on 127.0.0.1,
    answering what a good model would; everything after its answer is
    deermem's real path (docs/update.md): the label gate, the confirmation
    rule, the capacity gate, one commit. No key, no network.
    """
    numbers = iter(range(1, 1000))
    with ScriptedChatServer() as server:
        config = MemoryConfig(
            max_facts=DEMO_CAPACITY,
            fact_eviction_policy=POLICY_HYBRID_V1,
            fact_eviction_shadow_enabled=True,
            model={"model": "scripted", "base_url": server.url, "api_key_env": None},
        )
        with Memory.open(
            root,
            config,
            user=DEMO_USER,
            agent=LEARNING_AGENT,
            clock=lambda: now,
            id_factory=lambda: f"fact_learn{next(numbers):03d}",
        ) as memory:  # closing it releases the model's connections
            library = [  # full: ten facts at the default confidence, added weeks ago
                {
                    "id": f"fact_old{n:02d}",
                    "content": f"Mentioned project detail number {n}.",
                    "category": "context",
                    "confidence": 0.5,
                    "createdAt": format_timestamp(now - timedelta(days=70 - n)),
                }
                for n in range(DEMO_CAPACITY)
            ]
            memory.import_document({"facts": library})
            first = ("For Python projects I always use uv, never pip.", "Got it: uv, not pip.")
            server.enqueue(
                json.dumps(
                    {
                        "user": {},
                        "history": {},
                        "newFacts": [
                            {
                                "content": "Always uses uv, never pip, for Python projects.",
                                "category": "correction",
                                "confidence": 0.95,
                                **_LABELS,
                            }
                        ],
                    }
                )
            )
            learned = memory.learn("demo-1", _messages(first))
            [added] = learned.report.added
            second = (
                "Which tool do I use to install packages?",
                "uv, never pip.",
                "Perfect, that's exactly right.",
                "Glad to help.",
            )
            server.enqueue(
                json.dumps(
                    {
                        "user": {},
                        "history": {},
                        "newFacts": [],
                        "factsToReinforce": [
                            {"id": added, "scope": "user", "reason": "the user confirmed it"}
                        ],
                    }
                )
            )
            confirmed = memory.learn("demo-2", _messages(second))
    return (
        LearningStep("A correction, at the cap", first, learned),
        LearningStep("The user confirms it", second, confirmed),
    )


def _messages(texts: tuple[str, ...]) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[n % 2], "content": text} for n, text in enumerate(texts)]


# --- the command -------------------------------------------------------------------------


def demo(
    ctx: typer.Context,
    root: Path | None = typer.Option(
        None,
        "--root",
        file_okay=False,
        help="Keep the demo's store here (an empty or new directory) to explore it afterwards "
        "[default: the global --root, else a temporary directory].",
    ),
    now: str = typer.Option(
        format_timestamp(DEMO_CLOCK),
        "--now",
        help="The clock the memory uses (ISO 8601, year 2 or later). Fixed by default, so every "
        "run is the same.",
    ),
    learn: bool = typer.Option(
        False,
        "--learn",
        help="Instead: learning from conversations, offline, with a scripted model — "
        "extraction, confirmation and the capacity gate, no key needed.",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show what each capacity policy forgets in the seed's two situations, and why.

    Each situation is a library one fact over a cap of 10, imported into a
    real store: a 0.9 fact nobody mentioned for 180 days against a 0.7 fact
    confirmed last week, and one 0.7 correction among ten 0.9 preferences.
    Under `confidence` (the original's default) the fact the user cares about is
    evicted, under `hybrid-v1` it stays; shadow mode records the
    disagreement. Each eviction leaves a receipt and an archive entry; the
    demo asks `why`, switches to `hybrid-v1` and restores the fact. The
    store `--root` keeps runs `hybrid-v1` with shadow mode on in every scope,
    as every store deermem creates.

    With `--learn`: a library at its cap of 10 hears two conversations,
    answered by the scripted model deermem's tests use (an OpenAI-compatible
    server on 127.0.0.1): a correction is extracted and the capacity gate
    makes room for it, then the user's "that's exactly right" confirms it.

    Example: `deermem demo --root /tmp/deermem-demo`, then
    `deermem --root /tmp/deermem-demo --user demo --agent stale-vs-confirmed-confidence audit`;
    `deermem demo --learn`
    """
    clock = parse_timestamp(now)
    if clock is None:
        raise typer.BadParameter(f"not an ISO 8601 timestamp: {now!r}", param_hint="--now")
    if clock < EARLIEST_NOW:
        raise typer.BadParameter(
            f"{now!r} is before {format_timestamp(EARLIEST_NOW)}: the demo dates its facts "
            "up to a year before --now",
            param_hint="--now",
        )
    root = _demo_root(cli_context(ctx).root, root)
    if root is not None and root.is_dir() and any(root.iterdir()):
        # The demo writes a user and receipts of its own: never into a store in use.
        raise typer.BadParameter(
            f"{root} is not empty; choose an empty or new directory", param_hint="--root"
        )
    if learn:
        _learning(root, clock, as_json=as_json)
        return
    if root is None:
        with tempfile.TemporaryDirectory(prefix="deermem-demo-") as temporary:
            runs = run_demo(Path(temporary), clock)
    else:
        runs = run_demo(root, clock)
        # The store records what a store deermem creates records (hybrid-v1,
        # shadow on) and the cap its scenarios ran at: every later command runs
        # what the demo ended with — the `confidence` scopes were switched to
        # hybrid-v1 for the restore — and `why` explains against that cap.
        kept = new_store_settings(MemoryConfig(max_facts=DEMO_CAPACITY))
        write_store_settings(root, render_store_settings(kept))
    if as_json:
        print_json({"now": format_timestamp(clock), "scenarios": [_as_json(r) for r in runs]})
        return
    for run in runs:
        _render(run, clock)
    if root is not None:
        out_console.print(
            f"The store is in {escape(str(root))}; explore it with "
            f"`deermem --root {escape(shlex.quote(str(root)))} --user {DEMO_USER} --agent "
            f"{runs[0].modes[MODES[0]].agent} audit` (or `facts list`, `archive list`, `why ID`)."
        )
        out_console.print(
            f"It runs {POLICY_HYBRID_V1} with shadow mode on ({POLICY_CONFIDENCE} beside it), "
            "as every store deermem creates, so later commands rank, explain and gate every "
            f"scope under {POLICY_HYBRID_V1} — the *-{POLICY_CONFIDENCE} scopes too, as the "
            f"demo left them after switching to {POLICY_HYBRID_V1} for the restore. Each "
            "receipt keeps the policy that decided it."
        )


def _demo_root(global_root: Path | None, own_root: Path | None) -> Path | None:
    """Where the demo keeps its store: ``demo --root`` or the global ``--root`` (one place).

    Raises:
        typer.BadParameter: the two are given and name different directories.
    """
    if global_root is None or own_root is None:
        return own_root or global_root
    if own_root.resolve() != global_root.resolve():
        raise typer.BadParameter(
            f"{own_root} differs from the global --root {global_root}; give one of them",
            param_hint="--root",
        )
    return own_root


def _learning(root: Path | None, clock: datetime, *, as_json: bool) -> None:
    if root is None:
        with tempfile.TemporaryDirectory(prefix="deermem-demo-") as temporary:
            steps = run_learning(Path(temporary), clock)
    else:
        steps = run_learning(root, clock)
    if as_json:
        print_json(
            {
                "now": format_timestamp(clock),
                "learning": [
                    {"title": step.title, "report": step.result.report.to_dict()} for step in steps
                ],
            }
        )
        return
    scope = f"user {DEMO_USER!r}, agent {LEARNING_AGENT!r}"
    for step in steps:
        out_console.rule(f"[bold]{escape(step.title)}[/]")
        for number, text in enumerate(step.said):
            who = "user" if number % 2 == 0 else "assistant"
            out_console.print(f"  [dim]{who}:[/] {escape(text)}")
        render_update(step.result, scope, MemoryConfig().max_conversation_chars)
    out_console.print(
        "The model's answers were scripted; what deermem did with them was not: only "
        "proposals about the user, durable and descriptive are stored, a fact counts as "
        "confirmed only when the user's own words confirm it, and the capacity gate chose "
        "what left (with a receipt: `deermem why ID`)."
    )


def _render(run: ScenarioRun, now: datetime) -> None:
    scenario = run.scenario
    out_console.rule(f"[bold]{escape(scenario.title)}[/]")
    table = Table(box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for column in ("fact", "conf.", "confirmed", "hybrid", *MODES):
        table.add_column(column, justify="left" if column == "fact" else "right", no_wrap=True)
    for fact in scenario.facts:
        fact_id = str(fact["id"])
        confirmed = parse_timestamp(fact.get("lastConfirmedAt"))
        age = "never" if confirmed is None else f"{elapsed_days(now, confirmed):.0f} d ago"
        verdicts = [
            "[red]evicted[/]" if fact_id in run.modes[mode].evicted else "kept" for mode in MODES
        ]
        table.add_row(
            f"[bold]{fact_id}[/]" if fact_id == scenario.precious_id else fact_id,
            f"{float(fact['confidence']):.2f}",  # type: ignore[arg-type]
            age,
            f"{run.hybrid_scores[fact_id]:.4f}",
            *verdicts,
        )
    out_console.print(table)
    for mode in MODES:
        for receipt in run.modes[mode].receipts:
            for line in receipt.evicted:
                parts = components_text(line.components)
                out_console.print(
                    f"  {mode}: evicted {line.fact_id} — rank {line.rank} of {receipt.occupancy}, "
                    f"score {line.score:.4f} ({parts}){margin_text(line, receipt)}"
                    f" [dim]({receipt.receipt_id})[/]"
                )
                if receipt.shadow is not None:
                    shadow = receipt.shadow
                    verdict = "disagrees with" if shadow.disagrees else "agrees with"
                    out_console.print(
                        f"  {mode}: {shadow.policy} would evict {', '.join(shadow.would_evict)} "
                        f"and {verdict} confidence"
                    )
            if receipt.reserved_correction_slots:
                slots = receipt.reserved_correction_slots
                out_console.print(f"  {mode}: {slots} slot(s) reserved for corrections")
    last, entry = run.why.last_eviction
    out_console.print(
        f"  why {scenario.precious_id} (confidence): {run.why.status}; "
        f"{eviction_sentence(last, entry)}"
    )
    restore = run.restore
    if restore.restored:
        others = ", ".join(restore.evicted) or "nothing"
        out_console.print(
            f"  restore {scenario.precious_id} after switching to hybrid-v1: back in the "
            f"library; the gate evicted {others} to the archive instead"
        )
    else:
        out_console.print(f"  restore {scenario.precious_id}: evicted again")
    out_console.print()


def _as_json(run: ScenarioRun) -> dict[str, object]:
    scenario = run.scenario
    return {
        "name": scenario.name,
        "title": scenario.title,
        "maxFacts": scenario.max_facts,
        "preciousFactId": scenario.precious_id,
        "policies": {
            mode: {
                "agent": run.modes[mode].agent,
                "keptFactIds": sorted(fact.id for fact in run.modes[mode].kept),
                "evictedFactIds": list(run.modes[mode].evicted),
                "preciousKept": run.precious_kept(mode),
                "receipts": [receipt.to_dict() for receipt in run.modes[mode].receipts],
            }
            for mode in MODES
        },
        "shadow": next(
            (r.shadow.to_dict() for r in run.modes["shadow"].receipts if r.shadow is not None),
            None,
        ),
        "why": to_json(run.why) | {"fact": None},
        "restore": to_json(run.restore),
    }
