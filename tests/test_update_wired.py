"""The wired update: Memory.learn over real HTTP, through the store's capacity gate.

Every test here runs the whole path — message filtering and signals, the
prompt, the OpenAI-compatible client against a ScriptedChatServer on
127.0.0.1, parsing, normalisation, the plan, the capacity gate and the
journaled commit with receipts — and checks what the store holds afterwards.
(Catalogue: test_memory_updater.py, test_memory_scope_gate.py,
test_memory_staleness_review.py, test_updater_watermark.py, the wired parts.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deermem import Memory, MemoryConfig
from deermem.errors import LLMNotConfigured, LLMStatusError, MessageFormatError
from deermem.learning.answer import response_json_schema
from deermem.learning.prompt import PromptLoader
from deermem.learning.signals import Pattern, PatternSet, Signal
from deermem.llm import NO_MODEL_CONFIGURED
from deermem.store.markdown import journal
from deermem.testing import Reply, ScriptedChatServer
from tests.wire_support import (
    CHAT,
    NOW,
    answer,
    close_memories,  # noqa: F401 (autouse fixture)
    conversation,
    facts_by_id,
    marks,
    memory_tree,
    new_fact,
    open_memory,
    prompt_of,
    reinforce,
    removal,
    seed,
    stored_fact,
    tree,
)

CONFIRMING = conversation(
    "Use uv for the new service too.", "Done, I set it up with uv.", "对，就是这样", "Great."
)


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as running:
        yield running


# --- the basic path ------------------------------------------------------------------


def test_a_conversation_becomes_facts_with_one_model_call(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(answer(newFacts=[new_fact("Uses uv for every Python project.")]))
    report = memory.learn("thread-7", CHAT).report
    assert report.outcome == "applied"
    assert report.committed
    assert report.added == ("fact_00000001",)
    assert report.signals == ()
    assert report.commit_attempts == 1
    assert report.revision == 1
    assert report.model_call is not None
    assert report.model_call.model == "scripted-model"
    (stored,) = memory.list_facts()
    assert stored.content == "Uses uv for every Python project."
    assert (stored.source.type, stored.source.threadId) == ("conversation", "thread-7")
    assert stored.scope is not None
    assert stored.scope.userId == "alice"
    assert len(server.requests) == 1
    body = server.requests[0].json()
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == response_json_schema()
    prompt = prompt_of(server)
    assert "User: I use uv for every Python project." in prompt
    assert "Assistant: Noted: uv it is." in prompt


def test_the_prompt_carries_the_current_memory_escaped_and_unicode_intact(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a", "喜欢 </current_memory> 乌龙茶 & 绿茶"))
    server.enqueue(answer())
    memory.learn("t", CHAT)
    prompt = prompt_of(server)
    assert "喜欢 &lt;/current_memory&gt; 乌龙茶 &amp; 绿茶" in prompt
    assert prompt.count("</current_memory>") == 1
    assert "\\u" not in prompt


def test_langchain_shaped_messages_are_read_too(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(answer(newFacts=[new_fact("Works night shifts.")]))
    messages = [
        {"type": "human", "content": "I work night shifts.", "id": "m1"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "lookup"}], "id": "m2"},
        {"type": "tool", "content": "tool output", "id": "m3"},
        {"type": "ai", "content": [{"type": "text", "text": "Got it."}], "id": "m4"},
    ]
    assert memory.learn("t", messages).report.added == ("fact_00000001",)
    prompt = prompt_of(server)
    assert "tool output" not in prompt
    assert "User: I work night shifts." in prompt


def test_a_conversation_with_nothing_to_learn_makes_no_call(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    for messages in (
        conversation("ok", "Anything else?"),  # a bare acknowledgement and its reply
        conversation("Only a question, no answer yet."),
        [{"role": "system", "content": "You are helpful."}],
    ):
        assert memory.learn("t", messages).report.outcome == "no-conversation"
    assert server.requests == []
    assert not tmp_path.exists() or tree(tmp_path) == {}


def test_learn_detects_the_signals_once(
    tmp_path: Path, server: ScriptedChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One pass of detection per update, over what is sent (not one more when reading)."""
    passes: list[Signal] = []
    search = PatternSet.for_signal

    def counting(patterns: PatternSet, signal: Signal) -> tuple[Pattern, ...]:
        passes.append(signal)
        return search(patterns, signal)

    monkeypatch.setattr(PatternSet, "for_signal", counting)
    memory = open_memory(tmp_path, server)
    server.enqueue(answer())
    report = memory.learn("t", conversation("That's exactly right, I use uv.", "Noted.")).report
    assert report.signals == ("reinforcement",)
    assert sorted(passes) == sorted(Signal)  # each signal asked once of the one user turn


def test_a_bad_message_is_an_error_naming_it(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    with pytest.raises(MessageFormatError, match="message 1: field 'role'"):
        memory.learn("t", [{"role": "user", "content": "hi"}, {"role": "robot"}])
    assert server.requests == []


def test_without_a_model_extraction_is_off_and_says_so(tmp_path: Path) -> None:
    memory = Memory.open(tmp_path, MemoryConfig(), user="alice", clock=lambda: NOW)
    with pytest.raises(LLMNotConfigured) as raised:
        memory.learn("t", CHAT)
    assert str(raised.value) == NO_MODEL_CONFIGURED
    with pytest.raises(LLMNotConfigured):
        memory.queue_conversation("t", CHAT)
    assert not tmp_path.exists() or tree(tmp_path) == {}


# --- the client runs for real: retries, errors ----------------------------------------


def test_retries_on_429_and_5xx_then_applies(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(
        Reply.error(429, retry_after=0),
        Reply.error(503),
        answer(newFacts=[new_fact("Prefers tea.")]),
    )
    report = memory.learn("t", CHAT).report
    assert report.added == ("fact_00000001",)
    assert report.model_call is not None
    assert report.model_call.attempts == 3


def test_a_failed_model_call_raises_and_changes_nothing(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a"))
    before = tree(tmp_path)
    server.enqueue(Reply.error(401, message="bad key"))
    with pytest.raises(LLMStatusError):
        memory.learn("t", CHAT)
    assert tree(tmp_path) == before
    # The watermark did not move: the same conversation is tried again.
    server.enqueue(answer(newFacts=[new_fact("Prefers tea.")]))
    assert memory.learn("t", CHAT).report.added == ("fact_00000001",)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply.text([{"type": "text", "text": answer(newFacts=[new_fact("X y.")])}]),
                     id="content-blocks"),
        pytest.param(Reply.text("<think>draft {}</think>\nSure:\n```json\n"
                                + answer(newFacts=[new_fact("X y.")]) + "\n```"),
                     id="think-and-fences"),
        pytest.param(Reply.text('{"user": "alice"} then ' + answer(newFacts=[new_fact("X y.")])),
                     id="unrelated-json-first"),
    ],
)  # fmt: skip
def test_wrapped_answers_parse(tmp_path: Path, server: ScriptedChatServer, reply: Reply) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(reply)
    assert memory.learn("t", CHAT).report.added == ("fact_00000001",)


# --- apply order (reference §4.4) -----------------------------------------------------


def test_confirmation_runs_before_the_staleness_review(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, fact_eviction_policy="hybrid-v1")
    seed(
        memory,
        stored_fact("fact_old", "Prefers uv", confidence=0.7, age_days=200),
        stored_fact("fact_b", "Likes tea", age_days=200),
        stored_fact("fact_c", "Lives in Lyon", age_days=200),
    )
    server.enqueue(
        answer(
            factsToReinforce=[reinforce("fact_old")],
            staleFactsToRemove=[
                {"id": "fact_old", "reason": "old"},
                {"id": "fact_b", "reason": "old"},
            ],
        )
    )
    report = memory.learn("t", CONFIRMING).report
    assert "reinforcement" in report.signals
    assert report.confirmed == ("fact_old",)
    assert [(c.fact_id, c.reason) for c in report.removed] == [("fact_b", "staleness")]
    kept = facts_by_id(memory)
    assert set(kept) == {"fact_old", "fact_c"}
    assert kept["fact_old"].lastConfirmedAt == "2026-08-13T12:00:00Z"
    assert kept["fact_old"].confirmationCount == 1
    assert "valid:90d" in prompt_of(server)  # the review was asked for


def test_a_stale_fact_proposed_again_comes_back_fresh(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, staleness_min_candidates=1)
    seed(memory, stored_fact("fact_old", "Prefers uv over pip", age_days=200))
    server.enqueue(
        answer(
            staleFactsToRemove=[{"id": "fact_old", "reason": "old"}],
            newFacts=[new_fact("prefers UV over pip")],
        )
    )
    report = memory.learn("t", CHAT).report
    assert [c.fact_id for c in report.removed] == ["fact_old"]
    assert report.added == ("fact_00000001",)
    (fact,) = memory.list_facts()
    assert fact.createdAt == "2026-08-13T12:00:00Z"


def test_staleness_removals_get_their_own_receipt_and_archive_entry(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, staleness_max_removals_per_cycle=1)
    seed(
        memory,
        stored_fact("fact_lo", confidence=0.4, age_days=200),
        stored_fact("fact_hi", confidence=0.9, age_days=200),
        stored_fact("fact_fix", category="correction", confidence=0.1, age_days=400),
        stored_fact("fact_new", confidence=0.1, age_days=2),
    )
    server.enqueue(
        answer(
            staleFactsToRemove=[
                {"id": i, "reason": "old"} for i in ("fact_hi", "fact_lo", "fact_fix", "fact_new")
            ]
        )
    )
    report = memory.learn("t", CHAT).report
    # Capped at one removal, lowest confidence first; the protected and the fresh fact stay.
    (change,) = report.removed
    assert (change.fact_id, change.reason, change.category) == ("fact_lo", "staleness", "context")
    assert set(facts_by_id(memory)) == {"fact_hi", "fact_fix", "fact_new"}
    assert report.metrics.stale_capped == 1
    assert report.metrics.stale_refused == 2
    receipt = memory.audit()[-1]
    assert (receipt.reason, receipt.trigger, receipt.fact_ids) == (
        "staleness",
        "extraction",
        ("fact_lo",),
    )
    assert receipt.receipt_id == change.receipt_id
    (entry,) = memory.list_archived()
    assert (entry.fact_id, entry.reason, entry.receipt_id) == (
        "fact_lo",
        "staleness",
        change.receipt_id,
    )


def test_an_extension_is_committed(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a", age_days=100))
    server.enqueue(
        answer(staleFactsToExtend=[{"id": "fact_a", "extend_by_days": 365, "reason": "still"}])
    )
    report = memory.learn("t", CHAT).report
    assert report.extended == ("fact_a",)
    assert memory.get_fact("fact_a").expected_valid_days == 465
    assert memory.get_fact("fact_a").revision == 2


def test_at_the_cap_a_new_fact_goes_through_the_capacity_gate(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, max_facts=10)
    seed(memory, *(stored_fact(f"fact_{i}", confidence=0.8 + i / 100) for i in range(10)))
    server.enqueue(answer(newFacts=[new_fact("Prefers tea.", confidence=0.95)]))
    report = memory.learn("t", CHAT).report
    assert report.added == ("fact_00000001",)
    (evicted,) = report.evicted
    assert (evicted.fact_id, evicted.reason) == ("fact_0", "capacity")
    receipt = memory.audit()[-1]
    assert (receipt.receipt_id, receipt.reason, receipt.trigger) == (
        evicted.receipt_id,
        "capacity",
        "extraction",
    )
    assert len(memory.list_facts()) == 10


def test_a_new_fact_the_gate_evicts_at_once_is_reported_as_evicted(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, max_facts=10)
    seed(memory, *(stored_fact(f"fact_{i}", confidence=0.95) for i in range(10)))
    server.enqueue(answer(newFacts=[new_fact("Prefers tea.", confidence=0.75)]))
    report = memory.learn("t", CHAT).report
    assert report.added == ()
    assert [c.fact_id for c in report.evicted] == ["fact_00000001"]
    assert memory.get_archived("fact_00000001").fact.content == "Prefers tea."


def test_a_contradiction_with_a_kept_replacement_removes_the_old_fact(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_pip", "Uses pip"))
    server.enqueue(
        answer(newFacts=[new_fact("Uses uv, not pip")], factsToRemove=[removal("fact_pip", 0)])
    )
    report = memory.learn(
        "t", conversation("That's wrong: I use uv now, not pip.", "Understood.")
    ).report
    assert "correction" in report.signals
    assert report.added == ("fact_00000001",)
    (change,) = report.removed
    assert (change.fact_id, change.reason) == ("fact_pip", "contradiction")
    assert report.metrics.contradiction_removals == 1
    assert set(facts_by_id(memory)) == {"fact_00000001"}
    assert memory.audit()[-1].reason == "contradiction"
    assert memory.get_archived("fact_pip").reason == "contradiction"


def test_a_contradiction_whose_replacement_is_trimmed_is_blocked(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, max_facts=10)
    facts = [stored_fact(f"fact_{i}", confidence=0.95) for i in range(9)]
    seed(memory, *facts, stored_fact("fact_pip", "Uses pip", confidence=0.96))
    server.enqueue(
        answer(
            newFacts=[new_fact("Uses uv, not pip", confidence=0.75)],
            factsToRemove=[removal("fact_pip", 0)],
        )
    )
    report = memory.learn("t", CHAT).report
    assert [c.fact_id for c in report.evicted] == ["fact_00000001"]
    assert report.removed == ()
    assert report.blocked_removals == ("fact_pip",)
    assert report.metrics.removal_rejections.replacement == 1
    assert "fact_pip" in facts_by_id(memory)


def test_a_replacement_refused_by_a_gate_blocks_its_removal(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_pip", "Uses pip"))
    server.enqueue(
        answer(
            newFacts=[
                new_fact("Uses uv", confidence=0.69),  # below the threshold
                new_fact("Uses uv today", scope="thread"),  # refused by the label gate
            ],
            factsToRemove=[removal("fact_pip", 0), removal("fact_pip", 1)],
        )
    )
    report = memory.learn("t", CHAT).report
    assert report.outcome == "unchanged"
    assert report.removed == ()
    assert report.added == ()
    rejections = report.metrics.removal_rejections
    assert rejections.replacement == 2
    assert report.metrics.rejected_low_confidence == 1
    assert report.metrics.fact_rejections.scope == 1
    assert "fact_pip" in facts_by_id(memory)


def test_a_contradiction_without_replacement_never_costs_another_fact_its_slot(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """Removals that do not depend on the decision are taken out before it.

    At the cap, with one fact removed as contradicted and one new fact, the
    library stays at the cap and nothing is evicted. (Removing the
    contradicted fact only after the trim, as the original does, would have
    evicted fact_0 as well.)
    """
    memory = open_memory(tmp_path, server, max_facts=10)
    seed(memory, *(stored_fact(f"fact_{i}", confidence=0.8 + i / 100) for i in range(10)))
    server.enqueue(answer(newFacts=[new_fact("Prefers tea.")], factsToRemove=[removal("fact_5")]))
    report = memory.learn("t", CHAT).report
    assert [(c.fact_id, c.reason) for c in report.removed] == [("fact_5", "contradiction")]
    assert report.evicted == ()
    assert report.added == ("fact_00000001",)
    assert len(memory.list_facts()) == 10
    assert "fact_0" in facts_by_id(memory)
    assert [r.reason for r in memory.audit()] == ["contradiction"]


def test_an_unlabelled_fact_is_dropped_without_stopping_the_rest(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_pip", "Uses pip"))
    unlabelled = {"content": "Uses uv", "category": "preference", "confidence": 0.9}
    server.enqueue(
        answer(
            newFacts=[unlabelled, new_fact("Lives in Lyon.")],
            factsToRemove=[removal("fact_pip", 0)],
        )
    )
    report = memory.learn("t", CHAT).report
    assert report.metrics.fact_rejections.missing == 1
    assert report.metrics.removal_rejections.replacement == 1
    assert report.added == ("fact_00000001",)
    assert memory.get_fact("fact_00000001").content == "Lives in Lyon."
    assert "fact_pip" in facts_by_id(memory)


def test_wrong_typed_sections_are_ignored_and_a_valid_fact_kept(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(
        answer(user="alice", history=[1, 2], factsToRemove="everything",
               newFacts=[{**new_fact("Lives in Lyon."), "confidence": "0.91", "category": 9}])
    )  # fmt: skip
    report = memory.learn("t", CHAT).report
    (fact,) = memory.list_facts()
    assert (fact.content, fact.confidence, fact.category) == ("Lives in Lyon.", 0.91, "context")
    assert report.summaries == ()


def test_upload_blocks_never_reach_the_model(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(answer())
    upload = "<uploaded_files>/mnt/user-data/uploads/secret.csv</uploaded_files>"
    messages = [
        {"role": "user", "content": upload},
        {"role": "assistant", "content": "I see the file secret.csv."},
        {"role": "user", "content": "<current_uploads>a.pdf</current_uploads>What is in a.pdf?"},
        {"role": "assistant", "content": "A report."},
    ]  # fmt: skip
    memory.learn("t", messages)
    prompt = prompt_of(server)
    assert "secret.csv" not in prompt
    assert "User: What is in a.pdf?" in prompt
    assert "uploads" not in prompt.split("<conversation>")[1]


def test_removal_scopes_and_reasons_are_gated(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a"), stored_fact("fact_b"), stored_fact("fact_c"))
    server.enqueue(
        answer(
            factsToRemove=[
                removal("fact_a", scope="thread"),
                removal("fact_b", reason=""),
                "fact_c",  # a legacy bare id: unlabelled
            ]
        )
    )
    report = memory.learn("t", CHAT).report
    assert report.outcome == "unchanged"
    rejections = report.metrics.removal_rejections
    assert (rejections.scope, rejections.missing) == (1, 2)
    assert set(facts_by_id(memory)) == {"fact_a", "fact_b", "fact_c"}


def test_summaries_pass_their_gate_and_are_committed(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    good = {"summary": "Backend engineer.", "shouldUpdate": True, "scope": "user",
            "authority": "descriptive"}  # fmt: skip
    server.enqueue(
        answer(
            user={
                "workContext": good,
                "topOfMind": {**good, "summary": "Fix the bug now.", "authority": "transactional"},
                "personalContext": {**good, "scope": "project"},
            }
        )
    )
    report = memory.learn("t", CHAT).report
    assert report.summaries == ("user.workContext",)
    summaries = memory.summaries()
    assert summaries.user["workContext"].summary == "Backend engineer."
    assert summaries.user["workContext"].updatedAt == "2026-08-13T12:00:00Z"
    assert summaries.user["topOfMind"].summary == ""
    assert report.metrics.summary_rejections.authority == 1
    assert report.metrics.summary_rejections.scope == 1


def test_duplicates_are_dropped_and_the_stored_fact_left_alone(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, fact_eviction_policy="hybrid-v1")
    seed(memory, stored_fact("fact_a", "Prefers uv over pip"))
    before = tree(tmp_path)
    server.enqueue(answer(newFacts=[new_fact("  PREFERS UV OVER PIP ")]))
    report = memory.learn("t", CONFIRMING).report  # even with a reinforcement signal
    assert report.outcome == "unchanged"
    assert report.metrics.duplicate_facts == 1
    assert memory_tree(tmp_path) == before  # a duplicate never confirms or touches the fact


def test_a_hand_written_fact_echoed_with_the_prompts_marker_is_a_duplicate(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_tea", "Likes green tea.", source={"type": "manual"}))
    before = tree(tmp_path)
    server.enqueue(answer(newFacts=[new_fact("[MANUAL] Likes green tea.")]))
    report = memory.learn("t", CHAT).report
    assert '"content": "[MANUAL] Likes green tea."' in prompt_of(server)
    assert report.outcome == "unchanged"
    assert report.metrics.duplicate_facts == 1
    assert [fact.content for fact in memory.list_facts()] == ["Likes green tea."]
    assert memory_tree(tmp_path) == before


def test_delete_mode_deletes_without_archive(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server, eviction_mode="delete")
    seed(memory, stored_fact("fact_pip", "Uses pip"))
    server.enqueue(answer(factsToRemove=[removal("fact_pip")]))
    report = memory.learn("t", CHAT).report
    (change,) = report.removed
    assert memory.list_facts() == ()
    assert memory.list_archived() == ()
    gone = memory.why("fact_pip")
    assert gone.status == "gone"
    assert [(r.receipt_id, r.reason) for r in gone.receipts] == [(change.receipt_id, change.reason)]


# --- confirmation (reference §4.6) ----------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "messages", "recorded"),
    [
        ({"fact_eviction_policy": "hybrid-v1"}, CONFIRMING, True),
        ({"fact_eviction_shadow_enabled": True}, CONFIRMING, True),
        ({}, CONFIRMING, True),  # the confidence policy records them too
        ({"fact_eviction_policy": "hybrid-v1"}, CHAT, False),  # no reinforcement signal
        # a bare "对" is no confirmation
        ({"fact_eviction_policy": "hybrid-v1"}, conversation("Use uv.", "Done.", "对", "OK."),
         False),
    ],
)  # fmt: skip
def test_a_confirmation_is_recorded_only_when_every_condition_holds(
    tmp_path: Path,
    server: ScriptedChatServer,
    settings: dict[str, Any],
    messages: list[dict[str, str]],
    recorded: bool,
) -> None:
    memory = open_memory(tmp_path, server, **settings)
    seed(memory, stored_fact("fact_a", confirmationCount=3))
    server.enqueue(answer(factsToReinforce=[reinforce("fact_a"), reinforce("fact_zz")]))
    report = memory.learn("t", messages).report
    fact = memory.get_fact("fact_a")
    if recorded:
        assert report.confirmed == ("fact_a",)
        assert (fact.lastConfirmedAt, fact.confirmationCount) == ("2026-08-13T12:00:00Z", 4)
        assert report.metrics.confirmations_refused == 1  # the unknown id
    else:
        assert report.confirmed == ()
        assert (fact.lastConfirmedAt, fact.confirmationCount) == (None, 3)


def test_a_confirmation_needs_user_scope_and_a_reason(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, fact_eviction_policy="hybrid-v1")
    seed(memory, stored_fact("fact_a"), stored_fact("fact_b"))
    server.enqueue(
        answer(
            factsToReinforce=[
                {"id": "fact_a", "scope": "thread", "reason": "said so"},
                {"id": "fact_b", "scope": "user", "reason": " "},
            ]
        )
    )
    report = memory.learn("t", CONFIRMING).report
    assert report.confirmed == ()
    assert all(f.lastConfirmedAt is None for f in memory.list_facts())


# --- prompt hints and the staleness section -------------------------------------------


def test_signal_hints_and_the_staleness_section_reach_the_model(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    hints = PromptLoader().load("memory_update").tables["signal_hints"]
    memory = open_memory(tmp_path, server)
    seed(memory, *(stored_fact(f"fact_{i}", age_days=120) for i in range(3)))
    server.enqueue(answer(), answer(), answer())
    memory.learn("t1", conversation("That's wrong, try again.", "Sorry."))
    first = prompt_of(server)
    assert "- [fact_2 | context | conf:0.80 |" in first
    assert "valid:90d" in first
    assert hints["correction"] in first
    assert hints["reinforcement"] not in first
    memory.learn("t2", conversation("Yes, exactly! That's what I needed.", "Glad."))
    second = prompt_of(server)
    assert hints["reinforcement"] in second
    assert hints["correction"] not in second
    memory.learn("t3", conversation("Let's move the meeting to Friday.", "Moved."))
    assert not any(hint in prompt_of(server) for hint in hints.values())


def test_no_staleness_section_below_the_minimum(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, *(stored_fact(f"fact_{i}", age_days=120) for i in range(2)))
    server.enqueue(answer())
    memory.learn("t", CHAT)
    assert "valid:90d" not in prompt_of(server)


# --- upload clean-up ------------------------------------------------------------------


def test_upload_events_are_cleaned_from_facts_and_summaries(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server)
    seed(
        memory,
        stored_fact("fact_up", "The user uploaded a test file."),
        stored_fact("fact_csv", "Works with CSV files."),
        stored_fact("fact_hand", "Uploaded my CV to the portal last week", source="manual"),
        workContext="Data engineer. Uploaded report.pdf for review. Prefers PDF export.",
    )
    server.enqueue(
        answer(
            newFacts=[
                new_fact("The user uploaded two spreadsheets."),
                new_fact("Files are in /mnt/user-data/uploads/q3.csv"),
                new_fact("Prefers PDF export for reports."),
            ]
        )
    )
    report = memory.learn("t", CHAT).report
    assert report.added == ("fact_00000001",)
    assert [(c.fact_id, c.reason) for c in report.removed] == [("fact_up", "upload")]
    assert report.metrics.upload_facts_dropped == 2
    assert report.metrics.upload_sentences_removed == 1
    assert set(facts_by_id(memory)) == {"fact_csv", "fact_hand", "fact_00000001"}
    summary = memory.summaries().user["workContext"].summary
    assert summary == "Data engineer. Prefers PDF export."
    assert memory.get_archived("fact_up").reason == "upload"


# --- the watermark --------------------------------------------------------------------


def test_the_watermark_feeds_only_what_is_new(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    server.enqueue(answer(), answer())
    first = conversation("I live in Lyon.", "Nice city.")
    memory.learn("t", first)
    assert memory.learn("t", first).report.outcome == "nothing-new"
    assert len(server.requests) == 1
    grown = [*first, *conversation("I moved to Paris.", "Noted.")]
    memory.learn("t", grown)
    prompt = prompt_of(server)
    assert "Paris" in prompt
    assert "Lyon" not in prompt
    # Per thread, per user: another thread or user starts from the beginning.
    server.enqueue(answer(), answer())
    memory.learn("other", first)
    memory.scoped(user="bob", agent=None).learn("t", first)
    assert len(server.requests) == 4


def test_an_applied_conversation_is_never_extracted_or_confirmed_again(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    """The mark is in the store: a new Memory (a new process) sees it."""
    first = open_memory(tmp_path, server, fact_eviction_policy="hybrid-v1")
    seed(first, stored_fact("fact_a", "Uses uv for every project."))
    server.enqueue(answer(factsToReinforce=[reinforce("fact_a")]))
    assert first.learn("t", CONFIRMING).report.confirmed == ("fact_a",)
    first.close()
    again = open_memory(tmp_path, server, fact_eviction_policy="hybrid-v1")
    assert again.learn("t", CONFIRMING).report.outcome == "nothing-new"
    assert len(server.requests) == 1  # no model call, so nothing to confirm again
    assert again.get_fact("fact_a").confirmationCount == 1
    grown = [*CONFIRMING, *conversation("I also use ruff.", "Noted.")]
    server.enqueue(answer(newFacts=[new_fact("Uses ruff.")]))
    assert again.learn("t", grown).report.added == ("fact_00000001",)
    assert "对，就是这样" not in prompt_of(server)  # only what is new is fed
    assert again.get_fact("fact_a").confirmationCount == 1


def test_the_queue_reads_the_mark_from_the_store(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    server.enqueue(answer())
    open_memory(tmp_path, server).learn("t", CHAT)
    queued = open_memory(tmp_path, server, debounce_seconds=30.0)
    assert queued.queue_conversation("t", CHAT)
    report = queued.flush_queue(timeout=10)
    assert report.ok
    assert len(server.requests) == 1  # nothing new for the queue either


def test_the_mark_is_written_by_the_commit_that_applies_the_update(
    tmp_path: Path, server: ScriptedChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a", "Uses pip."))
    before = tree(tmp_path)

    class Crash(BaseException):
        pass

    def crash(path: Path) -> bool:
        raise Crash

    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    with monkeypatch.context() as patch:
        patch.setattr(journal, "remove_durably", crash)
        patch.setattr(journal, "_roll_back_now", lambda user: None)  # a crash undoes nothing
        with pytest.raises(Crash):
            memory.learn("t", CHAT)
    written = json.loads((tmp_path / "users/alice/.memory.journal.json").read_text("utf-8"))
    assert sum("/.metadata/threads/" in item["path"] for item in written["files"]) == 1
    reopened = open_memory(tmp_path, server)
    assert [f.id for f in reopened.list_facts()] == ["fact_a"]  # recovered: no fact, no mark
    assert tree(tmp_path) == before
    server.enqueue(answer(newFacts=[new_fact("Uses uv.")]))
    assert reopened.learn("t", CHAT).report.added == ("fact_00000001",)  # asked again
    assert len(marks(tmp_path)) == 1


def test_a_failed_update_leaves_no_mark(tmp_path: Path, server: ScriptedChatServer) -> None:
    memory = open_memory(tmp_path, server)
    seed(memory, stored_fact("fact_a", "Uses pip."))
    server.enqueue("no json here")
    assert memory.learn("t", CHAT).report.outcome == "no-update"
    assert marks(tmp_path) == []
    server.enqueue(answer())
    assert memory.learn("t", CHAT).report.outcome == "unchanged"  # tried again
    assert len(marks(tmp_path)) == 1
    assert "Uses" not in marks(tmp_path)[0]


def test_a_dry_run_on_a_new_store_creates_nothing(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    root = tmp_path / "store"
    memory = open_memory(root, server)
    server.enqueue(answer(newFacts=[new_fact("Prefers tea.")]))
    assert memory.learn("t", CHAT, dry_run=True).report.added == ("fact_00000001",)
    assert not root.exists()


def test_a_dry_run_writes_nothing_and_does_not_move_the_watermark(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    memory = open_memory(tmp_path, server, max_facts=10)
    seed(memory, *(stored_fact(f"fact_{i}", confidence=0.8 + i / 100) for i in range(10)))
    before = tree(tmp_path)
    response = answer(newFacts=[new_fact("Prefers tea.", confidence=0.95)])
    server.enqueue(response, response)
    preview = memory.learn("t", CHAT, dry_run=True)
    assert preview.report.dry_run
    assert not preview.report.committed
    assert preview.report.outcome == "applied"
    assert preview.report.added == ("fact_00000001",)
    assert [c.fact_id for c in preview.report.evicted] == ["fact_0"]
    assert preview.facts["fact_00000001"].content == "Prefers tea."
    assert tree(tmp_path) == before
    real = memory.learn("t", CHAT).report  # same answer: same decision, same receipt id
    assert real.evicted == preview.report.evicted


# --- revision conflicts (reference §4.8) ----------------------------------------------


def _edit_behind_the_store(root: Path, fact_id: str) -> None:
    """What a writer that ignores deermem's lock would do: bump a fact and the manifest."""
    (path,) = root.rglob(f"{fact_id}.md")
    text = path.read_text()
    path.write_text(text.replace("revision: 1\n", "revision: 2\n"))
    manifest = root / "users" / "alice" / "memory.json"
    document = json.loads(manifest.read_text())
    document["revision"] += 1
    manifest.write_text(json.dumps(document, indent=2))


def test_a_revision_conflict_reloads_and_applies_the_same_answer(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    calls = iter(range(1, 100))

    def ids() -> str:
        number = next(calls)
        if number == 1:
            _edit_behind_the_store(tmp_path, "fact_a")
        return f"fact_{number:08x}"

    memory = open_memory(tmp_path, server, id_factory=ids, fact_eviction_policy="hybrid-v1")
    seed(memory, stored_fact("fact_a", "Prefers uv"))
    server.enqueue(
        answer(newFacts=[new_fact("Likes tea.")], factsToReinforce=[reinforce("fact_a")])
    )
    report = memory.learn("t", CONFIRMING).report
    assert report.commit_attempts == 2
    assert len(server.requests) == 1  # the model was asked once
    assert report.confirmed == ("fact_a",)
    assert memory.get_fact("fact_a").revision == 3
    assert memory.get_fact("fact_a").confirmationCount == 1
    assert len(memory.list_facts()) == 2


def test_three_conflicts_in_a_row_give_up_without_a_partial_commit(
    tmp_path: Path, server: ScriptedChatServer
) -> None:
    from deermem.errors import FactRevisionConflict

    revisions = iter(range(1, 100))

    def ids() -> str:
        number = next(revisions)
        (path,) = tmp_path.rglob("fact_a.md")
        text = path.read_text()
        current = int(re.search(r"^revision: (\d+)$", text, re.MULTILINE)[1])  # type: ignore[index]
        path.write_text(text.replace(f"revision: {current}\n", f"revision: {current + 1}\n"))
        manifest = tmp_path / "users" / "alice" / "memory.json"
        document = json.loads(manifest.read_text())
        document["revision"] += 1
        manifest.write_text(json.dumps(document, indent=2))
        return f"fact_{number:08x}"

    memory = open_memory(tmp_path, server, id_factory=ids, fact_eviction_policy="hybrid-v1")
    seed(memory, stored_fact("fact_a", "Prefers uv"))
    server.enqueue(
        answer(newFacts=[new_fact("Likes tea.")], factsToReinforce=[reinforce("fact_a")])
    )
    with pytest.raises(FactRevisionConflict):
        memory.learn("t", CONFIRMING)
    memory.reload()
    assert set(facts_by_id(memory)) == {"fact_a"}
    assert memory.get_fact("fact_a").lastConfirmedAt is None  # nothing half-applied
    assert len(server.requests) == 1
    assert memory.audit() == ()
