"""No secret is ever stored, on both stores: every write path, every kind (issue 26, item 3).

Each test writes fakes of every shape (tests.privacy.fakes) through one path
and then reads the whole store past deermem (every file under the root, every
row of every table and ``pg_dump``): no character run of any secret may be
there, and the path's result names the kinds redacted.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from deermem import FactValidationError, Memory, MemoryConfig
from deermem.model import Fact, Scope, format_timestamp, marker
from deermem.store import ChangeSet, FactWrite, Section
from deermem.store.migrate import MigrationReport, migrate, opened_location
from deermem.store.records import (
    ArchiveEntry,
    EvictionReceipt,
    ReceiptEntry,
    RegretEvent,
    ShadowMark,
    UsageEntry,
)
from deermem.testing import Reply, ScriptedChatServer
from tests.privacy.fakes import MAKERS, Fake
from tests.privacy.stored import store_text
from tests.store_contract.conftest import Stores
from tests.wire_support import answer, conversation, model_settings, new_fact

NOW = datetime(2026, 8, 13, tzinfo=UTC)


def fakes(seed: int) -> list[Fake]:
    """One fake of every shape (15), the same for a seed."""
    rng = random.Random(seed)
    return [make(rng) for make in MAKERS.values()]


def every_kind(items: list[Fake]) -> list[str]:
    return sorted({fake.kind for fake in items})


def said(fake: Fake) -> str:
    """The fake as a person would write it in a fact (content of at most one line or a block)."""
    return f"the deploy uses {fake.snippet} today"


def assert_nowhere(stores: Stores, items: list[Fake]) -> str:
    """No secret of ``items`` is anywhere in the store (16 characters of it at most)."""
    text = store_text(stores.kind, stores.root, stores.url)
    for fake in items:
        probe = fake.secret[-16:] if len(fake.secret) >= 16 else fake.secret
        assert probe not in text, f"a {fake.kind} is stored"
    return text


def open_memory(stores: Stores, **settings: object) -> Memory:
    return stores.memory(MemoryConfig(**settings), clock=lambda: NOW)


def test_create_and_update_store_markers_and_say_which_kinds(stores: Stores) -> None:
    memory = open_memory(stores)
    items = fakes(1)
    kinds: set[str] = set()
    for fake in items:
        created = memory.create_fact(said(fake), category="context", topics=["deploy"])
        assert created.fact_id is not None
        assert marker(fake.kind) in created.fact.content
        kinds.update(created.redacted)
    assert sorted(kinds) == every_kind(items)
    plain = memory.create_fact("I deploy on Fridays").fact_id
    assert plain is not None
    more = fakes(2)
    for fake in more:
        # Worded apart from the created facts: redacted, the same wording would be their text.
        again = f"Again: {said(fake)}"
        updated = memory.update_fact(plain, content=again, category=f"ops {fake.kind}")
        assert marker(fake.kind) in updated.content
        memory.update_fact(plain, content="I deploy on Fridays")
    assert_nowhere(stores, items + more)


def test_a_text_that_its_markers_would_carry_past_its_limit_is_refused(stores: Stores) -> None:
    # A 3,991-character note ending in a short password was stored as 4,003 characters (a
    # category of 63 as 75): what a reader got back could not be written back (an update
    # with the category as stored, a LangGraph put of what get returned) — refused as over
    # the limit. Now the limit holds for the text as stored, so the write is refused.
    memory = open_memory(stores)
    note = ("Billing notes: " + "x" * 3960 + " db pwd=Xk9mQ2vL")[:4000]
    with pytest.raises(FactValidationError) as caught:
        memory.create_fact(note)
    assert caught.value.field == "content"
    assert str(caught.value) == (
        "field 'content' has a text of 3,991 characters; expected at most 4,000 characters "
        "also with its secrets replaced by [redacted: KIND] markers, as it is stored; "
        "found 4,003"
    )
    category = "db pwd=Xk9mQ2vL " + "x" * 47
    with pytest.raises(FactValidationError, match="found 75"):
        memory.create_fact("Deploys on Fridays", category=category)
    assert memory.list_facts() == ()
    # What fits as stored is written, and written back as it reads.
    fits = memory.create_fact("Deploys on Fridays", category="db pwd=Xk9mQ2vL " + "x" * 30)
    assert fits.fact_id is not None
    stored = memory.get_fact(fits.fact_id)
    label = stored.categoryExtension or stored.category
    assert "[redacted: password]" in label
    again = memory.update_fact(stored.id, content=stored.content, category=label, confidence=0.9)
    assert (again.content, again.categoryExtension) == (stored.content, label)


def test_every_text_field_of_an_import_is_redacted(stores: Stores) -> None:
    memory = open_memory(stores)
    items = fakes(3)
    facts = []
    for number, fake in enumerate(items):
        facts.append(
            {
                "id": f"fact_{number:04d}",
                "content": said(fake),
                "title": fake.snippet,
                "topics": [fake.snippet[:60]],
                "source": {"type": "conversation", "threadId": "t-1", "note": fake.snippet},
                "sourceError": said(fake),
                "ownField": {"nested": [fake.snippet]},
                # Times are kept as written when they do not read as times (the original's
                # files hold such): then they are text like any other.
                "createdAt": said(fake),
                "updatedAt": fake.snippet,
                "lastConfirmedAt": said(fake),
            }
        )
    document = {
        "facts": facts,
        "user": {"workContext": {"summary": said(items[0]), "updatedAt": format_timestamp(NOW)}},
    }
    result = memory.import_document(document)
    assert result.redacted == tuple(every_kind(items))
    assert len(memory.list_facts()) == len(items)
    assert marker(items[0].kind) in memory.summaries().user["workContext"].summary
    assert_nowhere(stores, items)


def test_a_summary_committed_to_the_store_is_redacted(stores: Stores) -> None:
    store = stores()
    items = fakes(4)
    result = store.commit(
        Scope.of("alice"),
        ChangeSet(
            now=NOW,
            summaries={
                ("user", "workContext"): " and ".join(said(f) for f in items[:7]),
                ("history", "recentMonths"): Section(
                    summary=" and ".join(said(f) for f in items[7:]), updatedAt="2026-08-01"
                ),
            },
        ),
    )
    assert result.redacted == tuple(every_kind(items))
    assert_nowhere(stores, items)


def test_restoring_an_archive_entry_written_before_redaction_stores_no_secret(
    stores: Stores,
) -> None:
    # An archive entry from before redaction existed: written with it off.
    items = fakes(5)
    old = Fact.from_dict(
        {"id": "fact_old", "content": " ".join(said(f) for f in items), "createdAt": "2026-01-01"}
    )
    entry = ArchiveEntry(old, "2026-08-01T00:00:00Z", "capacity", "manual", None)
    unredacted = stores(MemoryConfig(redact_secrets=False))
    unredacted.commit(Scope.of("alice"), ChangeSet(now=NOW, archive_puts=(entry,)))
    memory = open_memory(stores)
    restored = memory.restore("fact_old")
    assert restored.restored
    assert restored.redacted == tuple(every_kind(items))
    assert marker(items[0].kind) in memory.get_fact("fact_old").content
    assert_nowhere(stores, items)


def test_redact_secrets_off_keeps_the_text_as_written(stores: Stores) -> None:
    memory = open_memory(stores, redact_secrets=False)
    (fake,) = fakes(6)[4:5]
    created = memory.create_fact(said(fake))
    assert created.redacted == ()
    assert created.fact.content == said(fake)


def test_a_model_that_proposes_a_key_stores_a_marker_and_never_sees_the_conversations_keys(
    stores: Stores,
) -> None:
    items = fakes(7)
    with ScriptedChatServer() as server:
        memory = open_memory(stores, model=model_settings(server))
        proposed = [new_fact(said(fake)) for fake in items]
        server.enqueue(Reply.text(answer(newFacts=proposed)))
        chat = conversation(*(f"please remember {said(fake)}" for fake in items))
        try:
            report = memory.learn("thread-1", chat).report
        finally:
            memory.close(timeout=5)  # its HTTP client holds a connection
        sent = json.dumps(server.requests[0].messages)
    assert report.outcome == "applied", report
    assert report.redacted == tuple(every_kind(items))
    for fake in items:
        probe = fake.secret[-16:] if len(fake.secret) >= 16 else fake.secret
        assert probe not in sent, f"a {fake.kind} was sent to the model"
    assert len(memory.list_facts()) == len(items)
    assert_nowhere(stores, items)


def migrate_here(stores: Stores, source_root: Path) -> MigrationReport:
    """``deermem migrate`` of the Markdown store at ``source_root`` into the store under test."""
    destination = stores.url if stores.kind == "postgres" else str(stores.root)
    assert destination is not None
    config = MemoryConfig()
    with (
        opened_location(str(source_root), config, must_exist=True) as (reader, shown),
        opened_location(destination, config, must_exist=False) as (writer, shown_to),
    ):
        return migrate(reader, writer, MigrationReport(shown, shown_to))


@pytest.mark.parametrize("direction", ["markdown-to-here"])
def test_migrate_redacts_what_it_copies(stores: Stores, tmp_path: Path, direction: str) -> None:
    items = fakes(8)
    source_root = tmp_path / "source"
    source = Memory.open(source_root, MemoryConfig(redact_secrets=False), user="alice")
    source.import_document({"facts": [{"content": said(fake)} for fake in items]})
    source.close()
    report = migrate_here(stores, source_root)
    assert report.copied == 1
    assert sorted(report.redacted) == every_kind(items)
    assert len(open_memory(stores).list_facts()) == len(items)
    assert_nowhere(stores, items)


# --- the records a whole user carries: receipts, regret events, shadow marks, usage ----------


def with_records(memory: Memory) -> dict[str, object]:
    """An export of ``alice`` with receipts, archive entries, usage, a regret event and a
    shadow mark (as plain JSON)."""
    view = memory.scoped(user="alice", agent="coder")
    for number in range(12):  # two more than the cap: receipts and archive entries
        view.create_fact(f"alice keeps note {number} about herons", confidence=0.9)
    kept = [fact.id for fact in view.list_facts()]
    view.store.record_access(view.scope, kept[:2], NOW)
    document: dict[str, object] = json.loads(json.dumps(memory.export_user("alice")))
    coder = document["agents"]["coder"]  # type: ignore[index]
    coder["regret"] = [
        {
            "kind": "restored",
            "occurredAt": format_timestamp(NOW),
            "factId": kept[0],
            "category": "context",
            "policyVersion": "confidence-v1",
            "role": "active",
            "evictedAt": format_timestamp(NOW),
            "receiptId": "rcpt_0123456789abcdef",
            "reason": "capacity",
            "trigger": "restore",
        }
    ]
    coder["shadowMarks"] = {
        kept[1]: {
            "policyVersion": "hybrid-v1",
            "since": format_timestamp(NOW),
            "receiptId": "rcpt_0123456789abcdef",
            "category": "context",
        }
    }
    return document


_TIMES: Final = frozenset({"lastAccessedAt", "archivedAt"})


def taint(document: dict[str, object], items: list[Fake]) -> list[Fake]:
    """Append a fake to every string of the document's records (not to facts or sections),
    each string its own fake in turn; returns the fakes used. Not to the times both stores
    must be able to hold as times (a usage entry's ``lastAccessedAt``, an archive entry's
    ``archivedAt``): text there is refused, not redacted."""
    used: list[Fake] = []

    def tainted(value: object) -> object:
        if isinstance(value, str):
            fake = items[len(used) % len(items)]
            used.append(fake)
            return f"{value} {fake.snippet}"
        if isinstance(value, list):
            return [tainted(item) for item in value]
        if isinstance(value, dict):
            return {key: item if key in _TIMES else tainted(item) for key, item in value.items()}
        return value

    summaries = document["summaries"]
    assert isinstance(summaries, dict)
    summaries["lastUpdated"] = tainted(summaries["lastUpdated"])
    agents = document["agents"]
    assert isinstance(agents, dict)
    for part in agents.values():
        for name in ("events", "usage", "regret", "shadowMarks"):
            assert part[name], f"the export has no {name} to taint"
            part[name] = tainted(part[name])
        part["archive"] = [
            {
                key: value if key == "fact" or key in _TIMES else tainted(value)
                for key, value in entry.items()
            }
            for entry in part["archive"]
        ]
    return used


def test_every_record_a_user_export_carries_is_redacted_on_import(stores: Stores) -> None:
    memory = stores.memory(MemoryConfig(max_facts=10), user="alice", clock=lambda: NOW)
    document = with_records(memory)
    used = taint(document, fakes(9))
    assert len(used) > len(MAKERS)  # every kind, in more than one field
    unscoped = Memory(stores(), MemoryConfig(), None, clock=lambda: NOW)
    unscoped.erase_user("alice")

    result = unscoped.import_user(document)

    assert result.redacted == tuple(every_kind(used))
    assert_nowhere(stores, used)
    coder = memory.scoped(user="alice", agent="coder")
    assert len(coder.list_archived()) == 2  # the entries are whole, their fields redacted
    exported = json.loads(json.dumps(unscoped.export_user("alice")))
    assert marker(used[0].kind) in exported["summaries"]["lastUpdated"]


def test_migrate_redacts_the_records_it_copies(stores: Stores, tmp_path: Path) -> None:
    source_root = tmp_path / "source"
    unredacted = MemoryConfig(max_facts=10, redact_secrets=False)
    source = Memory.open(source_root, unredacted, user="alice")
    document = with_records(source)
    used = taint(document, fakes(10))
    source.erase_user("alice")
    assert source.import_user(document).redacted == ()  # the source holds the secrets
    source.close()
    report = migrate_here(stores, source_root)
    assert report.copied == 1
    assert sorted(report.redacted) == every_kind(used)
    assert_nowhere(stores, used)


def test_the_records_a_commit_brings_are_redacted(stores: Stores) -> None:
    # deermem writes no secret into a record itself; a caller's reason or a
    # host's change set is text like any other, and the commit redacts it.
    items = fakes(11)
    fact = Fact.from_dict({"id": "fact_kept", "content": "alice likes herons"})
    line = ReceiptEntry(fact_id="fact_gone", category=f"ops {items[0].snippet}")
    receipt = EvictionReceipt(
        receipt_id="rcpt_0123456789abcdef",
        occurred_at=format_timestamp(NOW),
        reason=f"staleness {items[1].snippet}",
        trigger="manual",
        policy_version=f"confidence-v1 {items[2].snippet}",
        max_facts=10,
        occupancy=11,
        reserved_correction_slots=0,
        evicted=(line,),
    )
    gone = Fact.from_dict({"id": "fact_gone", "content": "alice liked owls"})
    entry = ArchiveEntry(gone, format_timestamp(NOW), receipt.reason, "manual", None, line)
    event = RegretEvent(
        kind="restored",
        occurred_at=format_timestamp(NOW),
        fact_id="fact_gone",
        category=f"ops {items[3].snippet}",
        policy_version="confidence-v1",
        role="active",
        evicted_at=format_timestamp(NOW),
        receipt_id=None,
        reason=f"staleness {items[4].snippet}",
        trigger="manual",
    )
    mark = ShadowMark("hybrid-v1", format_timestamp(NOW), None, f"ops {items[5].snippet}")
    usage = UsageEntry(1.0, 1, f"{format_timestamp(NOW)} {items[6].snippet}")
    result = stores().commit(
        Scope.of("alice"),
        ChangeSet(
            now=NOW,
            writes=(FactWrite(fact, create=True),),
            archive_puts=(entry,),
            receipts=(receipt,),
            regret_events=(event,),
            shadow_marks={"fact_kept": mark},
            usage_restores={"fact_kept": usage},
        ),
    )
    assert result.redacted == tuple(every_kind(items[:7]))
    assert_nowhere(stores, items[:7])


def test_redact_stored_finds_and_replaces_secrets_in_every_record(stores: Stores) -> None:
    # A store written before this redaction (or with it off): `deermem redact` must look
    # where an import looks — receipts, regret events, shadow marks, usage, archive lines.
    config = MemoryConfig(max_facts=10, redact_secrets=False)
    memory = stores.memory(config, user="alice", clock=lambda: NOW)
    document = with_records(memory)
    used = taint(document, fakes(12))
    memory.erase_user("alice")
    assert memory.import_user(document).redacted == ()
    before = memory.export_user("alice")

    found = memory.redact_stored(dry_run=True)

    places = {(item.where, item.id) for item in found.items}
    assert ("records", "receipts+regret-events+shadow-marks") in places
    # Usage holds no text an import takes: its one string, a time, must read as one.
    assert {where for where, _ in places} == {"archive", "records"}
    assert sorted({kind for item in found.items for kind in item.kinds}) == every_kind(used)
    assert memory.export_user("alice") == before  # a dry run changes nothing

    done = memory.redact_stored()

    assert {(item.where, item.id) for item in done.items} == places
    assert_nowhere(stores, used)
    coder = memory.scoped(user="alice", agent="coder")
    assert len(coder.audit()) == len(document["agents"]["coder"]["events"])  # type: ignore[index]
    assert len(coder.list_archived()) == 2
    assert not memory.redact_stored(dry_run=True).items


def test_records_written_back_replace_only_the_parts_that_differ_and_never_with_appends(
    stores: Stores,
) -> None:
    store = stores()
    scope = Scope.of("alice", "coder")
    memory = stores.memory(MemoryConfig(max_facts=10), user="alice", agent="coder")
    for number in range(11):  # one more than the cap: a receipt
        memory.create_fact(f"alice keeps note {number} about herons", confidence=0.9)
    stored = store.records(scope)
    assert len(stored.events) == 1
    assert stored.regret == ()
    event = {"kind": "restored", "note": "an event deermem cannot read is kept"}
    store.commit(scope, ChangeSet(now=NOW, records=stored._replace(regret=(event,))))
    assert store.records(scope) == stored._replace(regret=(event,))
    assert store.regret_events(scope) == ()  # unreadable: skipped, as in any log
    with pytest.raises(ValueError, match="replaces the scope's records"):
        store.commit(scope, ChangeSet(now=NOW, records=stored, forget_in_audit=True))
