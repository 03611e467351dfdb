"""The regret scenario shared by the Markdown-only and the both-stores regret tests.

Ten facts, nine fresh ones of confidence 0.70–0.78 and one old one (400 days,
confidence 0.80, "Emacs"). At the cap, ``confidence`` evicts the weakest
fresh fact; ``hybrid-v1`` would evict the old one, whose freshness has
decayed — so in shadow mode the old fact carries a shadow mark.
"""

from __future__ import annotations

from typing import Any

from deermem import Memory
from deermem.store.records import RegretEvent
from tests.wire_support import Clock, conversation, stored_fact

OLD = "fact_old"
OLD_TEXT = "The user's favourite editor is Emacs"
CONFIRMING = conversation("Emacs again for this one.", "Opened it in Emacs.", "Perfect!", "Bye.")
CHATTING = conversation("Let us talk about editors.", "Sure, editors it is.")
POLICIES = ("confidence", "hybrid-v1")


def library() -> list[dict[str, Any]]:
    fresh = [
        stored_fact(f"fact_f{n:02d}", f"Fresh fact number {n}", confidence=0.70 + n / 100)
        for n in range(9)
    ]
    return [stored_fact(OLD, OLD_TEXT, confidence=0.80, age_days=400), *fresh]


def events(memory: Memory) -> list[RegretEvent]:
    return list(memory.store.regret_events(memory.scope))


def kinds(memory: Memory) -> list[tuple[str, str, str, str]]:
    return [(e.kind, e.role, e.policy_version, e.fact_id) for e in events(memory)]


def evict_one(memory: Memory, clock: Clock, text: str = "A confident new fact") -> str:
    clock.advance(hours=1)
    result = memory.create_fact(text, confidence=0.85)
    [evicted] = result.evicted
    return evicted
