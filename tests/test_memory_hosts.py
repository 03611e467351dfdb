"""What every host of a Memory needs: clearing, warming, a summaries-only block,
an immediate queue entry and the host's rule for hidden messages.

(The HTTP server, an MCP server and the DeerFlow backend all call these; they
are tested here once, on the facade, with real files and real HTTP.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deermem import Memory, MemoryConfig
from deermem.learning.messages import Message
from deermem.recall.tokens import reset_tokenizer_cache
from deermem.store import MarkdownStore
from deermem.testing import ScriptedChatServer
from tests.wire_support import (
    NOW,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    model_settings,
    new_fact,
    open_memory,
    prompt_of,
    reinforce,
    seed,
    stored_fact,
)


def plain_memory(root: Path, *, user: str | None = "alice", **settings: object) -> Memory:
    return Memory.open(root, MemoryConfig(**settings), user=user, clock=lambda: NOW)


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


# --- clearing -----------------------------------------------------------------------


def test_clear_user_leaves_directories_that_are_not_buckets(tmp_path: Path) -> None:
    alice = plain_memory(tmp_path)
    seed(alice.scoped(user="alice", agent="writer"), stored_fact("fact_aw"))
    custom = tmp_path / "users" / "alice" / "agents" / "Custom Agent"
    custom.mkdir()
    (custom / "config.yaml").write_text("name: custom\n")
    assert alice.clear_user() == ("fact_aw",)
    assert (custom / "config.yaml").read_text() == "name: custom\n"


def test_clear_user_of_a_user_without_memory_changes_nothing(tmp_path: Path) -> None:
    memory = plain_memory(tmp_path, user="nobody")
    assert memory.clear_user() == ()
    assert not (tmp_path / "users").exists()


def test_the_store_lists_the_bucket_directories_of_a_user(tmp_path: Path) -> None:
    store = MarkdownStore(tmp_path)
    assert store.agents("alice") == ()
    agents = tmp_path / "users" / "alice" / "agents"
    for name in ("writer", "__default__", "coder", "Upper", "has space", ".hidden"):
        (agents / name).mkdir(parents=True)
    (agents / "stray-file").write_text("")
    assert store.agents("alice") == ("__default__", "coder", "writer")
    (tmp_path / "agents" / "solo").mkdir(parents=True)
    assert store.agents(None) == ("solo",)


# --- warming and the summaries-only block ------------------------------------------------


@pytest.mark.parametrize("counting", ["tiktoken", "char"])
def test_warm_opens_the_search_index_and_loads_the_vocabulary(
    tmp_path: Path, counting: str
) -> None:
    memory = plain_memory(tmp_path, token_counting=counting)
    assert memory.warm() is True
    assert (tmp_path / ".retrieval" / "memory-fts5.sqlite3").is_file()
    memory.close()


def test_warm_reports_a_vocabulary_that_cannot_be_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "broken.tiktoken.gz").write_bytes(b"not a vocabulary")
    reset_tokenizer_cache(tmp_path / "broken.tiktoken.gz")
    try:
        memory = plain_memory(tmp_path / "root")
        assert memory.warm() is False
        assert "cl100k_base vocabulary unavailable" in caplog.text
        assert plain_memory(tmp_path / "root", token_counting="char").warm() is True
        memory.close()
    finally:
        reset_tokenizer_cache()


def test_warm_with_no_room_for_the_index_on_disk_still_readies_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "root"
    blocked.mkdir()
    (blocked / ".retrieval").write_text("a file where the index directory belongs")
    memory = plain_memory(blocked)
    seed(memory, stored_fact("fact_a", "Uses uv."))
    assert memory.warm() is True
    assert "in memory" in caplog.text
    assert [hit.fact_id for hit in memory.search("uv")] == ["fact_a"]
    memory.close()


def test_a_summaries_only_block_leaves_the_facts_to_search(tmp_path: Path) -> None:
    memory = plain_memory(tmp_path)
    seed(memory, stored_fact("fact_a", "Uses uv, never pip."), workContext="Backend engineer")
    full = memory.injection().text
    summaries_only = memory.injection(facts=False)
    assert "Uses uv" in full
    assert "Backend engineer" in summaries_only.text
    assert "Uses uv" not in summaries_only.text
    assert summaries_only.manifest.injected == ()
    assert summaries_only.manifest.omitted == ()
    assert [hit.fact_id for hit in memory.search("uv")] == ["fact_a"]


# --- the queue: an immediate entry, and the host's rule for hidden messages ---------------


def test_an_immediate_entry_is_processed_without_waiting_for_the_pause(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=300.0, queue_max_depth=1)
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]), answer())
    memory.queue_conversation("other", conversation("Hello there.", "Hi."))  # fills the queue
    assert memory.queue_conversation("t", conversation("I use uv.", "Noted."), immediate=True)
    deadline = time.monotonic() + 15
    while len(server.requests) < 2:
        assert time.monotonic() < deadline, "the immediate entry was not processed"
        time.sleep(0.02)
    assert [f.content for f in memory.list_facts()] == ["Uses uv."]


def test_an_immediate_entry_feeds_what_follows_the_mark_and_moves_it(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=300.0)
    server.enqueue(answer(), answer(), answer())
    first = conversation("I use uv.", "Noted.")
    memory.learn("t", first)
    grown = [*first, *conversation("I moved to Paris.", "Noted.")]
    assert memory.queue_conversation("t", grown, immediate=True)
    assert memory.flush_queue(timeout=10).ok
    assert "I use uv." not in prompt_of(server)  # learned already: not fed again
    assert "Paris" in prompt_of(server)
    assert memory.learn("t", grown).report.outcome == "nothing-new"  # the mark moved
    assert len(server.requests) == 2


def test_an_immediate_entry_of_a_learned_conversation_asks_nothing_and_confirms_nothing(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, debounce_seconds=300.0)
    fact_id = memory.create_fact("Uses uv, never pip.", confidence=0.9).fact_id
    assert fact_id is not None
    confirming = answer(factsToReinforce=[reinforce(fact_id)])
    server.enqueue(confirming, confirming)
    chat = conversation("You remember I use uv?", "Yes.", "Yes, that's exactly right!", "Great.")
    assert memory.learn("t", chat).report.confirmed == (fact_id,)
    # The host is about to summarise the conversation away and flushes it: it was learned
    # already, so the model is not asked and the user's "exactly right" is not counted twice.
    assert memory.queue_conversation("t", chat, immediate=True)
    assert memory.flush_queue(timeout=10).ok
    assert len(server.requests) == 1
    assert memory.get_fact(fact_id).confirmationCount == 1


def hidden_turn(text: str, **kwargs: object) -> dict[str, object]:
    return {"type": "human", "content": text, "additional_kwargs": {"hide_from_ui": True, **kwargs}}


def test_a_host_rule_decides_which_hidden_messages_are_learned_from(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    seen: list[dict[str, object]] = []

    def keep_flagged(message: Message) -> bool:
        seen.append(dict(message.metadata))
        return message.metadata.get("from_user") is True

    memory = Memory.open(
        tmp_path,
        MemoryConfig(model=model_settings(server)),
        user="alice",
        clock=lambda: NOW,
        keep_hidden=keep_flagged,
    )
    messages = [
        hidden_turn("<memory>Uses pip.</memory>"),
        {"type": "ai", "content": "Reply to the injected block."},
        hidden_turn("My answer: I deploy on Fridays.", from_user=True),
        {"type": "ai", "content": "Noted, Fridays."},
    ]
    server.enqueue(answer())
    memory.learn("t", messages)
    prompt = prompt_of(server)
    assert "I deploy on Fridays" in prompt
    assert "Uses pip" not in prompt
    assert "Reply to the injected block" not in prompt
    assert len(seen) == 2
    memory.close()


def test_without_a_host_rule_hidden_messages_are_dropped(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    messages = [
        hidden_turn("My answer: I deploy on Fridays.", from_user=True),
        {"type": "ai", "content": "Noted, Fridays."},
        {"type": "human", "content": "I use uv."},
        {"type": "ai", "content": "Noted."},
    ]
    server.enqueue(answer())
    memory.learn("t", messages)
    assert "Fridays" not in prompt_of(server)
