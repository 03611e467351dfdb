"""A LangGraph ``BaseStore`` over deermem: every item is a fact, every namespace a scope.

**Namespaces.** A namespace is ``(*labels, user)``: its last label is the user,
the labels before it name the agent bucket — so ``("memories", "alice")`` and
``("notes", "alice")`` are two scopes of alice, and ``("alice",)`` is alice's
default bucket (the one ``Memory.open(root, user="alice")`` reads). The labels
are kept in the bucket's name exactly as written (:func:`agent_of` —
``("memories",)`` is the bucket ``ns--memories``; any other character is
escaped), so ``list_namespaces`` gives back the namespaces as they were
written, read from the store's scopes; nothing else is recorded.

LangGraph refuses a label with a period, so a user id with one (an e-mail
address) cannot be a label as it is: write ``.`` as ``%2E`` and ``%`` as
``%25`` in the user label (``alice%2Eexample%2Ecom``); any other ``%`` is
refused, so each user id has one label and each label one user id.

**Values.** ``{"content": str}``, with optional ``"category"`` (a category or
an own label) and ``"confidence"`` (0–1); nothing else, so nothing is dropped.
The key is the fact id: letters, digits, ``_`` and ``-``, up to 250 (LangMem's
UUID keys fit); any other key is refused. ``put`` of a new key adds a fact
through the capacity gate; of an existing key, changes it; of a key whose
fact was deleted, restores the archived fact (its history and receipts stay)
and then changes it (when another key now says the archived text, the archived
copy is purged and the key starts over); content an archived fact holds under
another key (compared as stored, secrets redacted) is refused, naming that key. ``put``
is an upsert, as in LangGraph's stores: concurrent puts (and deletes) of one
key all succeed, the last writer wins. A put whose fact the gate evicts at
once raises :class:`EvictedOnPutError` with the receipts: ``put`` returns
nothing, so silence would be forgetting. ``put(..., None)`` and ``delete`` archive the fact
with a receipt; deleting a missing key does nothing (LangMem deletes what the
model names).

**Reads.** ``get`` returns the active fact. ``search`` covers every namespace
that starts with the prefix, label by label (``("memories",)`` finds every
user's ``("memories", …)``; ``()`` finds everything). With a ``query`` it
ranks with deermem's search (``score``: the result's ``relevance``, in
[0, 1]), without one it lists, most recently updated first. ``filter``
matches ``content``, ``category`` and ``confidence`` (equality, or ``$eq $ne
$gt $gte $lt $lte``). Ops run in order, so a read after a write in one batch
sees the write; every op is checked first (the memory's fact rules, and the
duplicate rule among the puts and the facts that stay), so a bad op means
nothing is written. TTLs are not supported
(refused); ``index`` is ignored, as by LangGraph's stores without an index:
every fact is searchable.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from deermem.config import MemoryConfig
from deermem.errors import (
    ArchivedFactError,
    DeerMemError,
    DuplicateFactError,
    FactNotFoundError,
    FactRevisionConflict,
    FactValidationError,
    Withheld,
)
from deermem.memory import Memory
from deermem.model import (
    DEFAULT_AGENT,
    MAX_AGENT_NAME_LENGTH,
    Fact,
    Scope,
    check_fact_id,
    duplicate_key,
    parse_timestamp,
    redact,
)
from deermem.results import FactPatch, error_location
from deermem.store import EvictionReceipt

__all__ = [
    "AGENT_PREFIX",
    "DeerMemStore",
    "EvictedOnPutError",
    "agent_of",
    "labels_of",
    "namespace_of",
    "scope_of",
]

AGENT_PREFIX: Final = "ns--"
"""How the bucket of a namespace's labels begins (an agent name no person writes)."""

_VALUE_KEYS: Final = frozenset({"content", "category", "confidence"})
_OPERATORS: Final[Mapping[str, Callable[[Any, Any], bool]]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
_PLAIN: Final = re.compile(r"[a-z0-9]")
_ESCAPE: Final = re.compile(r"-([0-9a-f]{6})")
_USER_ESCAPE: Final = re.compile(r"%(?!2E|25)")
_PUT_ATTEMPTS: Final = 8
"""How often a put starts over when other writers keep moving its fact (each start over means
one of theirs went through; puts alone need at most two attempts: a create, then an update)."""


class EvictedOnPutError(DeerMemError):
    """A put's fact was evicted by the capacity gate at once: it is in the archive, not active.

    Attributes:
        namespace: the namespace of the put.
        key: the fact id (archived, unless the memory's ``eviction_mode`` is ``delete``:
            ``restore`` brings it back through the gate).
        receipts: the receipts of the put's commit (content-free).
    """

    def __init__(
        self,
        namespace: tuple[str, ...],
        key: str,
        receipts: tuple[EvictionReceipt, ...],
        *,
        archived: bool = True,
    ) -> None:
        self.namespace = namespace
        self.key = key
        self.receipts = receipts
        ids = ", ".join(r.receipt_id for r in receipts if r.receipt_id) or "none"
        # Under eviction_mode: delete nothing can be restored: the message never says archived.
        went = "archived" if archived else "deleted"
        super().__init__(
            f"the memory of {namespace!r} is full and the capacity gate {went} {key!r} at "
            f"once, ranking it below every stored fact (receipts: {ids})"
        )


# --- namespaces <-> scopes ----------------------------------------------------------------


def agent_of(labels: Sequence[str]) -> str:
    """The agent bucket of a namespace's labels before the user (``()``: the default bucket).

    ``ns--`` and the labels joined by ``--``; in a label, ``a-z`` and ``0-9``
    stand for themselves and any other character is ``-`` and its code point in
    six hex digits. Escapes and separators never meet, so the names of two
    label tuples differ whenever the tuples do, letter case included.
    """
    if not labels:
        return DEFAULT_AGENT
    encoded = (
        "".join(c if _PLAIN.fullmatch(c) else f"-{ord(c):06x}" for c in label) for label in labels
    )
    return AGENT_PREFIX + "--".join(encoded)


def labels_of(agent: str) -> tuple[str, ...] | None:
    """The labels :func:`agent_of` made ``agent`` from; ``None``: a bucket it did not make."""
    if agent == DEFAULT_AGENT:
        return ()
    if not agent.startswith(AGENT_PREFIX):
        return None
    labels = []
    for part in agent.removeprefix(AGENT_PREFIX).split("--"):
        label = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), part)
        if not part or agent_of((label,)) != AGENT_PREFIX + part:
            return None
        labels.append(label)
    return tuple(labels)


def scope_of(namespace: tuple[str, ...]) -> Scope:
    """The scope of a namespace: the last label is the user (``%2E`` a period), the rest the agent.

    Raises:
        InvalidNamespaceError: an empty namespace, a user label with a ``%``
            that is not ``%2E`` or ``%25``, or labels before the user too long
            for a bucket's name (:data:`MAX_AGENT_NAME_LENGTH`, as encoded).
        UnsafeIdentifierError: the user id breaks deermem's rules (a control
            character, more than 1,024 bytes ...).
    """
    if not namespace:
        raise InvalidNamespaceError("a namespace needs at least one label: the user")
    *labels, user = namespace
    if _USER_ESCAPE.search(user):
        raise InvalidNamespaceError(
            f"user label {user!r}: write '.' as '%2E' and '%' as '%25'; no other '%' is read"
        )
    agent = agent_of(labels)
    if len(agent) > MAX_AGENT_NAME_LENGTH:
        # The bucket's name is deermem's encoding of the labels, which the caller never wrote:
        # the refusal is about the labels, described by their length (they are caller text).
        raise InvalidNamespaceError(
            f"the labels before the user take {len(agent)} characters as a bucket name; at "
            f"most {MAX_AGENT_NAME_LENGTH}: 'ns--', then a-z and 0-9 take one character each, "
            "any other character 7, and 2 go between labels"
        )
    return Scope.of(user.replace("%2E", ".").replace("%25", "%"), agent)


def namespace_of(scope: Scope) -> tuple[str, ...] | None:
    """The namespace of a scope; ``None`` for a scope no namespace names."""
    labels = labels_of(scope.agent)
    if labels is None or scope.user_id is None:
        return None
    return (*labels, scope.user_id.replace("%", "%25").replace(".", "%2E"))


# --- the store ------------------------------------------------------------------------------


class DeerMemStore(BaseStore):
    """deermem as LangGraph's long-term memory store (module docstring: what maps to what).

    Args:
        memory: an unscoped memory (``Memory.open_unscoped(root_or_url, config)``):
            the store serves every namespace, as LangGraph's stores do.
    """

    supports_ttl = False

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @classmethod
    def open(
        cls, root_or_url: str | os.PathLike[str] | None = None, config: MemoryConfig | None = None
    ) -> DeerMemStore:
        """Open a store as :meth:`Memory.open_unscoped` does: a Markdown directory, or the
        configuration's database (a ``postgresql://`` URL is the configuration's ``store``)."""
        config = config if config is not None else MemoryConfig()
        if isinstance(root_or_url, str) and root_or_url.startswith(("postgresql:", "postgres:")):
            config = config.model_copy(update={"store": root_or_url})
            root_or_url = None
        return cls(Memory.open_unscoped(root_or_url, config))

    def close(self) -> None:
        """Release the memory's connections (its queue, model and search index)."""
        self.memory.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:  # the whole batch is checked before anything is written
            _check(op)
        self._check_duplicates(ops)
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # --- one op -----------------------------------------------------------------------

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        return self._list_namespaces(op)

    def _scoped(self, namespace: tuple[str, ...]) -> Memory:
        scope = scope_of(namespace)
        return self.memory.scoped(user=scope.user_id, agent=scope.agent)

    def _get(self, op: GetOp) -> Item | None:
        if not op.namespace or not _is_fact_id(op.key):
            return None  # no fact can be there
        fact = self._scoped(op.namespace).snapshot().get(op.key)
        return None if fact is None else _item(op.namespace, fact)

    def _put(self, op: PutOp) -> None:
        """Set the key's fact to the value, or archive it: an upsert, the last writer wins.

        LangGraph's ``put`` is an upsert, and its own stores let concurrent
        puts of one key all succeed (parallel branches and tool calls do
        this). Each step below is one deermem transaction that needs no
        earlier read to be current (an update or a delete without an expected
        revision), except where the key's fact moves between active, archived
        and absent; a step that finds it moved starts over from a fresh read.
        """
        memory = self._scoped(op.namespace)
        if op.value is None:
            # Nothing active under the key (or another writer archived it first): nothing to do.
            with contextlib.suppress(FactNotFoundError):
                memory.delete_fact(op.key)
            return
        content, category, confidence = _fields(op.value)
        raced: DeerMemError | None = None
        for _ in range(_PUT_ATTEMPTS):
            try:
                self._set(memory, op, content, category, confidence)
                return
            except (FactRevisionConflict, FactNotFoundError) as error:
                raced = error  # the key's fact moved since it was read: read again
            except ArchivedFactError as error:
                if error.fact_id != op.key:
                    raise FactValidationError(
                        "value.content",
                        content,  # described by its length, never quoted
                        f"archived fact {error.fact_id!r} says the same: put it under its "
                        f"key {error.fact_id!r} to bring it back",
                    ) from None
                raced = error  # archived since it was read: restore it instead
        # Each attempt failed because another writer moved the fact between its read and write.
        assert raced is not None
        raise raced

    def _set(
        self,
        memory: Memory,
        op: PutOp,
        content: str,
        category: str | None,
        confidence: float | None,
    ) -> None:
        """One attempt of a put of a value (see :meth:`_put` for the races it may lose).

        Raises:
            FactRevisionConflict, FactNotFoundError, ArchivedFactError (naming
            the key): the fact moved between the read and the write.
            ArchivedFactError naming another fact: the content is its.
        """
        current = memory.snapshot().get(op.key)
        if current is not None:
            if (
                content.strip() != current.content
                or category not in (None, _category(current))
                or confidence not in (None, current.confidence)
            ):
                # Every field the value gives, in one change: a field left out because the read
                # showed it equal could since have been changed by a concurrent put.
                memory.update_fact(
                    op.key, content=content, category=category, confidence=confidence
                )
            return
        if _archived(memory, op.key):
            try:
                restored = memory.restore(op.key)
            except DuplicateFactError:
                # Its archived text is another active fact's now, so it cannot come back as it
                # was; the put replaces that text anyway. Unless the new text is a duplicate too
                # (refused, nothing changed), the archived copy goes (its receipts stay) and the
                # key starts over below.
                self._refuse_duplicate(memory, op.key, content)
                memory.purge(op.key)
            else:
                if not restored.restored:
                    raise self._evicted(op, restored.receipts)
                memory.update_fact(
                    op.key, content=content, category=category, confidence=confidence
                )
                return
        result = memory.create_fact(
            content,
            category=category or "context",
            confidence=0.5 if confidence is None else confidence,
            fact_id=op.key,
        )
        if result.fact_id != op.key:
            # A keyed create stores under its key or raises (an archived twin is refused
            # before anything is written), so any other answer is None: archived at once.
            raise self._evicted(op, result.receipts)

    def _evicted(self, op: PutOp, receipts: tuple[EvictionReceipt, ...]) -> EvictedOnPutError:
        archiving = self.memory.config.eviction_mode == "archive"
        return EvictedOnPutError(op.namespace, op.key, receipts, archived=archiving)

    def _refuse_duplicate(self, memory: Memory, key: str, content: str) -> None:
        """Raise :class:`DuplicateFactError` when an active fact other than ``key`` says
        ``content``, compared as it would be stored (trimmed, secrets redacted)."""
        said = self._said(content)
        other = next(
            (
                f.id
                for f in memory.snapshot().facts
                if f.id != key and duplicate_key(f.content) == said
            ),
            None,
        )
        if other is not None:
            raise DuplicateFactError(other)

    def _said(self, content: str) -> str:
        """The duplicate key of a put's text as the memory would store it."""
        checked = FactPatch.checked(content=content).content
        assert checked is not None  # given, so checked
        stored = redact(checked).text if self.memory.config.redact_secrets else checked
        return duplicate_key(stored)

    def _check_duplicates(self, ops: Sequence[Op]) -> None:
        """Refuse a batch one of whose puts would say what another fact says, before any runs.

        The memory applies the duplicate rule as each put is written, so a batch
        refused at its second put would leave its first written. Each put is
        compared here, as its text will be stored (trimmed, secrets redacted),
        with the facts of its namespace as they will be when it runs: the
        active facts, changed by the puts and deletes before it in the batch.
        A lone put needs no such check: its own write refuses it, writing
        nothing.

        Raises:
            DuplicateFactError: a put says what a stored fact that stays says.
            FactValidationError: a put says what an earlier put of the batch
                (under another key of its namespace) says.
        """
        puts = [op for op in ops if isinstance(op, PutOp)]
        if len(puts) < 2:
            return
        # Invariant: per namespace, each active fact's key -> its duplicate key, as of the op
        # being checked; put_keys are the keys the batch's puts so far have set.
        held: dict[tuple[str, ...], dict[str, str]] = {}
        put_keys: set[tuple[tuple[str, ...], str]] = set()
        for op in puts:
            if op.namespace not in held:
                facts = self._scoped(op.namespace).snapshot().facts
                held[op.namespace] = {fact.id: duplicate_key(fact.content) for fact in facts}
            keys = held[op.namespace]
            if op.value is None:
                keys.pop(op.key, None)
                continue
            content = op.value["content"]
            said = self._said(content)
            other = next((k for k, s in keys.items() if s == said and k != op.key), None)
            if other is not None and (op.namespace, other) in put_keys:
                raise FactValidationError(
                    "value.content",
                    content,
                    f"the batch's put of {other!r} says the same (compared ignoring case, "
                    "secrets redacted): a fact is stored once. Nothing was written",
                )
            if other is not None:
                raise DuplicateFactError(other)
            keys[op.key] = said
            put_keys.add((op.namespace, op.key))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        """The page of a search; with a query, a recall is counted for each item returned.

        Each scope is searched without counting (``record=False``): the filter,
        the ranking across scopes and the page apply after, and a recall counts
        what the agent is shown, not every fact that matched. So a search here
        records no missed recalls either: which archived facts it would have
        returned cannot be said for a page of several scopes.
        """
        found: list[tuple[float | None, str, tuple[str, ...], Fact]] = []
        for namespace in self._namespaces(op.namespace_prefix):
            memory = self._scoped(namespace)
            if op.query:
                everything = len(memory.snapshot().facts)
                hits = memory.search(op.query, top_k=everything, record=False)
                found.extend((h.relevance, h.fact.updatedAt, namespace, h.fact) for h in hits)
            else:
                found.extend((None, f.updatedAt, namespace, f) for f in memory.list_facts())
        matcher = _matcher(op.filter)
        kept = [entry for entry in found if matcher(_value(entry[3]))]
        # Best first with a query, most recently updated first without; then a fixed order.
        kept.sort(key=lambda e: (e[2], e[3].id))
        kept.sort(key=lambda e: e[1], reverse=True)
        if op.query:
            kept.sort(key=lambda e: e[0] or 0.0, reverse=True)
        page = kept[op.offset : op.offset + op.limit]
        if op.query:
            shown: dict[tuple[str, ...], list[str]] = {}
            for _, _, namespace, fact in page:
                shown.setdefault(namespace, []).append(fact.id)
            for namespace, fact_ids in shown.items():
                self._scoped(namespace).record_access(fact_ids)
        return [_search_item(namespace, fact, score) for score, _, namespace, fact in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [
            namespace
            for namespace in self._namespaces(())
            if all(_matches(namespace, c) for c in op.match_conditions or ())
            and self._scoped(namespace).snapshot().facts
        ]
        if op.max_depth is not None:
            namespaces = sorted({namespace[: op.max_depth] for namespace in namespaces})
        return namespaces[op.offset : op.offset + op.limit]

    def _namespaces(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        """Every namespace of the store's scopes that starts with ``prefix``, sorted."""
        named = (namespace_of(scope) for scope in self.memory.store.scopes())
        return sorted(n for n in named if n is not None and n[: len(prefix)] == prefix)


# --- checks and conversions --------------------------------------------------------------------


def _check(op: object) -> None:
    """Refuse an op deermem cannot carry out as written, before any op of its batch runs."""
    if not isinstance(op, GetOp | SearchOp | PutOp | ListNamespacesOp):
        raise ValueError(f"unknown store operation: {type(op).__name__}")
    validate_op_namespace(op)
    if isinstance(op, PutOp):
        if op.ttl is not None:
            raise NotImplementedError("DeerMemStore does not expire items (no ttl)")
        scope_of(op.namespace)
        if not _is_fact_id(op.key):
            check_fact_id(op.key)  # raises, naming the rule
        if op.value is not None:
            content, category, confidence = _fields(op.value)
            # The memory's own rules (length, blank, range, control characters, a category's
            # near miss), which its write would apply only when the ops before it have run.
            try:
                FactPatch.checked(content=content, category=category, confidence=confidence)
            except FactValidationError as error:
                raise error.as_field(f"value.{error.field}") from None  # as the caller wrote it
    elif isinstance(op, SearchOp):
        _matcher(op.filter)


def _archived(memory: Memory, fact_id: str) -> bool:
    try:
        memory.get_archived(fact_id)
    except FactNotFoundError:
        return False
    return True


def _is_fact_id(key: object) -> bool:
    try:
        check_fact_id(key)
    except FactValidationError:
        return False
    return True


def _fields(value: Mapping[str, Any]) -> tuple[str, str | None, float | None]:
    """``(content, category, confidence)`` of a put's value; anything else is refused."""
    if not isinstance(value, Mapping):
        raise FactValidationError("value", Withheld(type(value).__name__), "expected a mapping")
    unknown = sorted(str(k) for k in value if k not in _VALUE_KEYS)
    if unknown:
        raise FactValidationError(
            "value",
            unknown,
            "a fact holds only 'content', 'category' and 'confidence' (so nothing is dropped)",
        )
    content = value.get("content")
    if not isinstance(content, str):
        raise FactValidationError(
            "value.content", Withheld(type(content).__name__), "expected a string (one fact's text)"
        )
    category = value.get("category")
    if category is not None and not isinstance(category, str):
        raise FactValidationError("value.category", category, "expected a string")
    confidence = value.get("confidence")
    if confidence is not None and (
        isinstance(confidence, bool) or not isinstance(confidence, int | float)
    ):
        raise FactValidationError("value.confidence", confidence, "expected a number in [0, 1]")
    return content, category, None if confidence is None else float(confidence)


def _category(fact: Fact) -> str:
    return fact.categoryExtension or fact.category


def _value(fact: Fact) -> dict[str, Any]:
    return {"content": fact.content, "category": _category(fact), "confidence": fact.confidence}


def _time(stamp: str) -> datetime:
    moment = parse_timestamp(stamp)
    if moment is None:  # a fact written without a date (hand-edited or very old)
        moment = parse_timestamp("1970-01-01T00:00:00Z")
    assert moment is not None
    return moment


def _item(namespace: tuple[str, ...], fact: Fact) -> Item:
    return Item(
        value=_value(fact),
        key=fact.id,
        namespace=namespace,
        created_at=_time(fact.createdAt),
        updated_at=_time(fact.updatedAt or fact.createdAt),
    )


def _search_item(namespace: tuple[str, ...], fact: Fact, score: float | None) -> SearchItem:
    return SearchItem(
        namespace,
        fact.id,
        _value(fact),
        _time(fact.createdAt),
        _time(fact.updatedAt or fact.createdAt),
        score,
    )


def _matcher(conditions: Mapping[str, Any] | None) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate for a search's ``filter``; an unknown key or operator is refused."""
    if not conditions:
        return lambda value: True
    checks: list[Callable[[Mapping[str, Any]], bool]] = []
    for name, wanted in conditions.items():
        if name not in _VALUE_KEYS:
            # the key is the caller's text (a pasted secret, say): described, never quoted
            raise ValueError(
                f"filter key {error_location([name], _VALUE_KEYS)}: a fact's value holds "
                "only content, category, confidence"
            )
        if isinstance(wanted, Mapping):
            for operator, operand in wanted.items():
                compare = _OPERATORS.get(operator)
                if compare is None:
                    raise ValueError(
                        f"filter {name!r}: unknown operator "
                        f"{error_location([operator], _OPERATORS)} "
                        f"(expected one of {', '.join(_OPERATORS)})"
                    )
                checks.append(_comparison(name, compare, operand))
        else:
            checks.append(_comparison(name, _OPERATORS["$eq"], wanted))
    return lambda value: all(check(value) for check in checks)


def _comparison(
    name: str, compare: Callable[[Any, Any], bool], operand: Any
) -> Callable[[Mapping[str, Any]], bool]:
    def check(value: Mapping[str, Any]) -> bool:
        try:
            return compare(value[name], operand)
        except TypeError:  # a number compared with a string: no match
            return False

    return check


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = condition.path
    if not path:
        return True
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(want in ("*", label) for want, label in zip(path, part, strict=True))
