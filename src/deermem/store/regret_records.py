"""Regret: the store's records of evidence that a fact should not have left.

A *regret event* says that a fact a capacity policy evicted — or, in shadow
mode, would have evicted — turned out to be wanted after all. It is written by
the commit that observed it (a relearned or restored fact comes back in the
same commit; a search records its missed recalls with its recall counts), and
it holds no content: ids, a category, policy versions, times, kinds, and for a
search the rank and a digest of the query.

The kinds, and the policy each counts against:

* ``relearned`` — a proposal (extraction, import, manual create) said again
  what an archived fact says (the duplicate rule, :func:`deermem.model.duplicate_key`),
  so the archived fact came back through the capacity gate with its history;
  under the shadow policy: the proposal repeated a fact the shadow would have
  evicted;
* ``restored`` — a user or tool restored the archived fact;
* ``missed_recall`` — a search's top results would have included the archived
  fact had it still been in the library;
* ``confirmed``, ``recalled``, ``corrected`` — shadow only: the user confirmed,
  a search returned, or the user corrected (a contradiction removal) a fact
  that the shadow policy would have evicted but the active policy kept.

Each event names its ``role``: ``active`` counts against the policy that
evicted the fact, ``shadow`` against the policy that would have. A fact both
evicted gets one event per policy.

A :class:`ShadowMark` remembers that the shadow policy would have evicted a
fact that the active policy kept; marks live while the fact is in the library
and travel with it into its archive entry when it leaves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from deermem.model import duplicate_key

__all__ = [
    "REGRET_KINDS",
    "REGRET_ROLES",
    "RegretEvent",
    "RegretKind",
    "RegretRole",
    "ShadowMark",
    "query_digest",
]

RegretKind = Literal["relearned", "restored", "missed_recall", "confirmed", "recalled", "corrected"]
REGRET_KINDS: Final[tuple[RegretKind, ...]] = get_args(RegretKind)
RegretRole = Literal["active", "shadow"]
REGRET_ROLES: Final[tuple[RegretRole, ...]] = get_args(RegretRole)


def query_digest(query: str) -> str:
    """``sha256:`` and 16 hex digits of the query, stripped and case-folded.

    Lets a reader group the searches that asked the same thing without
    storing what they asked. It is a digest, not encryption: a short query
    can be found by hashing guesses.
    """
    key = duplicate_key(query).encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(key).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class ShadowMark:
    """The shadow policy would have evicted this fact; the active policy kept it.

    Attributes:
        policy_version: the shadow policy, e.g. ``hybrid-v1``.
        since: when it first would have (ISO UTC).
        receipt_id: the capacity receipt whose ``shadow.wouldEvict`` named it.
        category: the fact's category then.
    """

    policy_version: str
    since: str
    receipt_id: str | None
    category: str

    def to_dict(self) -> dict[str, object]:
        return {
            "policyVersion": self.policy_version,
            "since": self.since,
            "receiptId": self.receipt_id,
            "category": self.category,
        }

    @classmethod
    def from_dict(cls, data: object) -> ShadowMark | None:
        """Read a stored mark; ``None`` when it is not a usable one."""
        if not isinstance(data, Mapping):
            return None
        policy, since = data.get("policyVersion"), data.get("since")
        if not isinstance(policy, str) or not policy or not isinstance(since, str):
            return None
        receipt, category = data.get("receiptId"), data.get("category")
        return cls(
            policy_version=policy,
            since=since,
            receipt_id=receipt if isinstance(receipt, str) and receipt else None,
            category=category if isinstance(category, str) and category else "context",
        )


@dataclass(frozen=True, slots=True)
class RegretEvent:
    """One piece of evidence against one policy's (counterfactual) eviction of one fact.

    Attributes:
        kind: what happened (see the module docstring).
        occurred_at: when (ISO UTC, the injected clock).
        fact_id: the fact.
        category: its category.
        policy_version: the policy the event counts against.
        role: ``active`` — that policy evicted the fact; ``shadow`` — it
            would have, in shadow mode.
        evicted_at: when the fact left (``active``) or was first marked (``shadow``).
        receipt_id: the receipt of that eviction, when known.
        reason: why the fact left the library (``capacity`` for a policy's
            eviction; ``deleted``, ``staleness`` ... for removals, which the
            report does not count against a policy).
        trigger: what caused the event: ``extraction``, ``manual``,
            ``import``, ``restore`` or ``search``.
        query_digest: for search events, :func:`query_digest` of the query.
        rank: for search events, the fact's place in the results (1 = first).
    """

    kind: RegretKind
    occurred_at: str
    fact_id: str
    category: str
    policy_version: str
    role: RegretRole
    evicted_at: str
    receipt_id: str | None
    reason: str
    trigger: str
    query_digest: str | None = None
    rank: int | None = None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.kind,
            "occurredAt": self.occurred_at,
            "factId": self.fact_id,
            "category": self.category,
            "policyVersion": self.policy_version,
            "role": self.role,
            "evictedAt": self.evicted_at,
            "receiptId": self.receipt_id,
            "reason": self.reason,
            "trigger": self.trigger,
        }
        if self.query_digest is not None:
            out["queryDigest"] = self.query_digest
        if self.rank is not None:
            out["rank"] = self.rank
        return out

    @classmethod
    def from_dict(cls, data: object) -> RegretEvent | None:
        """Read a stored event leniently; ``None`` when it is not a usable one."""
        if not isinstance(data, Mapping):
            return None
        kind, role = data.get("kind"), data.get("role")
        texts = [data.get(key) for key in ("occurredAt", "factId", "policyVersion", "evictedAt")]
        if kind not in REGRET_KINDS or role not in REGRET_ROLES:
            return None
        if not all(isinstance(text, str) and text for text in texts):
            return None
        occurred, fact_id, policy, evicted = (str(text) for text in texts)
        rank = data.get("rank")
        return cls(
            kind=kind,
            occurred_at=occurred,
            fact_id=fact_id,
            category=_text(data.get("category")) or "context",
            policy_version=policy,
            role=role,
            evicted_at=evicted,
            receipt_id=_text(data.get("receiptId")),
            reason=_text(data.get("reason")) or "capacity",
            trigger=_text(data.get("trigger")) or "unknown",
            query_digest=_text(data.get("queryDigest")),
            rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
        )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
